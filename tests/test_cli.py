"""The command line end to end, and every bad-input case: exit 2, one clear line, no output."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import NO_HOLDS

from andreas.io import load_scenario

GOOD_CLUSTER = """\
energy_price: 0.2
pue: 1.2
gpu_types:
  BIG:
    node_power_w: [300, 500]
  SMALL:
    node_power_w: [150]
nodes:
  - {name: a, gpu_type: BIG, gpus: 2}
  - {name: b, gpu_type: SMALL, gpus: 1}
"""
GOOD_PROFILES = """\
profile,gpu_type,gpus,seconds_per_epoch,x-note
resnet,BIG,1,10,an x- column is the writer's own note
resnet,BIG,2,6,
resnet,SMALL,1,25,
"""
GOOD_WORKLOAD = """\
job_id,submit_time,due_date,tardiness_weight,epochs,profile
j1,0,500,0.01,20,resnet
j2,10,200,0.02,12.5,resnet
j3,15,900,0.01,30,resnet
"""


def andreas(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "andreas", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def write(dir: Path, cluster=GOOD_CLUSTER, profiles=GOOD_PROFILES, workload=GOOD_WORKLOAD):
    dir.mkdir(parents=True, exist_ok=True)
    for name, text in (("cluster.yaml", cluster), ("profiles.csv", profiles),
                       ("workload.csv", workload)):
        if text is not None:
            (dir / name).write_text(text)
    return dir


def test_simulate_writes_outputs_that_account_recomputes(tmp_path):
    sc = write(tmp_path / "sc")
    out = tmp_path / "out"
    run = andreas("simulate", sc, "--policy", "andreas", "--seed", "3", "--out", out)
    assert run.returncode == 0, run.stderr
    summary = json.loads((out / "summary.json").read_text())
    for key in ("policy", "seed", "total_cost", "energy_cost", "tardiness_cost", "jobs",
                "tardy_jobs", "total_tardiness_s", "makespan_s", "rescheduling_points",
                "restarts", "scheduler_seconds"):
        assert key in summary
    assert summary["jobs"] == 3 and summary["policy"] == "andreas" and summary["seed"] == 3
    assert (out / "jobs.csv").read_text().splitlines()[0] == (
        "job_id,submit_time,due_date,first_start,completion_time,tardiness_s,tardiness_cost,"
        "energy_cost,restarts,emissions_kg")
    assert (out / "segments.csv").read_text().splitlines()[0] == (
        "job_id,node,gpu_type,gpus,start,end,epochs,phase,power_limit_w,saved_w")
    check = andreas("account", sc, out)
    assert check.returncode == 0 and check.stdout.count(" ok") == 3, check.stdout


def test_generate_then_compare_writes_table(tmp_path):
    assert andreas("generate", "--nodes", 2, "--seed", 4, "--lambda", 20000,
                   "--out", tmp_path / "g").returncode == 0
    sc = load_scenario(tmp_path / "g")
    assert len(sc.jobs) == 21 and sc.jobs[0].submit_time == 0.0
    assert [n.gpu_type for n in sc.cluster.nodes] == ["TESLA", "TURING"]
    assert [n.gpus for n in sc.cluster.nodes] == [4, 2]
    run = andreas("compare", tmp_path / "g", write(tmp_path / "mine"), "--policies",
                  "fifo,edf,ps,greedy,andreas", "--seeds", "1-2", "--max-iterations", 30,
                  "--out", tmp_path / "cmp")
    assert run.returncode == 0, run.stderr
    table = json.loads((tmp_path / "cmp" / "table.json").read_text())
    assert [r["policy"] for r in table] == ["fifo", "edf", "ps", "greedy", "andreas"]
    assert table[-1]["runs"] == 4 and table[0]["runs"] == 2  # seeds only for randomised ones
    assert table[0]["reduction_vs_fifo_pct"] == 0.0
    runs = (tmp_path / "cmp" / "runs.csv").read_text().splitlines()
    assert len(runs) == 1 + 2 * (3 + 1 + 2)
    assert "andreas" in run.stdout and "% vs fifo" in run.stdout


@pytest.mark.slow
def test_help_on_every_command():
    assert andreas("--version").stdout.startswith("andreas ")
    for cmd in ("simulate", "generate", "compare", "policies", "account", "plot", "sweep",
                "bound", "import-trace", "serve", "token"):
        run = andreas(cmd, "--help")
        assert run.returncode == 0 and "Usage" in run.stdout


def test_same_seed_same_files(tmp_path):
    sc = write(tmp_path / "sc")
    for name in ("x", "y"):
        assert andreas("simulate", sc, "--seed", 5, "--out", tmp_path / name).returncode == 0
    assert (tmp_path / "x" / "segments.csv").read_bytes() == \
        (tmp_path / "y" / "segments.csv").read_bytes()


BAD = {
    "missing file": (dict(workload=None), "workload.csv: file not found"),
    "missing column": (dict(profiles="profile,gpu_type,gpus\nresnet,BIG,1\n"),
                       "profiles.csv:1: field 'seconds_per_epoch'"),
    "unknown GPU type in profiles": (dict(profiles=GOOD_PROFILES + "resnet,H100,1,3,\n"),
                                     "profiles.csv:5: field 'gpu_type': unknown GPU type 'H100'"),
    "unknown GPU type on a node": (dict(cluster=GOOD_CLUSTER.replace("gpu_type: SMALL",
                                                                     "gpu_type: TINY")),
                                   "cluster.yaml:10: field 'nodes[1].gpu_type'"),
    "unknown profile": (dict(workload=GOOD_WORKLOAD + "j4,0,100,0.01,5,bert\n"),
                        "workload.csv:5: field 'profile': unknown profile 'bert'"),
    "no allowed configuration": (
        dict(profiles=GOOD_PROFILES + "lonely,BIG,4,3,\n",
             workload=GOOD_WORKLOAD + "j4,0,100,0.01,5,lonely\n"),
        "workload.csv:5: field 'profile': profile 'lonely' has no allowed configuration"),
    "zero epochs": (dict(workload=GOOD_WORKLOAD.replace("0.02,12.5", "0.02,0")),
                    "workload.csv:3: field 'epochs': expected epochs > 0"),
    "due before submit": (dict(workload=GOOD_WORKLOAD.replace("15,900", "15,14")),
                          "workload.csv:4: field 'due_date'"),
    "duplicate job id": (dict(workload=GOOD_WORKLOAD + "j2,20,300,0.01,5,resnet\n"),
                         "workload.csv:5: field 'job_id': duplicate job id 'j2'"),
    "short power list": (dict(cluster=GOOD_CLUSTER.replace("gpus: 1}", "gpus: 3}")),
                         "cluster.yaml:10: field 'nodes[1].gpus'"),
    "not a number": (dict(workload=GOOD_WORKLOAD.replace("j3,15", "j3,soon")),
                     "workload.csv:4: field 'submit_time': expected a number, got 'soon'"),
    "bad YAML": (dict(cluster="energy_price: [1,\n"), "cluster.yaml:"),
    "idle draw above busy": (dict(cluster=GOOD_CLUSTER.replace(
        "node_power_w: [150]", "node_power_w: [150]\n    idle_power_w: 200")),
        "field 'gpu_types.SMALL.idle_power_w': 200.0 W exceeds the draw with one busy GPU"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_clear_line_and_no_output(tmp_path, case):
    files, expected = BAD[case]
    sc = write(tmp_path / "sc", **files)
    out = tmp_path / "out"
    run = andreas("simulate", sc, "--policy", "fifo", "--out", out)
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert "Traceback" not in run.stderr
    assert expected in lines[0], lines[0]
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["sc"]  # no temporary directory left


def test_bad_options_exit_2(tmp_path):
    sc = write(tmp_path / "sc")
    assert andreas("simulate", sc, "--policy", "nope", "--out", tmp_path / "o").returncode == 2
    assert andreas("compare", sc, "--seeds", "x-y").returncode == 2
    assert andreas("compare").returncode == 2


@pytest.mark.slow
def test_slack_guard_config_energy_and_hold_options_reach_the_policy(tmp_path):
    from andreas.policies import make_policy
    from andreas.sim.engine import simulate
    from andreas.sim.generate import generate_paper_style, load_template

    sc = generate_paper_style(load_template("paper"), 5, seed=1, lam=3000)
    run = andreas("generate", "--nodes", 5, "--lambda", 3000, "--seed", 1, "--out",
                  tmp_path / "sc")
    assert run.returncode == 0, run.stderr
    costs = {}
    for args, params in ((("--slack-guard", "off", "--config-energy", "alone"),
                          {"slack_guard": None, "config_energy": "alone"}),
                         (("--hold", "off"), NO_HOLDS),
                         ((), {})):
        out = tmp_path / f"out{len(costs)}"
        run = andreas("simulate", tmp_path / "sc", "--policy", "greedy", "--out", out, *args)
        assert run.returncode == 0, run.stderr
        cost = json.loads((out / "summary.json").read_text())["total_cost"]
        assert cost == pytest.approx(
            simulate(sc, make_policy("greedy", **params)).summary["total_cost"])
        costs[args] = cost
    assert len(set(costs.values())) == 3  # the paper's choice, and no hold, cost more here
    for bad, named in ((("--slack-guard", "-1"), "slack_guard"),
                       (("--slack-guard", "x"), "slack_guard"),
                       (("--config-energy", "cheap"), "config_energy"),
                       (("--hold", "soon"), "--hold")):
        run = andreas("simulate", tmp_path / "sc", "--out", tmp_path / "bad", *bad)
        assert run.returncode == 2 and named in run.stderr, run.stderr
        assert not (tmp_path / "bad").exists()


@pytest.mark.slow
def test_report_plot_and_sweep_commands(tmp_path):
    run = andreas("compare", "--generate", 2, "--instances", 2, "--lambda", 5000, "--seeds", "1",
                  "--max-iterations", 20, "--workers", 2, "--report", tmp_path / "rep")
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "rep" / "report.html").exists()
    sc = write(tmp_path / "sc")
    assert andreas("simulate", sc, "--policy", "greedy", "--out", tmp_path / "o").returncode == 0
    run = andreas("plot", tmp_path / "o")
    assert run.returncode == 0, run.stderr
    for name in ("gantt.png", "power.png", "cumulative.png"):
        assert (tmp_path / "o" / name).read_bytes()[:4] == b"\x89PNG"
    run = andreas("sweep", "--out", tmp_path / "sw", "--nodes", "2", "--lambdas", "5000,20000",
                  "--instances", 2, "--policies", "fifo,andreas", "--max-iterations", 20)
    assert run.returncode == 0, run.stderr
    assert "N=2 vs fifo" in (tmp_path / "sw" / "reductions.md").read_text()
    assert len((tmp_path / "sw" / "sweep.csv").read_text().splitlines()) == 1 + 2 * 2 * 2
    for name in ("cost_vs_lambda.png", "reduction_vs_fifo_vs_lambda.png", "summary.csv"):
        assert (tmp_path / "sw" / name).exists()
    again = andreas("sweep", "--out", tmp_path / "sw", "--nodes", "2", "--lambdas",
                    "5000,20000", "--instances", 2, "--policies", "fifo,andreas",
                    "--max-iterations", 50)
    assert again.returncode == 2 and "other settings" in again.stderr
    assert andreas("plot", tmp_path / "nothing").returncode == 2


def test_custom_policy_example_runs():
    example = Path(__file__).parent.parent / "examples" / "custom_policy.py"
    run = subprocess.run([sys.executable, str(example)], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("srpt-fastest alone:")
    assert [line.split()[0] for line in lines[1:]] == ["fifo", "srpt-fastest", "andreas"]


def test_every_commands_help_shows_its_text_as_written():
    """Help strings are not %-formatted: a '%%' written to escape one shows as '%%'."""
    import click
    import typer
    from typer.testing import CliRunner

    from andreas.cli import app

    def commands(group, path=()):
        for name, command in group.commands.items():
            yield (*path, name)
            if isinstance(command, click.Group):
                yield from commands(command, (*path, name))

    root = typer.main.get_command(app)
    seen = list(commands(root))
    assert ("validate",) in seen and ("generate",) in seen
    for path in seen:
        result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "300"})
        assert result.exit_code == 0, (path, result.output)
        assert "%%" not in result.output, path
