"""A job's own power draw (issue 44 point 1): a profile row's `power_w` replaces the power
table's draw per busy GPU for that job. Hand-computed energies, the policies' choice, the
service's accounting and the recomputation from segments, and bad input."""

from __future__ import annotations

import dataclasses

import pytest
from helpers import Scripted, cluster, job

from andreas.cost import account_segments, own_power_saved_w
from andreas.errors import ScenarioError
from andreas.io import load_scenario, read_profiles, write_scenario
from andreas.model import GpuType, Profiles, Scenario
from andreas.policies import make_policy
from andreas.policies.base import JobView, Snapshot
from andreas.service.energy import modelled_costs, run_segments
from andreas.sim.engine import simulate

# Node table 300 W with one busy GPU, 500 W with two: 200 W per busy GPU over a 100 W base.
TABLE = {"A": [300, 500]}


def own_scenario(jobs, power=None, overhead=0.0, restart_w=None):
    """One 2-GPU node of type A (1e-7 EUR per joule); profile "hot" runs at 10 s per epoch on
    one GPU and draws `power` W per GPU (None: the table's); profile "p" likewise, no own
    draw."""
    cl = cluster([("n0", "A", 2)], TABLE, overhead=overhead)
    if restart_w is not None:
        cl = dataclasses.replace(cl, gpu_types={"A": GpuType("A", (300.0, 500.0),
                                                             restart_w=restart_w)})
    own = {} if power is None else {"hot": {("A", 1): power}}
    profiles = Profiles({"hot": {("A", 1): 10.0}, "p": {("A", 1): 10.0}}, power=own)
    return Scenario(cl, profiles, tuple(jobs))


def on_n0(snap):
    return {v.job_id: ("n0", 1) for v in snap.jobs}


def test_the_table_draw_per_busy_gpu_is_its_mean_step():
    assert GpuType("A", (300.0, 500.0)).busy_gpu_w == 200.0
    assert GpuType("T", (530.0, 700.0, 870.0, 1040.0)).busy_gpu_w == 170.0
    # one GPU per node: its draw above idle (the host's share counted as the GPU's)
    assert GpuType("B", (350.0,), idle_w=50.0).busy_gpu_w == 300.0
    assert own_power_saved_w(GpuType("A", (300.0, 500.0)), 2, 350.0) == -300.0
    assert own_power_saved_w(GpuType("A", (300.0, 500.0)), 2, None) == 0.0


def test_a_job_alone_draws_the_base_plus_its_own_draw_by_hand():
    # 36 epochs x 10 s = 360 s alone: 100 W base + 350 W = 450 W, not the table's 300 W
    sc = own_scenario([job("a", epochs=36, profile="hot")], power=350.0)
    policy = Scripted(lambda t, ids: {i: ("n0", 1) for i in ids})
    result = simulate(sc, policy)
    assert result.energy_joules == pytest.approx(450 * 360)
    (a,) = result.jobs
    assert a.energy_cost == pytest.approx(450 * 360 * 1e-7)
    (seg,) = result.segments
    assert seg.saved_w == pytest.approx(-150.0)
    again = account_segments(sc.cluster, sc.jobs, result.segments)
    assert again.energy_joules == pytest.approx(450 * 360, rel=1e-12)


def test_shares_on_a_shared_node_by_hand():
    # a (own 350 W) and b (the table's 200 W) together for 100 s: 500 + 150 = 650 W; each
    # takes half the 100 W base plus its GPU's draw: a 400 W, b 250 W. Then a alone for 200 s.
    sc = own_scenario([job("a", epochs=30, profile="hot"), job("b", epochs=10)], power=350.0)
    result = simulate(sc, Scripted(lambda t, ids: {i: ("n0", 1) for i in ids}))
    assert result.energy_joules == pytest.approx(650 * 100 + 450 * 200)
    by_job = {r.job_id: r for r in result.jobs}
    assert by_job["a"].energy_cost == pytest.approx((400 * 100 + 450 * 200) * 1e-7)
    assert by_job["b"].energy_cost == pytest.approx(250 * 100 * 1e-7)
    again = account_segments(sc.cluster, sc.jobs, result.segments)
    for j in ("a", "b"):
        assert again.job_energy_cost[j] == pytest.approx(by_job[j].energy_cost, rel=1e-12)


def test_without_the_column_everything_is_as_the_table_says():
    sc = own_scenario([job("a", epochs=36, profile="hot")], power=None)
    result = simulate(sc, Scripted(lambda t, ids: {i: ("n0", 1) for i in ids}))
    assert result.energy_joules == pytest.approx(300 * 360)
    assert [s.saved_w for s in result.segments] == [0.0]


def test_a_restart_draws_the_restart_draw_not_the_jobs_own():
    # first start pays 60 s of start-up at 80 W per GPU: the node 300 - (250 - 80) = 130 W;
    # then 360 s at 450 W
    sc = own_scenario([job("a", epochs=36, profile="hot")], power=350.0, overhead=60.0,
                      restart_w=80.0)
    result = simulate(sc, Scripted(lambda t, ids: {i: ("n0", 1) for i in ids}),
                      first_start_overhead=True)
    assert result.energy_joules == pytest.approx(130 * 60 + 450 * 360)
    assert [(s.phase, s.saved_w) for s in result.segments] == [("restart", pytest.approx(170.0)),
                                                               ("run", pytest.approx(-150.0))]
    # without a restart draw a restarting GPU counts as busy at the table's draw (the paper)
    sc = own_scenario([job("a", epochs=36, profile="hot")], power=350.0, overhead=60.0)
    result = simulate(sc, Scripted(lambda t, ids: {i: ("n0", 1) for i in ids}),
                      first_start_overhead=True)
    assert result.energy_joules == pytest.approx(300 * 60 + 450 * 360)


def test_the_service_accounts_a_run_as_the_simulator_does():
    """The service's busy stretches (run_segments) of the simulator's schedule give the same
    energies, total and per job, to 1e-9: restart at the restart draw, run at its own."""
    sc = own_scenario([job("a", epochs=30, profile="hot"), job("b", submit=50, epochs=10)],
                      power=350.0, overhead=20.0, restart_w=80.0)
    result = simulate(sc, Scripted(lambda t, ids: {i: ("n0", 1) for i in ids}),
                      first_start_overhead=True)
    t0 = 1_700_000_000.0
    stretches: dict[tuple, float] = {}
    for s in result.segments:  # a run's stretch: from its restart's start to its run's end
        key = (s.job_id, s.node, s.gpus)
        stretches.setdefault(key, s.start)
        stretches[key] = min(stretches[key], s.start)
    segs = []
    for (job_id, node, gpus), start in stretches.items():
        end = max(s.end for s in result.segments if s.job_id == job_id)
        own = sc.profiles.gpu_power_w(next(j.profile for j in sc.jobs if j.job_id == job_id),
                                      ("A", gpus))
        segs += run_segments(sc.cluster, job_id, node, "A", gpus, t0 + start, t0 + end, 0.0,
                             own)
    jobs = [dataclasses.replace(j, submit_time=j.submit_time + t0, due_date=j.due_date + t0)
            for j in sc.jobs]
    service = modelled_costs(sc.cluster, jobs, segs)
    simulated = account_segments(sc.cluster, sc.jobs, result.segments)
    assert service.energy_joules == pytest.approx(result.energy_joules, rel=1e-9)
    assert service.energy_joules == pytest.approx(simulated.energy_joules, rel=1e-9)
    for j in ("a", "b"):
        assert service.job_energy_cost[j] == pytest.approx(simulated.job_energy_cost[j],
                                                           rel=1e-9)


def test_policies_choose_the_type_its_own_draw_makes_cheaper():
    """Same speed on both one-GPU nodes; the table says B (300 W) is cheaper than A (400 W),
    but this profile draws 350 W per GPU on B and 100 W on A: A is cheaper for it."""
    cl = cluster([("na", "A", 1), ("nb", "B", 1)], {"A": [400], "B": [300]})
    configs = {("A", 1): 10.0, ("B", 1): 10.0}
    view = JobView(job("a", epochs=10), 10.0)
    for own, expected in ((None, "nb"), ({("A", 1): 100.0, ("B", 1): 350.0}, "na")):
        profiles = Profiles({"p": configs}, power={} if own is None else {"p": own})
        snap = Snapshot(0.0, cl, profiles, (view,))
        for name in ("greedy", "andreas", "andreas-paper"):
            plan = make_policy(name, seed=1).decide(snap)
            assert plan["a"].node == expected, (name, own)


def test_profiles_with_own_draws_round_trip(tmp_path):
    sc = own_scenario([job("a", epochs=3, profile="hot"), job("b", epochs=2)], power=350.0)
    write_scenario(sc, tmp_path)
    assert "power_w" in (tmp_path / "profiles.csv").read_text().splitlines()[0]
    back = load_scenario(tmp_path)
    assert back.profiles.power == {"hot": {("A", 1): 350.0}}
    assert back.profiles.gpu_power_w("p", ("A", 1)) is None


@pytest.mark.parametrize("rows, field, words", [
    ("hot,A,1,10,0\n", "power_w", "> 0"),
    ("hot,A,1,10,-5\n", "power_w", "> 0"),
    ("hot,A,1,10,lots\n", "power_w", "number"),
    ("hot,A,1,10,inf\n", "power_w", "finite"),
])
def test_bad_own_draws_name_the_file_line_and_field(tmp_path, rows, field, words):
    path = tmp_path / "profiles.csv"
    path.write_text("profile,gpu_type,gpus,seconds_per_epoch,power_w\n" + rows)
    with pytest.raises(ScenarioError) as err:
        read_profiles(path, own_scenario([]).cluster)
    text = str(err.value)
    assert "profiles.csv:2:" in text and f"field {field!r}" in text and words in text


def test_an_own_draw_on_a_power_limit_row_is_refused(tmp_path):
    path = tmp_path / "profiles.csv"
    path.write_text("profile,gpu_type,gpus,seconds_per_epoch,power_limit_w,gpu_power_w,power_w\n"
                    "hot,A,1,10,200,180,190\n")
    with pytest.raises(ScenarioError, match="gpu_power_w"):
        read_profiles(path, own_scenario([]).cluster)


@pytest.mark.service
def test_the_service_plans_and_charges_a_jobs_own_draw(tmp_path):
    """`fast` adds 300 W per busy GPU over a 100 W base; the cluster's start-up is 1 s. A job
    of the operator's profile `own` (500 W per GPU, 3 s of start-up in profiles.csv) is
    forecast and charged 600 W while it trains and the table's 400 W while it starts up. A
    job whose inline rows say the same is forecast so, but charged by the table and the
    cluster's start-up: a number a submitter (or a job's own reports, the learned start-up)
    gives plans, and never lowers what a job is charged."""
    from conftest import train_job, wait_for, write_service_files
    from fastapi.testclient import TestClient

    from andreas.service.api import create_app
    from andreas.service.config import read_service_config

    admin = {"Authorization": "Bearer admin-secret"}
    service = write_service_files(  # one GPU: the jobs run one after the other, each alone
        tmp_path / "svc", nodes="nodes:\n  - {name: n1, gpu_type: fast, gpus: 1}\n")
    (service.parent / "profiles.csv").write_text(
        "profile,gpu_type,gpus,seconds_per_epoch,power_w,startup_s\n"
        "mlp,fast,1,0.3,,\nown,fast,1,0.3,500,3\n")
    config = read_service_config(service)
    eur_per_j = 0.2 / 3.6e6
    bodies = {"named": train_job(4, profile="own"),
              "inline": train_job(4, profile=None, inline_profile=[
                  {"gpu_type": "fast", "gpus": 1, "seconds_per_epoch": 0.3, "power_w": 500,
                   "startup_s": 3.0}])}
    with TestClient(create_app(config, admin_token="admin-secret")) as client:
        ids = {}
        for name, body in bodies.items():
            made = client.post("/jobs", headers=admin, json=body)
            assert made.status_code == 201, made.text
            ids[name] = made.json()["id"]
        wait_for(lambda: all(client.get(f"/jobs/{i}", headers=admin).json()["state"]
                             == "completed" for i in ids.values()),
                 timeout=120, what="both jobs to complete")
        jobs = {n: client.get(f"/jobs/{i}", headers=admin).json() for n, i in ids.items()}
        runs = {n: client.get(f"/jobs/{i}/runs", headers=admin).json() for n, i in ids.items()}
    for name, row in jobs.items():
        # first plan: its own 3 s of start-up (not the cluster's 1 s) at 400 W, then
        # 4 x 0.3 s at 600 W
        assert row["predicted"]["energy_cost"] == pytest.approx(
            (400 * 3 + 600 * 1.2) * eur_per_j, rel=1e-6), name
        assert row["predicted"]["completion"] - row["submitted_at"] >= 3 + 1.2 - 1e-6
        assert row["startup_s"] is not None and 0.0 <= row["startup_s"] < 60.0  # learned
    joules = {"named": 0.0, "inline": 0.0}
    for run in runs["named"]:  # the operator's start-up and draw
        seconds = run["ended_at"] - run["started_at"]
        joules["named"] += 400 * min(3.0, seconds) + 600 * max(0.0, seconds - 3.0)
    for run in runs["inline"]:  # the table's draw throughout (no restart draw is set)
        joules["inline"] += 400 * (run["ended_at"] - run["started_at"])
    for name, row in jobs.items():
        assert row["measured"]["energy_cost"] == pytest.approx(joules[name] * eur_per_j,
                                                               rel=1e-9), name
