"""Round-based rescheduling (`period_only`): the policy is asked only at the period's ticks."""

import pytest
from helpers import cluster, job, policy_with, scenario
from hypothesis import given, settings
from hypothesis import strategies as st
from test_invariants import check_invariants, scenarios

from andreas.errors import AndreasError
from andreas.policies import make_policy, policy_names
from andreas.sim.engine import simulate


def test_jobs_start_at_the_next_round_by_hand():
    # One 1-GPU node, 10 s per epoch, rounds every 10 s. j1 arrives at 3, starts at the round
    # at 10 and ends at 20 (1 epoch); j2 arrives at 12 and waits for the round at 20 (its
    # GPU is busy at 20 only until j1 ends then: j1 ends exactly at 20, so j2 starts at 20).
    # j3 arrives at 21, starts at 30. Decisions: rounds at 10, 20, 30 (and none at arrivals).
    sc = scenario(cluster([("n0", "A", 1)], {"A": [100]}), {"p": {("A", 1): 10.0}},
                  [job("j1", submit=3, epochs=1), job("j2", submit=12, epochs=1),
                   job("j3", submit=21, epochs=0.5)])
    result = simulate(sc, make_policy("fifo"), period=10.0, period_only=True)
    starts = {r.job_id: (r.first_start, r.completion_time) for r in result.jobs}
    assert starts == {"j1": (10.0, 20.0), "j2": (20.0, 30.0), "j3": (30.0, 35.0)}
    assert result.rescheduling_points == 3
    # Every event reschedules without rounds: j1 starts at once.
    eager = simulate(sc, make_policy("fifo"), period=10.0)
    assert next(r for r in eager.jobs if r.job_id == "j1").first_start == 3.0


def test_a_round_where_nothing_happened_keeps_the_plan_but_a_revisit_time_is_a_change():
    # One 1-GPU node, rounds every 10 s; j1 (10 epochs x 10 s) arrives at 3. The policy holds
    # it at its first ask, to be looked at again at 35, then runs it: asked at 10 (the
    # arrival), at 40 (the first round past the revisit time; 20 and 30 are quiet), and never
    # again while it runs (it ends at 140, with nothing left to decide).
    from andreas.policies.base import Assignment
    from andreas.policies.decision import Decision

    asked = []

    class HoldOnce:
        name = "hold-once"

        def decide(self, snap):
            asked.append(snap.time)
            if len(asked) == 1:
                return Decision.of({}).replaced({}, revisit_at=35.0)
            return {"j1": Assignment("n0", 1)}

    sc = scenario(cluster([("n0", "A", 1)], {"A": [100]}), {"p": {("A", 1): 10.0}},
                  [job("j1", submit=3, epochs=10)])
    result = simulate(sc, HoldOnce(), period=10.0, period_only=True)
    assert asked == [10.0, 40.0] and result.rescheduling_points == 2
    assert result.jobs[0].completion_time == pytest.approx(140.0)
    # every_round asks at each round while the job is active: at 20 it runs j1 (to 120), and
    # is asked again at 30, ..., 110
    asked.clear()
    every = simulate(sc, HoldOnce(), period=10.0, period_only=True, every_round=True)
    assert asked == [10.0 * k for k in range(1, 12)] and every.rescheduling_points == 11
    assert every.jobs[0].completion_time == pytest.approx(120.0)


def test_period_only_needs_a_period():
    sc = scenario(cluster([("n0", "A", 1)], {"A": [100]}), {"p": {("A", 1): 10.0}},
                  [job("j1")])
    with pytest.raises(AndreasError, match="period_only needs a period"):
        simulate(sc, make_policy("fifo"), period_only=True)


@settings(max_examples=30, deadline=None)
@given(scenarios(), st.sampled_from(policy_names()), st.sampled_from([25.0, 100.0]))
def test_round_based_simulations_keep_the_invariants(sc, policy, period):
    result = simulate(sc, policy_with(policy, 1), period=period,
                      period_only=True)
    check_invariants(sc, result)
    assert all(r.first_start % period == pytest.approx(0.0, abs=1e-6)
               or r.first_start % period == pytest.approx(period, abs=1e-6)
               for r in result.jobs)


def test_compare_runs_rounds_too(tmp_path):
    import csv
    import subprocess
    import sys

    def compare(out, *extra):
        return subprocess.run([sys.executable, "-m", "andreas", "compare", "--generate", "2",
                               "--instances", "1", "--lambda", "4000", "--policies", "fifo",
                               "--workers", "1", "--out", str(tmp_path / out), *extra],
                              capture_output=True, text=True, timeout=300)

    def points(out):
        rows = list(csv.DictReader((tmp_path / out / "runs.csv").open()))
        return int(rows[0]["rescheduling_points"])

    bad = compare("bad", "--period-only")
    assert bad.returncode == 2 and "--period-only needs --period" in bad.stderr
    assert not (tmp_path / "bad").exists()
    bad = compare("bad", "--period", "600", "--every-round")
    assert bad.returncode == 2 and "--every-round needs --period-only" in bad.stderr
    for out, extra in (("rounds", ("--period", "600", "--period-only")),
                       ("eager", ("--period", "600"))):
        run = compare(out, *extra)
        assert run.returncode == 0, run.stderr[-2000:]
    # rounds ask the policy at the ticks only, not also at every arrival and completion
    assert points("rounds") < points("eager")


def test_path_relinking_does_not_leave_jobs_waiting_at_a_negative_price():
    # Found by the round-based hypothesis test: three zero-weight jobs share a 4-GPU node whose
    # draw hardly depends on its busy GPUs, at prices 0 and -0.05 EUR/kWh. The look-ahead
    # credited a waiting job with the (negative) energy of running alone, more than sharing
    # the node earns now, so andreas-pr left two jobs waiting on an idle cluster.
    from andreas.model import Cluster, GpuType, Job, Node, Profiles, Scenario, Tariff

    cl = Cluster({"A": GpuType("A", (50.0, 50.0, 50.0, 51.0))}, (Node("n0", "A", 4),), -0.025,
                 1.0, 0.0, Tariff((0.0, -0.05), 60.0, 0.0))
    profiles = Profiles({"p0": {("A", 1): 1.0, ("A", 2): 31.0, ("A", 4): 1.0}})
    jobs = tuple(Job(n, t, t, 0.0, 0.5, "p0") for n, t in
                 [("j1", 0.0), ("j4", 0.0), ("j5", 0.0), ("j0", 175.0), ("j2", 175.0),
                  ("j3", 175.0)])
    sc = Scenario(cl, profiles, jobs, "negative-price")
    # before the fix: SimulationError, jobs left waiting on an idle cluster at t = 225 s
    result = simulate(sc, make_policy("andreas-pr", seed=1), period=25.0, period_only=True)
    check_invariants(sc, result)
    assert len(result.jobs) == len(jobs)
