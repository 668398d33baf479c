"""Compare, report, plot and sweep: files are valid, figure data equals the CSV/JSON numbers,
parallel equals serial, and a resumed sweep equals an uninterrupted one."""

import csv
import json
from html.parser import HTMLParser

import numpy as np
import pytest
from PIL import Image
from scipy import stats

from andreas.experiments import figures as F
from andreas.experiments.compare import compare, write_comparison
from andreas.experiments.report import write_report
from andreas.experiments.sweep import SweepConfig, run_sweep
from andreas.policies import make_policy
from andreas.sim.engine import simulate
from andreas.sim.generate import generate_paper_style, load_template
from andreas.sim.output import load_output, write_result

POLICIES = ["fifo", "edf", "ps", "greedy", "andreas"]
PARAMS = {"max_iterations": 30}


@pytest.fixture(scope="module")
def paper():
    return load_template("paper")


@pytest.fixture(scope="module")
def comparison(paper):
    scenarios = [generate_paper_style(paper, 3, k, 3000) for k in (1, 2)]
    return compare(scenarios, POLICIES, [1, 2], params=PARAMS)


@pytest.fixture(scope="module")
def report_dir(comparison, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    write_report(comparison, out)
    return out


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.images, self.captions, self.tags = [], 0, []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "img":
            self.images.append(dict(attrs)["src"])
        if tag == "figcaption":
            self.captions += 1


def test_report_files_are_valid(report_dir):
    for name in ("cost", "gantt", "power", "lateness", "cumulative"):
        path = report_dir / f"{name}.png"
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        with Image.open(path) as img:
            img.verify()
            assert img.size[0] > 300 and img.size[1] > 200
    page = (report_dir / "report.html").read_text()
    parser = _Collect()
    parser.feed(page)
    assert page.startswith("<!DOCTYPE html>") and "</html>" in page
    assert len(parser.images) == 5 and parser.captions == 5
    assert all(src.startswith("data:image/png;base64,") for src in parser.images)
    assert "table" in parser.tags and "Scenario" in page
    for name in ("table.csv", "table.json", "runs.csv", "jobs.csv", "timings.csv"):
        assert (report_dir / name).stat().st_size > 0


def test_cost_bar_data_is_the_table(report_dir):
    table = json.loads((report_dir / "table.json").read_text())
    bars = F.cost_bars_data(table)
    runs = read_csv(report_dir / "runs.csv")
    for bar, row in zip(bars, table):
        assert bar["total"] == row["total_cost_mean"]
        assert bar["energy"] + bar["tardiness"] == pytest.approx(bar["total"])
        assert (bar["low"], bar["high"]) == (row["total_cost_ci_low"], row["total_cost_ci_high"])
        mine = [float(r["total_cost"]) for r in runs if r["policy"] == row["policy"]]
        assert bar["total"] == pytest.approx(np.mean(mine))  # equal seeds per instance
        per_instance = [np.mean([float(r["total_cost"]) for r in runs
                                 if r["policy"] == row["policy"] and r["instance"] == i])
                        for i in dict.fromkeys(r["instance"] for r in runs)]
        half = stats.t.ppf(0.975, len(per_instance) - 1) * np.std(per_instance, ddof=1) \
            / np.sqrt(len(per_instance))
        assert bar["high"] - bar["total"] == pytest.approx(half)
        assert bar["low"] <= bar["total"] <= bar["high"]


def test_lateness_cdf_data_is_jobs_csv(report_dir, comparison):
    rows = read_csv(report_dir / "jobs.csv")
    cdf = F.lateness_cdf_data(rows)
    for policy in POLICIES:
        expected = sorted(float(r["completion_time"]) - float(r["due_date"])
                          for r in rows if r["policy"] == policy)
        x, y = cdf[policy]
        assert np.allclose(x, expected) and y[-1] == 1.0 and len(y) == len(expected)
    # jobs.csv holds every job of every run
    assert len(rows) == sum(len(r.jobs) for r in comparison.results)


def test_single_run_figure_data_matches_the_run_summary(comparison):
    cluster = comparison.scenarios[0].cluster
    for policy in POLICIES:
        r = comparison.result_for(0, policy)
        power = F.power_series(r.segments, cluster)
        assert power.energy_joules() / 3.6e6 == pytest.approx(r.summary["energy_kwh"], rel=1e-9)
        types = {t: sum(n.gpus for n in cluster.nodes if n.gpu_type == t)
                 for t in cluster.gpu_types}
        for t, busy in power.busy_by_type.items():
            assert busy.min() >= 0 and busy.max() <= types[t]
        cum = F.cumulative_cost_data(r.segments, cluster,
                                     {j.job_id: (j.completion_time, j.tardiness_cost)
                                      for j in r.jobs})
        assert cum.total_eur[-1] == pytest.approx(r.summary["total_cost"], rel=1e-9)
        assert np.all(np.diff(cum.total_eur) >= -1e-12)
        lanes, bars = F.gantt_data(r.segments, cluster, set())
        assert len(lanes) == sum(n.gpus for n in cluster.nodes)
        covered = sum(b.end - b.start for b in bars)
        assert covered == pytest.approx(sum((s.end - s.start) * s.gpus for s in r.segments))
        by_lane = {}
        for b in sorted(bars, key=lambda b: b.start):
            assert by_lane.get(b.lane, -1.0) <= b.start + 1e-9  # no two bars overlap in a lane
            by_lane[b.lane] = b.end


def test_parallel_run_gives_byte_identical_csv(paper, tmp_path):
    scenarios = [generate_paper_style(paper, 2, k, 4000) for k in (1, 2, 3)]
    serial = compare(scenarios, POLICIES, [1, 2], params=PARAMS, workers=1)
    parallel = compare(scenarios, POLICIES, [1, 2], params=PARAMS, workers=2)
    write_comparison(serial, tmp_path / "s")
    write_comparison(parallel, tmp_path / "p")
    for name in ("runs.csv", "jobs.csv"):
        assert (tmp_path / "s" / name).read_bytes() == (tmp_path / "p" / name).read_bytes()
    drop_time = [{k: v for k, v in r.items() if k != "scheduler_seconds_mean"}
                 for r in read_csv(tmp_path / "s" / "table.csv")]
    assert drop_time == [{k: v for k, v in r.items() if k != "scheduler_seconds_mean"}
                         for r in read_csv(tmp_path / "p" / "table.csv")]


def sweep_config():
    return SweepConfig("paper", (2, 3), (4000.0, 9000.0), 2, ("fifo", "greedy", "andreas"),
                       (1, 2), None, PARAMS)


@pytest.mark.slow
def test_interrupted_and_resumed_sweep_equals_uninterrupted(paper, tmp_path):
    full, ran = run_sweep(sweep_config(), paper, tmp_path / "full")
    assert ran == len(sweep_config().keys()) == 2 * 2 * 2 * (1 + 1 + 2)
    _, ran1 = run_sweep(sweep_config(), paper, tmp_path / "resumed", max_runs=5)
    assert ran1 == 5
    # Simulate a kill in the middle of writing a line.
    path = tmp_path / "resumed" / "sweep.csv"
    path.write_text(path.read_text() + "3,9000.0,1,andre")
    rows, ran2 = run_sweep(sweep_config(), paper, tmp_path / "resumed", workers=2)
    assert ran2 == len(sweep_config().keys()) - 5
    assert path.read_bytes() == (tmp_path / "full" / "sweep.csv").read_bytes()
    _, ran3 = run_sweep(sweep_config(), paper, tmp_path / "resumed")
    assert ran3 == 0  # nothing left to do


def test_plot_reads_a_simulate_output(paper, tmp_path):
    sc = generate_paper_style(paper, 2, 5, 5000)
    result = simulate(sc, make_policy("greedy"))
    write_result(result, tmp_path / "out")
    cluster, segments, jobs, summary = load_output(tmp_path / "out")
    assert segments == result.segments and jobs == result.jobs
    assert cluster == sc.cluster
