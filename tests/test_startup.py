"""A job's own start-up (issue 44 point 2): a profile row's `startup_s` replaces the cluster's
`restart_overhead_s` for that job's restarts (and first starts, where they pay one), in the
simulator and the policies' tables; the service learns it from each run's first report."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from helpers import Scripted, cluster, job

from andreas.errors import ScenarioError
from andreas.io import load_scenario, read_profiles, write_scenario
from andreas.model import Profiles, Scenario
from andreas.policies.base import Assignment, JobView, Snapshot
from andreas.policies.search.planning import PlanningContext
from andreas.service.learning import startup_s
from andreas.sim.engine import simulate


def slow_start(overhead=10.0, startup=30.0, jobs=()):
    """One 2-GPU node; profile "slow" starts up in `startup` s on one GPU (None: the
    cluster's `overhead`), profile "p" takes the cluster's; both 10 s per epoch."""
    cl = cluster([("n0", "A", 2)], {"A": [300, 500]}, overhead=overhead)
    own = {} if startup is None else {"slow": {("A", 1): startup}}
    return Scenario(cl, Profiles({"slow": {("A", 1): 10.0}, "p": {("A", 1): 10.0}},
                                 startup=own), tuple(jobs))


def test_first_starts_and_restarts_take_the_profiles_start_up_by_hand():
    # a (slow: 30 s) and b (the cluster's 10 s) first start at 0 and pay their start-ups:
    # a runs 3 epochs from 30 s to 60 s, b from 10 s to 40 s
    sc = slow_start(jobs=[job("a", epochs=3, profile="slow"), job("b", epochs=3)])
    result = simulate(sc, Scripted(lambda t, ids: {i: ("n0", 1) for i in ids}),
                      first_start_overhead=True)
    done = {r.job_id: r.completion_time for r in result.jobs}
    assert done == {"a": pytest.approx(60.0), "b": pytest.approx(40.0)}
    restarts = {s.job_id: s.end - s.start for s in result.segments if s.phase == "restart"}
    assert restarts == {"a": pytest.approx(30.0), "b": pytest.approx(10.0)}


def test_a_resume_takes_the_profiles_start_up():
    # a runs 0-20 (2 epochs), is paused while c (due soon) runs alone 20-40, resumes at 40:
    # 30 s of start-up, then its last epoch: done at 80 (the cluster's 10 s would give 60)
    sc = slow_start(jobs=[job("a", epochs=3, profile="slow"), job("c", submit=20, epochs=2)])
    cl = cluster([("n0", "A", 1)], {"A": [300]}, overhead=10.0)
    sc = Scenario(cl, sc.profiles, sc.jobs)

    def plan(t, ids):
        if "c" in ids:
            return {"c": ("n0", 1)}
        return {i: ("n0", 1) for i in ids}
    result = simulate(sc, Scripted(plan))
    done = {r.job_id: r.completion_time for r in result.jobs}
    assert done["a"] == pytest.approx(80.0)


def test_snapshot_and_planning_tables_use_the_profiles_start_up():
    sc = slow_start()
    started = JobView(job("a", epochs=3, profile="slow"), 3.0, None, True)
    other = JobView(job("b", epochs=3), 3.0, None, True)
    snap = Snapshot(0.0, sc.cluster, sc.profiles, (started, other))
    target = Assignment("n0", 1)
    assert snap.run_s(started, "A", target) == pytest.approx(30 + 30)
    assert snap.run_s(other, "A", target) == pytest.approx(30 + 10)
    ctx = PlanningContext(snap)
    assert ctx.table.ctime[0, 0] == pytest.approx(60.0)
    assert ctx.table.ctime[1, 0] == pytest.approx(40.0)
    # a planning penalty is a floor under either
    ctx = PlanningContext(snap, plan_restart_s=45.0)
    assert ctx.table.ctime[0, 0] == pytest.approx(75.0)
    assert ctx.table.ctime[1, 0] == pytest.approx(75.0)


def test_without_start_ups_the_cluster_overhead_holds():
    sc = slow_start(startup=None, jobs=[job("a", epochs=3, profile="slow")])
    result = simulate(sc, Scripted(lambda t, ids: {i: ("n0", 1) for i in ids}),
                      first_start_overhead=True)
    assert result.jobs[0].completion_time == pytest.approx(40.0)


def test_start_ups_round_trip_and_bad_ones_are_refused(tmp_path):
    sc = slow_start(jobs=[job("a", epochs=3, profile="slow")])
    write_scenario(sc, tmp_path)
    assert load_scenario(tmp_path).profiles.startup == {"slow": {("A", 1): 30.0}}
    path = tmp_path / "profiles.csv"
    path.write_text("profile,gpu_type,gpus,seconds_per_epoch,startup_s\nslow,A,1,10,-1\n")
    with pytest.raises(ScenarioError) as err:
        read_profiles(path, sc.cluster)
    assert "profiles.csv:2:" in str(err.value) and "field 'startup_s'" in str(err.value)


def test_the_start_up_learned_from_first_reports_by_hand():
    run = SimpleNamespace
    report = SimpleNamespace
    runs = [run(id=1, started_at=100.0, epochs_at_start=0.0),
            run(id=2, started_at=200.0, epochs_at_start=2.0),
            run(id=3, started_at=300.0, epochs_at_start=4.0)]  # no report yet
    reports = [report(run_id=1, time=112.0, epochs_done=1.0),  # 12 s, one 2 s epoch: 10 s
               report(run_id=1, time=114.0, epochs_done=2.0),
               report(run_id=2, time=210.0, epochs_done=4.0)]  # 10 s, two 3 s epochs: 4 s
    assert startup_s(runs, reports, {1: 2.0, 2: 3.0, 3: 2.0}) == pytest.approx(7.0)
    assert startup_s(runs, [], {1: 2.0}) is None
    # a report before the launch (clock skew, or a hostile job) learns 0, not a negative
    assert startup_s(runs[:1], [report(run_id=1, time=90.0, epochs_done=1.0)],
                     {1: 2.0}) == 0.0


def test_the_oddest_values_the_api_accepts_still_plan():
    """A submission may give 1e5 W per GPU and a day of start-up (the API's bounds), and a
    job's reports may teach a day of start-up: every policy still decides a valid plan and
    the forecast ends, for that job and the others."""
    import math

    from andreas.policies import make_policy
    from andreas.policies.base import check_plan
    from andreas.sim.forecast import forecast

    cl = cluster([("n0", "A", 2)], {"A": [300, 500]}, overhead=10.0)
    profiles = Profiles({"odd": {("A", 1): 1e-3}, "p": {("A", 1): 10.0}},
                        power={"odd": {("A", 1): 1e5}}, startup={"odd": {("A", 1): 86400.0}})
    views = (JobView(job("odd", epochs=1, profile="odd"), 1.0, Assignment("n0", 1), True),
             JobView(job("b", epochs=3), 3.0), JobView(job("c", epochs=3, due=50.0), 3.0))
    snap = Snapshot(0.0, cl, profiles, views, first_start_overhead=True)
    for name in ("greedy", "andreas", "andreas-paper", "edf"):
        plan = make_policy(name, seed=1).decide(snap)
        check_plan(snap, plan, name)
        predicted = forecast(snap, plan, make_policy(name, seed=1))
        assert set(predicted) == {"odd", "b", "c"}
        assert all(math.isfinite(f.completion) and math.isfinite(f.total_cost)
                   for f in predicted.values()), name
