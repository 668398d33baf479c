"""Policy options in one place: the same check for make_policy, --set, option files and
service.yaml; an unknown key is an error that lists the valid ones."""

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from andreas.cli import app
from andreas.errors import AndreasError
from andreas.policies import make_policy
from andreas.policies.registry import check_options, parse_assignments, shared_options

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `examples` importable


def test_values_are_converted_by_the_option_type():
    got = check_options("andreas", {"wait.share": "off", "max_iterations": "7",
                                    "forward_check": "no", "extra_orders": "wspt, atc",
                                    "pi": 0.1})
    assert got == {"wait.share": None, "max_iterations": 7, "forward_check": False,
                   "extra_orders": ("wspt", "atc"), "pi": 0.1}
    policy = make_policy("andreas", **got)
    assert policy.params.search.extra_orders == ("wspt", "atc")
    assert "wait" not in [s.name for s in policy.pipeline.steps]  # its share off: the step off


@pytest.mark.parametrize("options, message", [
    ({"hold_shar": 0.1}, "unknown option 'hold_shar' for policy 'andreas'; valid: alpha"),
    ({"max_iterations": 2.5}, "option 'max_iterations' of policy 'andreas': expected an "
                              "integer"),
    ({"forward_check": "maybe"}, "expected true or false"),
    ({"company.share": -1}, "company.share must be >= 0 or off"),
    ({"company.sharing": 1}, "unknown option 'company.sharing'"),
    # renamed when the steps took their own options: the error says what to write now
    ({"hold_share": 0.1}, "'hold_share' of policy 'andreas' is now three steps' options: "
                          "wait.share, company.share and consolidate.share"),
    ({"defer": False}, "leave 'defer' out of the steps option"),
])
def test_bad_options_are_refused_by_make_policy(options, message):
    with pytest.raises(AndreasError, match=message):
        make_policy("andreas", **options)


def test_a_baseline_takes_only_a_seed():
    make_policy("fifo", seed=3)
    with pytest.raises(AndreasError, match="valid: seed"):
        make_policy("fifo", **{"wait.share": 0.1})


def test_a_policy_takes_only_the_options_it_uses():
    """`greedy` is one pass: the randomised passes' options would do nothing; `andreas-paper`
    is the search with the paper's options and no step."""
    with pytest.raises(AndreasError, match="unknown option 'pi' for policy 'greedy'"):
        make_policy("greedy", pi=0.1)
    with pytest.raises(AndreasError, match="unknown option 'wait.share' for policy "
                                           "'andreas-paper'"):
        make_policy("andreas-paper", **{"wait.share": 0.2})
    make_policy("greedy", **{"wait.share": 0.2}, order="edf")  # its step and its pass: taken
    with pytest.raises(AndreasError, match="'company.share' is for a step not in steps "
                                           r"\(consolidate, wait\)"):
        make_policy("andreas", steps="consolidate,wait", **{"company.share": 0.2})


def test_a_step_owns_its_options_under_its_name():
    policy = make_policy("andreas", **{"wait.share": 0.2, "company.max_load": 0.3})
    steps = {s.name: s for s in policy.pipeline.steps}
    assert steps["wait"].share == 0.2
    assert (steps["company"].share, steps["company"].max_load) == (0.1, 0.3)  # default share
    assert steps["consolidate"].share == 0.1  # another step's share is its own


def test_a_step_written_elsewhere_takes_its_own_options():
    """A step named by its import path brings its `Options`: `--set <its name>.<field>`."""
    step = "examples.plan_step:FinishNearlyDone"
    got = check_options("andreas", {"steps": step, "finish_nearly_done.share": "0.3"})
    assert got["finish_nearly_done.share"] == 0.3
    policy = make_policy("andreas", **got)
    assert [s.share for s in policy.pipeline.steps] == [0.3]
    with pytest.raises(AndreasError, match="unknown option 'finish_nearly_done.share'"):
        make_policy("andreas", **{"finish_nearly_done.share": 0.3})  # the step is not named
    with pytest.raises(AndreasError, match="finish_nearly_done.share must be"):
        make_policy("andreas", steps=step, **{"finish_nearly_done.share": 2.0})
    assert parse_assignments([f"steps={step}", "finish_nearly_done.share=0.2"],
                             ["fifo", "andreas"])["finish_nearly_done.share"] == 0.2


def test_shared_options_apply_where_taken_and_refuse_keys_no_policy_has(tmp_path):
    assert parse_assignments(["wait.share=0.3"], ["fifo", "andreas"]) == {"wait.share": 0.3}
    with pytest.raises(AndreasError, match="--set: unknown option 'nope' for fifo, andreas"):
        parse_assignments(["nope=1"], ["fifo", "andreas"])
    with pytest.raises(AndreasError, match="expected key=value"):
        parse_assignments(["wait.share"], ["andreas"])
    f = tmp_path / "opts.yaml"
    f.write_text("wait.share: null\nmax_iterations: 5\n")
    got = shared_options(["andreas"], {"max_iterations": 1000}, f, ["max_iterations=9"])
    assert got == {"wait.share": None, "max_iterations": 9}  # --set wins over the file
    f.write_text("hold_shares: 1\n")
    with pytest.raises(AndreasError, match=f"{f}: unknown option 'hold_shares'"):
        shared_options(["andreas"], {}, f, [])


def test_cli_set_and_policies_listing(tmp_path):
    runner = CliRunner()
    out = runner.invoke(app, ["policies", "andreas"])
    assert out.exit_code == 0 and "wait.share (float?, default 0.1)" in out.output
    scen = tmp_path / "s"
    assert runner.invoke(app, ["generate", "--nodes", "2", "--jobs-per-node", "2",
                               "--out", str(scen)]).exit_code == 0
    bad = runner.invoke(app, ["simulate", str(scen), "--policy", "andreas", "--set",
                              "hold_shar=1", "--out", str(tmp_path / "o")])
    assert bad.exit_code == 2 and "unknown option 'hold_shar'" in bad.output
    assert not (tmp_path / "o").exists()  # nothing half-written
    ok = runner.invoke(app, ["simulate", str(scen), "--policy", "andreas", "--set",
                             "wait.share=off", "--set", "max_iterations=3", "--out",
                             str(tmp_path / "o")])
    assert ok.exit_code == 0, ok.output


def test_service_config_names_the_line_of_a_bad_policy_option(tmp_path):
    from conftest import write_service_files

    from andreas.errors import ScenarioError
    from andreas.service.config import read_service_config

    path = write_service_files(tmp_path)
    path.write_text(path.read_text().replace("wait.share: null", "wait.shar: null"))
    with pytest.raises(ScenarioError, match=r"service.yaml:6: field 'policy_options.wait.shar'"):
        read_service_config(path)


@pytest.mark.parametrize("policy, options, message", [
    ("andreas", {"max_iterations": 0}, "max_iterations must be >= 1"),
    ("andreas", {"elite_size": 0}, "elite_size must be >= 1"),
    ("andreas", {"pi": 3}, r"pi: expected a value in \[0, 1\]"),
    ("andreas-paper", {"alpha": -0.1}, r"alpha: expected a value in \[0, 1\]"),
    ("andreas", {"beta": 1.5}, r"beta: expected a value in \[0, 1\]"),
    ("milp", {"milp_time_limit": 0}, "milp_time_limit must be > 0 seconds"),
])
def test_ranges_the_old_cli_flags_checked_are_checked_for_every_caller(policy, options,
                                                                        message):
    with pytest.raises(AndreasError, match=message):
        make_policy(policy, **options)


def test_andreas_picks_the_best_fit_node_and_andreas_paper_the_papers_draw():
    # β: andreas places on the best-fit node (β = 0, bench/zoo/notes.md), andreas-paper keeps
    # the paper's draw among the best fifth, and both take an explicit value
    from andreas.policies import make_policy
    from andreas.policies.registry import option_specs

    assert make_policy("andreas").params.search.beta == 0.0
    assert make_policy("andreas-paper").params.search.beta == 0.2
    assert option_specs("andreas-paper")["beta"].default == 0.2
    assert option_specs("andreas")["beta"].default == 0.0
    assert make_policy("andreas-paper", beta=0.5).params.search.beta == 0.5
    assert make_policy("andreas", beta=0.3).params.search.beta == 0.3
