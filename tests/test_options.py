"""Policy options in one place: the same check for make_policy, --set, option files and
service.yaml; an unknown key is an error that lists the valid ones."""

import pytest
from typer.testing import CliRunner

from andreas.cli import app
from andreas.errors import AndreasError
from andreas.policies import make_policy
from andreas.policies.options import check_options, parse_assignments, shared_options


def test_values_are_converted_by_the_option_type():
    got = check_options("andreas", {"hold_share": "off", "max_iterations": "7", "defer": "no",
                                    "extra_orders": "wspt, atc", "pi": 0.1})
    assert got == {"hold_share": None, "max_iterations": 7, "defer": False,
                   "extra_orders": ("wspt", "atc"), "pi": 0.1}
    assert make_policy("andreas", **got).params.extra_orders == ("wspt", "atc")


@pytest.mark.parametrize("options, message", [
    ({"hold_shar": 0.1}, "unknown option 'hold_shar' for policy 'andreas'; valid: alpha"),
    ({"max_iterations": 2.5}, "option 'max_iterations' of policy 'andreas': expected an "
                              "integer"),
    ({"defer": "maybe"}, "expected true or false"),
])
def test_bad_options_are_refused_by_make_policy(options, message):
    with pytest.raises(AndreasError, match=message):
        make_policy("andreas", **options)


def test_a_baseline_takes_only_a_seed():
    make_policy("fifo", seed=3)
    with pytest.raises(AndreasError, match="valid: seed"):
        make_policy("fifo", hold_share=0.1)


def test_shared_options_apply_where_taken_and_refuse_keys_no_policy_has(tmp_path):
    assert parse_assignments(["hold_share=0.3"], ["fifo", "andreas"]) == {"hold_share": 0.3}
    with pytest.raises(AndreasError, match="--set: unknown option 'nope' for fifo, andreas"):
        parse_assignments(["nope=1"], ["fifo", "andreas"])
    with pytest.raises(AndreasError, match="expected key=value"):
        parse_assignments(["hold_share"], ["andreas"])
    f = tmp_path / "opts.yaml"
    f.write_text("hold_share: null\nmax_iterations: 5\n")
    got = shared_options(["andreas"], {"max_iterations": 1000}, f, ["max_iterations=9"])
    assert got == {"hold_share": None, "max_iterations": 9}  # --set wins over the file
    f.write_text("hold_shares: 1\n")
    with pytest.raises(AndreasError, match=f"{f}: unknown option 'hold_shares'"):
        shared_options(["andreas"], {}, f, [])


def test_cli_set_and_policies_listing(tmp_path):
    runner = CliRunner()
    out = runner.invoke(app, ["policies", "andreas"])
    assert out.exit_code == 0 and "hold_share (float?, default 0.1)" in out.output
    scen = tmp_path / "s"
    assert runner.invoke(app, ["generate", "--nodes", "2", "--jobs-per-node", "2",
                               "--out", str(scen)]).exit_code == 0
    bad = runner.invoke(app, ["simulate", str(scen), "--policy", "andreas", "--set",
                              "hold_shar=1", "--out", str(tmp_path / "o")])
    assert bad.exit_code == 2 and "unknown option 'hold_shar'" in bad.output
    assert not (tmp_path / "o").exists()  # nothing half-written
    ok = runner.invoke(app, ["simulate", str(scen), "--policy", "andreas", "--set",
                             "hold_share=off", "--set", "max_iterations=3", "--out",
                             str(tmp_path / "o")])
    assert ok.exit_code == 0, ok.output


def test_service_config_names_the_line_of_a_bad_policy_option(tmp_path):
    from conftest import write_service_files

    from andreas.errors import ScenarioError
    from andreas.service.config import read_service_config

    path = write_service_files(tmp_path)
    path.write_text(path.read_text().replace("hold_share: null", "hold_shar: null"))
    with pytest.raises(ScenarioError, match=r"service.yaml:6: field 'policy_options.hold_shar'"):
        read_service_config(path)


@pytest.mark.parametrize("policy, options, message", [
    ("andreas", {"max_iterations": 0}, "max_iterations must be >= 1"),
    ("andreas", {"elite_size": 0}, "elite_size must be >= 1"),
    ("andreas", {"pi": 3}, r"pi: expected a value in \[0, 1\]"),
    ("andreas-paper", {"alpha": -0.1}, r"alpha: expected a value in \[0, 1\]"),
    ("greedy", {"beta": 1.5}, r"beta: expected a value in \[0, 1\]"),
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
    from andreas.policies.options import option_specs

    assert make_policy("andreas").params.beta == 0.0
    assert make_policy("andreas-paper").params.beta == 0.2
    assert option_specs("andreas-paper")["beta"].default == 0.2
    assert option_specs("andreas")["beta"].default == 0.0
    assert make_policy("andreas-paper", beta=0.5).params.beta == 0.5
    assert make_policy("andreas", beta=0.3).params.beta == 0.3
