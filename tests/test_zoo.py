"""The benchmark zoo's runner: every recipe builds, and regret is computed as documented."""

import csv
import importlib.util
import math
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("zoo_run", ROOT / "bench" / "zoo" / "run.py")
zoo = importlib.util.module_from_spec(spec)
spec.loader.exec_module(zoo)


@pytest.mark.parametrize("recipes", ["families.yaml", "holdout.yaml", "holdout2.yaml",
                                     "holdout3.yaml", "holdout4.yaml", "holdout5.yaml"])
def test_every_family_builds(recipes):
    families = yaml.safe_load((ROOT / "bench/zoo" / recipes).read_text())["families"]
    assert len(families) >= 6  # issue 42: at least six families a hold-out
    for name, recipe in families.items():
        if "trace" in recipe and not (ROOT / recipe["file"]).exists():
            pytest.skip(f"{recipe['file']} is not here (the real traces live in ../shared)")
        # every window of a trace family holds jobs (a start past a trace's end once did not)
        count = len(recipe["starts"]) if "trace" in recipe else 1
        scenarios = zoo.build_family(name, recipe, count)
        assert len(scenarios) == count and all(sc.jobs for sc in scenarios), name


def test_an_instance_every_policy_runs_for_free_is_named_not_divided_by():
    rows = [dict(family="f", instance=0, label=lab, total=0.0, energy=0.0, tardy=0, sched_s=0)
            for lab in ("a", "b")]
    with pytest.raises(SystemExit, match="family 'f', instance 0: the best policy costs 0"):
        zoo.summarise(rows, ["f"], ["a", "b"], ["a", "b"])


def test_regret_by_hand():
    rows = [dict(family="f", instance=i, label=lab, total=t, energy=t, tardy=0, sched_s=0)
            for i, costs in enumerate([{"a": 10.0, "b": 20.0}, {"a": 30.0, "b": 15.0}])
            for lab, t in costs.items()]
    table = zoo.summarise(rows, ["f"], ["a", "b"], ["a", "b"])
    # a: regrets 1 and 2 -> geometric mean sqrt(2); b: 2 and 1 -> the same
    assert table[("f", "a")]["regret"] == pytest.approx(math.sqrt(2))
    assert table[("f", "b")]["worst"] == pytest.approx(2.0)
    assert table[(None, "a")]["regret"] == pytest.approx(math.sqrt(2))


def test_a_small_zoo_runs_end_to_end(tmp_path):
    fam = tmp_path / "families.yaml"
    fam.write_text("families:\n  tiny:\n    template: paper\n    nodes: 2\n    lambda: 3000\n"
                   "    jobs_per_node: 2\n    due_factor: [1.0, 2.0]\n")
    out = tmp_path / "zoo.md"
    assert zoo.main(["--families-file", str(fam), "--instances", "2", "--policies",
                     "fifo,greedy", "--variant", "greedy-nohold=greedy:steps=defer,power_limits",
                     "--workers", "1", "--out", str(out)]) == 0
    runs = list(csv.DictReader(out.with_suffix(".runs.csv").open()))
    assert {r["label"] for r in runs} == {"fifo", "greedy", "greedy-nohold"} and len(runs) == 6
    text = out.read_text()
    assert "| tiny |" in text and "greedy-nohold" in text
    assert out.with_suffix(".png").stat().st_size > 0


def test_the_lp_bound_table_of_the_zoo(tmp_path):
    """bench/bound_zoo.py: the LP bound of each instance, below every policy's recorded total,
    and the ratios written as the table says."""
    spec_b = importlib.util.spec_from_file_location("bound_zoo", ROOT / "bench" / "bound_zoo.py")
    bound_zoo = importlib.util.module_from_spec(spec_b)
    spec_b.loader.exec_module(bound_zoo)
    fam = tmp_path / "families.yaml"
    fam.write_text("families:\n  tiny:\n    template: paper\n    nodes: 2\n    lambda: 3000\n"
                   "    jobs_per_node: 2\n    due_factor: [1.0, 2.0]\n")
    runs = tmp_path / "zoo.runs.csv"
    assert zoo.main(["--families-file", str(fam), "--instances", "1", "--policies",
                     "fifo,greedy,andreas", "--seeds", "1", "--workers", "1",
                     "--out", str(tmp_path / "zoo.md")]) == 0
    out = tmp_path / "bound.md"
    assert bound_zoo.main(["--families-file", str(fam), "--runs", str(runs), "--instances",
                           "1", "--slots", "20", "--out", str(out)]) == 0
    row = next(line for line in out.read_text().splitlines() if line.startswith("| tiny |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    bound, andreas, ratio = float(cells[3]), float(cells[5]), float(cells[6])
    assert 0 < bound <= andreas and ratio == pytest.approx(andreas / bound, rel=2e-3)


def test_trials_against_andreas_by_hand(tmp_path):
    """bench/trials.py: per family, the trial's total over andreas's, the geometric mean of
    the instance ratios, the worst and best instance; rows of other seeds are not compared."""
    spec_t = importlib.util.spec_from_file_location("trials", ROOT / "bench" / "trials.py")
    trials = importlib.util.module_from_spec(spec_t)
    spec_t.loader.exec_module(trials)
    header = "family,instance,label,seed,total\n"
    (tmp_path / "ref.csv").write_text(header + "f,0,andreas,1,10\nf,1,andreas,1,30\n"
                                      "f,0,greedy,,5\nf,0,andreas,2,99\n")
    (tmp_path / "new.csv").write_text(header + "f,0,t,1,20\nf,1,t,1,15\nf,0,andreas,1,1\n")
    ref = trials.andreas_rows(str(tmp_path / "ref.csv"))
    got = trials.family_ratios(ref, trials.andreas_rows(str(tmp_path / "new.csv"), "t"))["f"]
    assert got["n"] == 2
    assert got["total"] == pytest.approx(35 / 40)  # (20 + 15) / (10 + 30)
    assert got["geo"] == pytest.approx(math.sqrt(2.0 * 0.5))  # ratios 2 and 0.5
    assert got["worst"] == (2.0, "0 s1") and got["best"] == (0.5, "1 s1")
