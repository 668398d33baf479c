"""GPU power limits: profiles, hand-computed energy, the policy's choice, and its guarantee."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import Scripted, cluster, job
from hypothesis import given, settings
from hypothesis import strategies as st
from test_invariants import check_invariants

from andreas.cost import account_segments
from andreas.errors import ScenarioError
from andreas.io import load_scenario, read_profiles, write_scenario
from andreas.model import PowerLevel, Profiles, Scenario
from andreas.policies import make_policy
from andreas.policies.base import Assignment, JobView, Snapshot
from andreas.policies.steps.power_limits import choose_power_limits
from andreas.sim.engine import simulate

# default limit 200 W: 10 s/epoch at 180 W per GPU; 150 W: 12 s at 140 W; 100 W: 15 s at 100 W
LEVELS = (PowerLevel(200, 10.0, 180.0), PowerLevel(150, 12.0, 140.0), PowerLevel(100, 15.0, 100.0))


def capped_scenario(table=(300, 500), jobs=()):
    cl = cluster([("n0", "A", 2)], {"A": list(table)})  # 1e-7 EUR per joule
    profiles = Profiles({"p": {("A", 1): 10.0}}, {"p": {("A", 1): LEVELS}})
    return Scenario(cl, profiles, tuple(jobs))


def test_capped_job_energy_by_hand():
    # j1: 3 epochs at 100 W from t=0 (15 s/epoch: ends at 45); j2: 2 epochs at the default
    # limit from t=0 (ends at 20). Node table 300 W (1 busy), 500 W (2 busy); j1 saves 80 W.
    sc = capped_scenario(jobs=[job("j1", epochs=3), job("j2", epochs=2)])
    policy = Scripted(lambda t, ids: {})
    policy.decide = lambda snap: {v.job_id: Assignment("n0", 1, 100.0 if v.job_id == "j1"
                                                       else None) for v in snap.jobs}
    result = simulate(sc, policy)
    # [0, 20]: 500 - 80 = 420 W; [20, 45]: 300 - 80 = 220 W
    joules = 420 * 20 + 220 * 25
    assert result.energy_joules == pytest.approx(joules)
    assert result.summary["energy_cost"] == pytest.approx(joules * 1e-7)
    by_job = {r.job_id: r for r in result.jobs}
    assert by_job["j1"].completion_time == pytest.approx(45.0)
    assert by_job["j1"].energy_cost == pytest.approx((170 * 20 + 220 * 25) * 1e-7)
    assert by_job["j2"].energy_cost == pytest.approx(250 * 20 * 1e-7)
    (s1,) = [s for s in result.segments if s.job_id == "j1"]
    assert s1.power_limit_w == 100.0 and s1.saved_w == 80.0
    again = account_segments(sc.cluster, sc.jobs, result.segments)
    assert again.energy_joules == pytest.approx(joules)
    assert again.job_energy_cost["j1"] == pytest.approx(by_job["j1"].energy_cost)


def test_changing_only_the_limit_is_not_a_restart():
    sc = capped_scenario(jobs=[job("j1", epochs=3), job("j2", submit=10, epochs=1)])
    sc = Scenario(sc.cluster.__class__(sc.cluster.gpu_types, sc.cluster.nodes, 1e-7 * 3.6e6,
                                       1.0, 30.0), sc.profiles, sc.jobs)  # restarts cost 30 s
    policy = Scripted(lambda t, ids: {})
    # j1 at the default limit until j2 arrives at t=10, then capped at 100 W
    policy.decide = lambda snap: {v.job_id: Assignment("n0", 1, None if snap.time < 10 or
                                                       v.job_id == "j2" else 100.0)
                                  for v in snap.jobs}
    result = simulate(sc, policy)
    r1 = next(r for r in result.jobs if r.job_id == "j1")
    assert r1.restarts == 0
    assert r1.completion_time == pytest.approx(10 + 2 * 15)  # 1 epoch done, 2 left at 15 s


def snap_of(sc, now=0.0, plan_jobs=None):
    views = tuple(JobView(j, j.epochs) for j in sc.jobs if j.submit_time <= now)
    return Snapshot(now, sc.cluster, sc.profiles, views)


def test_cap_pays_on_a_shared_node_but_not_alone():
    # Shared: each job adds 200 W; per epoch 200*10 = 2000 J at the default limit,
    # (200-40)*12 = 1920 at 150 W, (200-80)*15 = 1800 at 100 W: 100 W wins.
    sc = capped_scenario(jobs=[job("a", epochs=4), job("b", epochs=4)])
    plan = {"a": Assignment("n0", 1), "b": Assignment("n0", 1)}
    chosen = choose_power_limits(snap_of(sc), plan)
    assert chosen["a"].power_limit_w == 100.0 and chosen["b"].power_limit_w == 100.0
    # Alone on a node whose host draws a lot: 1000*10 = 10000 J beats 920*15 = 13800 J.
    sc = capped_scenario(table=(1000, 1200), jobs=[job("a", epochs=4)])
    chosen = choose_power_limits(snap_of(sc), {"a": Assignment("n0", 1)})
    assert chosen["a"].power_limit_w is None


def test_cap_respects_the_due_date_with_slack():
    plan = {"a": Assignment("n0", 1), "b": Assignment("n0", 1)}
    # 4 epochs: 60 s at 100 W (66 with 10 % slack), 48 s at 150 W (52.8), 40 s default
    for due, expected in ((70, 100.0), (60, 150.0), (45, None), (30, None)):
        sc = capped_scenario(jobs=[job("a", epochs=4, due=due), job("b", epochs=4)])
        assert choose_power_limits(snap_of(sc), plan)["a"].power_limit_w == expected, due


def test_no_cap_while_a_job_waits_for_that_gpu_type():
    sc = capped_scenario(jobs=[job("a", epochs=4), job("b", epochs=4), job("c", epochs=4)])
    plan = {"a": Assignment("n0", 1), "b": Assignment("n0", 1)}  # c waits
    chosen = choose_power_limits(snap_of(sc), plan)
    assert chosen["a"].power_limit_w is None and chosen["b"].power_limit_w is None


@st.composite
def limit_scenarios(draw, arrivals=True):
    """Without `arrivals`, every job is there at time 0 and fits at once (one node each)."""
    n_jobs = draw(st.integers(1, 6))
    n_nodes = draw(st.integers(1, 3)) if arrivals else n_jobs
    gpus = draw(st.integers(1, 4))
    host = draw(st.sampled_from([0, 50, 400]))
    cl = cluster([(f"n{i}", "A", gpus) for i in range(n_nodes)],
                 {"A": [host + 200 * b for b in range(1, gpus + 1)]})
    table, levels = {}, {}
    for g in range(1, gpus + 1):
        spe = float(draw(st.integers(5, 40)))
        table[("A", g)] = spe
        slow = [PowerLevel(200, spe, 180.0)]
        for limit, (factor, watts) in ((150, (1.2, 140.0)), (100, (1.6, 100.0))):
            if draw(st.booleans()):
                slow.append(PowerLevel(limit, spe * factor, watts))
        levels[("A", g)] = tuple(slow)
    jobs = []
    for i in range(n_jobs):
        submit = float(draw(st.integers(0, 300))) if arrivals else 0.0
        jobs.append(job(f"j{i}", submit=submit, due=submit + draw(st.integers(20, 900)),
                        weight=draw(st.sampled_from([0.001, 0.01, 0.05])),
                        epochs=float(draw(st.integers(1, 12)))))
    return Scenario(cl, Profiles({"p": table}, {"p": levels}),
                    tuple(sorted(jobs, key=lambda j: j.submit_time)))


class Recording:
    """Wraps a policy and checks every decision: a job is capped only if, from now, it would
    meet its due date at the default limit and still meets it at its cap."""

    def __init__(self, policy):
        self.policy, self.name = policy, policy.name

    def decide(self, snap):
        plan = self.policy.decide(snap)
        views = {v.job_id: v for v in snap.jobs}
        types = {n.name: n.gpu_type for n in snap.cluster.nodes}
        for job_id, a in plan.items():
            if a.power_limit_w is None:
                continue
            v = views[job_id]
            for limit in (None, a.power_limit_w):
                spe = snap.profiles.seconds_per_epoch(v.job.profile, types[a.node], a.gpus,
                                                      limit)
                assert snap.time + v.remaining_epochs * spe <= v.job.due_date + 1e-9
        return plan


@settings(max_examples=40, deadline=None)
@given(limit_scenarios(), st.integers(1, 3))
def test_every_cap_keeps_the_planned_job_on_time(sc, seed):
    result = simulate(sc, Recording(make_policy("andreas", seed=seed, max_iterations=20)))
    check_invariants(sc, result)  # capacity, epochs, costs from segments and figures


@settings(max_examples=40, deadline=None)
@given(limit_scenarios(arrivals=False), st.integers(1, 3))
def test_power_limits_never_make_an_on_time_job_late(sc, seed):
    """Where no job waits for GPUs, a job on time at the default limit stays on time. (With
    later arrivals a cap spends slack that a newcomer's pressure may have needed: caps are
    lifted as soon as a job waits, but the slower progress made so far stays.)"""
    with_limits = simulate(sc, make_policy("andreas", seed=seed, max_iterations=20))
    without = simulate(sc, make_policy("andreas", seed=seed, max_iterations=20,
                                       steps=("consolidate", "wait", "company", "defer")))
    late_with = {r.job_id for r in with_limits.jobs if r.tardiness_s > 1e-6}
    on_time_without = {r.job_id for r in without.jobs if r.tardiness_s <= 1e-6}
    assert not (late_with & on_time_without)
    check_invariants(sc, with_limits)


PROFILES_CSV = """\
profile,gpu_type,gpus,seconds_per_epoch,power_limit_w,gpu_power_w
p,A,1,12,150,140
p,A,1,10,200,180
p,A,2,6,,
"""


def test_profiles_csv_with_limits_reads_and_round_trips(tmp_path):
    cl = cluster([("n0", "A", 2)], {"A": [300, 500]})
    (tmp_path / "profiles.csv").write_text(PROFILES_CSV)
    profiles = read_profiles(tmp_path / "profiles.csv", cl)
    assert profiles.configs("p") == {("A", 1): 10.0, ("A", 2): 6.0}  # default = highest limit
    assert [lv.limit_w for lv in profiles.power_levels("p", ("A", 1))] == [200, 150]
    assert profiles.saved_w("p", ("A", 1), 150) == 40.0
    assert profiles.power_levels("p", ("A", 2)) == ()
    sc = Scenario(cl, profiles, (job("j1", profile="p"),), "s")
    write_scenario(sc, tmp_path / "sc")
    back = load_scenario(tmp_path / "sc")
    assert back.profiles.table == profiles.table and back.profiles.levels == profiles.levels


@pytest.mark.parametrize("rows, line, field, words", [
    ("p,A,1,10,200,180\np,A,1,12,,\n", 3, "power_limit_w", "mixes rows"),
    ("p,A,1,10,200,\n", 2, "gpu_power_w", "measured draw"),
    ("p,A,1,10,200,180\np,A,1,11,200,170\n", 3, "power_limit_w", "duplicate"),
    ("p,A,1,10,-5,180\n", 2, "power_limit_w", "positive"),
    ("p,A,1,10,200,lots\n", 2, "gpu_power_w", "expected a number"),
])
def test_bad_power_limit_rows_name_line_and_field(tmp_path, rows, line, field, words):
    cl = cluster([("n0", "A", 2)], {"A": [300, 500]})
    path = tmp_path / "profiles.csv"
    path.write_text("profile,gpu_type,gpus,seconds_per_epoch,power_limit_w,gpu_power_w\n" + rows)
    with pytest.raises(ScenarioError) as err:
        read_profiles(path, cl)
    text = str(err.value)
    assert f"{path}:{line}" in text and field in text and words in text, text


def test_catalogue_power_limits_drive_the_cli(tmp_path):
    """The shipped Zeus profiles: `simulate` caps some GPU-hours, without the power_limits step
    none,
    and `account` recomputes the capped run's costs from segments.csv."""
    from andreas.catalogue import catalogue_power_limits_path

    sc_dir = tmp_path / "sc"
    sc_dir.mkdir()
    (sc_dir / "cluster.yaml").write_text(
        "gpu_types: {V100: {}, P100: {}}\nnodes:\n  - {name: v0, gpu_type: V100, gpus: 8}\n"
        "  - {name: p0, gpu_type: P100, gpus: 8}\nenergy_price: 0.2\n")
    (sc_dir / "profiles.csv").write_text(catalogue_power_limits_path().read_text())
    name = "resnet50-imagenet-b128-adadelta"
    (sc_dir / "workload.csv").write_text(
        "job_id,submit_time,due_date,tardiness_weight,epochs,profile\n"
        + "".join(f"j{i},{60 * i},{60 * i + 40000},0.03,2,{name}\n" for i in range(6)))
    outs = {}
    for flag in ("capped", "uncapped"):
        steps = "consolidate,wait,company,defer" + (",power_limits" if flag == "capped" else "")
        out = tmp_path / flag
        run = subprocess.run([sys.executable, "-m", "andreas", "simulate", sc_dir, "--out", out,
                              "--max-iterations", "50", "--steps", steps], capture_output=True,
                             text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        outs[flag] = [line.split(",") for line in (out / "segments.csv").read_text()
                      .splitlines()[1:]]
        check = subprocess.run([sys.executable, "-m", "andreas", "account", sc_dir, out],
                               capture_output=True, text=True, timeout=300)
        assert check.returncode == 0 and "MISMATCH" not in check.stdout, check.stdout
    assert any(row[8] for row in outs["capped"])
    assert not any(row[8] for row in outs["uncapped"])


def test_service_refuses_power_limit_profiles(tmp_path):
    from conftest import write_service_files

    from andreas.service.config import read_service_config

    config = write_service_files(tmp_path)
    (tmp_path / "profiles.csv").write_text(
        "profile,gpu_type,gpus,seconds_per_epoch,power_limit_w,gpu_power_w\n"
        "mlp,fast,1,0.3,200,180\nmlp,fast,1,0.4,150,140\n")
    with pytest.raises(ScenarioError, match="power_limit_w"):
        read_service_config(config)
