"""Running the queue on fewer powered nodes when a timeline of the known jobs keeps each in
time (policies/consolidate.py): the decision by hand, its hedges (unknown load, the arrival
margin, the slack a job keeps to end later than planned), and a whole simulation by hand."""

import math

import pytest
from helpers import cluster, job, scenario, snapshot
from hypothesis import given, settings
from hypothesis import strategies as st

from andreas.policies import make_policy
from andreas.policies.base import Assignment
from andreas.policies.greedy import GreedyParams
from andreas.policies.steps.consolidate import consolidate, node_energy
from andreas.sim.engine import simulate

# n0: type A, 2 GPUs, 300 W with one busy, 400 W with two; n1: type B, 1 GPU, 500 W and half
# as fast (10 and 20 s per epoch).
TWO_TYPES = cluster([("n0", "A", 2), ("n1", "B", 1)], {"A": [300, 400], "B": [500]})
PROFILES = {"p": {("A", 1): 10.0, ("B", 1): 20.0}}


def _snap(b_due=3500.0, a_due=1e9, c_due=1e9):
    # At 500: a (50 epochs left) and c (550) run on n0; b (100 epochs) has just arrived.
    sc = scenario(TWO_TYPES, PROFILES, [job("a", due=a_due, epochs=100.0),
                                        job("c", due=c_due, epochs=600.0),
                                        job("b", submit=500.0, due=b_due, epochs=100.0)])
    return snapshot(sc, now=500.0, running={"a": ("n0", 1), "c": ("n0", 1)},
                    remaining={"a": 50.0, "c": 550.0})


# What the greedy pass plans then: b and c on n0, a moved alone to the slow n1.
PLAN = {"b": Assignment("n0", 1), "c": Assignment("n0", 1), "a": Assignment("n1", 1)}


def test_node_energy_by_hand():
    kind = TWO_TYPES.gpu_types["A"]
    # b (1000 s) and c (5500 s) from now: 400 W x 1000 s, then 300 W x 4500 s
    assert node_energy(kind, [(1000.0, 1), (5500.0, 1)]) == pytest.approx(400e3 + 1350e3)


def test_a_job_with_slack_pauses_rather_than_power_a_slow_node():
    # The plan: n0 400 W x 1000 s + 300 W x 4500 s, n1 500 W x 1000 s = 2.25 MJ. On n0 alone,
    # in order of latest start (b 2500, c and a ~1e9): b and c run, a waits; at 1500 a joins
    # c for its 500 s; c alone until 6000: 400 x 1500 + 300 x 4000 = 1.8 MJ, b ends at 1500
    # as planned and a (no due date to speak of) at 2000.
    out, awaited = consolidate(_snap(), PLAN, share=0.1, load=0.5)
    assert out == {"b": PLAN["b"], "c": PLAN["c"]} and awaited == {"n0"}
    # the timeline on both nodes puts a on n1 when n0 is full: the plan's 2.25 MJ, no gain
    assert consolidate(_snap(), {"b": PLAN["b"], "c": PLAN["c"]}, share=0.1, guard=0.5,
                       load=0.5) == ({"b": PLAN["b"], "c": PLAN["c"]}, set())


def test_nothing_changes_while_the_load_is_unknown_or_arrivals_would_take_the_slack():
    assert consolidate(_snap(), PLAN, share=0.1, load=math.inf) == (PLAN, set())
    # a, due at 5000, planned to end at 1500 on n1 (3500 s of slack), may end later keeping
    # 5 x 500 s of it: by 2500. c, due at 9000, has too little slack to end later than its
    # planned 6000, so on n0 alone (2 of 3 GPUs) b and c run and a ends at 2000, stretched by
    # 0.02 x load x 3/2 x 1500 s: in time up to load 11.1. (b and c end as planned: no margin.)
    snap = _snap(a_due=5000.0, c_due=9000.0)
    assert "a" not in consolidate(snap, PLAN, share=0.1, load=11.0)[0]
    assert consolidate(snap, PLAN, share=0.1, load=12.0) == (PLAN, set())


def test_a_job_that_ends_as_planned_needs_no_margin():
    # b is due at 1500, when the plan ends it: no slack at all. The timeline ends it then too,
    # so even at load 1000 it is in time, and a (no due date to speak of) pauses.
    out, awaited = consolidate(_snap(b_due=1500.0), PLAN, share=0.1, load=1000.0)
    assert out == {"b": PLAN["b"], "c": PLAN["c"]} and awaited == {"n0"}


@pytest.mark.parametrize("a_due, guard, pauses", [
    (2200.0, 5.0, False),  # 700 s of slack: under 5 run times, so no later than planned
    (2200.0, 1.0, False),  # keeping min(700, 500) s: by 1700, not 2000
    (2200.0, 0.2, True),  # keeping 100 s: by 2100
    (4400.0, 5.0, False),  # keeping 2500 s: by 1900
    (4600.0, 5.0, True),  # by 2100
])
def test_a_job_ends_later_than_planned_only_with_slack_to_spare(a_due, guard, pauses):
    # b due at 1700 and c at 6100 end as planned (1500, 6000) only if they run now, so on n0
    # alone a waits and ends at 2000 rather than at 1500 on n1. (Load 0: no arrival margin.)
    snap = _snap(b_due=1700.0, a_due=a_due, c_due=6100.0)
    out, awaited = consolidate(snap, PLAN, share=0.1, load=0.0, guard=guard)
    if pauses:
        assert out == {"b": PLAN["b"], "c": PLAN["c"]} and awaited == {"n0"}
    else:
        assert (out, awaited) == (PLAN, set())


def test_simulator_pauses_the_job_with_slack_by_hand():
    # c and a start on n0 at 0 (two arrivals at once: the load is unknown, nothing changes);
    # b arrives at 500 (load 2 / 500 s x 2667 s / 3 GPUs = 3.6); a, with no due date to speak
    # of, pauses, and b and c end as planned.
    # With the timeline: b and c share n0 until 1500, a rejoins c until 2000, c alone until
    # 6000: 400 x 2000 + 300 x 4000 J. Without it the greedy pass moves a to n1 at 500:
    # 400 x 1500 + 500 x 1000 + 300 x 4500 J.
    sc = scenario(TWO_TYPES, PROFILES, [job("a", epochs=100.0), job("c", epochs=600.0),
                                        job("b", submit=500.0, due=3500.0, epochs=100.0)])
    on = simulate(sc, make_policy("greedy", **{"consolidate.max_load": float("inf")}))
    off = simulate(sc, make_policy("greedy", **{"consolidate.margin": None}))
    # at load 3.6 the default consolidates nothing (consolidate.max_load 0.5)
    default = simulate(sc, make_policy("greedy"))
    assert default.energy_joules == pytest.approx(off.energy_joules)
    # a pass budget (long queues, trace replays) turns the timeline off too
    budgeted = simulate(sc, make_policy("greedy", pass_budget=1000))
    assert budgeted.energy_joules == pytest.approx(off.energy_joules)
    assert on.energy_joules == pytest.approx(400 * 2000 + 300 * 4000)
    assert off.energy_joules == pytest.approx(400 * 1500 + 500 * 1000 + 300 * 4500)
    ends = {r.job_id: r.completion_time for r in on.jobs}
    assert ends == pytest.approx({"a": 2000.0, "b": 1500.0, "c": 6000.0})
    assert on.summary["tardiness_cost"] == 0.0


def test_consolidate_margin_is_checked():
    from andreas.errors import AndreasError

    with pytest.raises(AndreasError, match="consolidate.margin must be >= 0 or off"):
        GreedyParams.of(**{"consolidate.margin": -1.0})


def test_no_timeline_beyond_the_work_budget(monkeypatch):
    # 3 jobs² × 2 nodes = 18 steps for the plan's own nodes, 9 more without n1
    import andreas.policies.steps.consolidate as module

    monkeypatch.setattr(module, "WORK_BUDGET", 17)
    assert consolidate(_snap(), PLAN, share=0.1, load=0.5) == (PLAN, set())
    monkeypatch.setattr(module, "WORK_BUDGET", 27)
    assert "a" not in consolidate(_snap(), PLAN, share=0.1, load=0.5)[0]


def test_median_slack_of_the_arrivals_by_hand():
    from andreas.policies.arrivals import ArrivalLog

    log = ArrivalLog()
    assert log.median_slack() == math.inf  # nothing seen yet
    # fastest runs 100 epochs x 10 s = 1000 s: slack shares 0.5, 1.0 and 0.1
    jobs = [job("a", due=1500.0, epochs=100.0), job("b", submit=500.0, due=2500.0, epochs=100.0),
            job("c", submit=500.0, due=1600.0, epochs=100.0)]
    log.observe(snapshot(scenario(TWO_TYPES, PROFILES, jobs), now=500.0))
    assert log.median_slack() == pytest.approx(0.5)
    # a fourth (slack 3.0): the mean of the middle two, 0.5 and 1.0
    more = [*jobs, job("d", submit=600.0, due=4600.0, epochs=100.0)]
    log.observe(snapshot(scenario(TWO_TYPES, PROFILES, more), now=600.0))
    assert log.median_slack() == pytest.approx(0.75)


@pytest.mark.parametrize("arrival_slack, consolidates", [
    (None, True),  # off: the timeline decides alone
    (0.05, True),  # the arrivals' median slack, 0.1, is above it
    (0.5, False),  # arrivals would have to start at once: the plan stands
])
def test_no_timeline_while_the_jobs_arriving_have_little_slack(arrival_slack, consolidates):
    from andreas.policies.arrivals import ArrivalLog
    from andreas.policies.decision import Decision
    from andreas.policies.steps.consolidate import Consolidate
    from andreas.policies.steps.registry import StepContext

    # Three earlier arrivals due 1.1 x their fastest run (1000 s): median slack 0.1.
    tight = [job(f"t{i}", submit=100.0 * i, due=100.0 * i + 1100.0, epochs=100.0)
             for i in range(3)]
    log = ArrivalLog()
    log.observe(snapshot(scenario(TWO_TYPES, PROFILES, tight), now=300.0))
    step = Consolidate(0.1, 0.02, math.inf, arrival_slack)
    out = step.apply(_snap(), Decision.of(PLAN), StepContext(log, 0.5))
    # the timeline pauses a (test_a_job_with_slack_pauses_rather_than_power_a_slow_node)
    assert dict(out) == ({"b": PLAN["b"], "c": PLAN["c"]} if consolidates else PLAN)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 1e6), st.floats(0.0, 1e7), st.floats(1.0, 1e4)),
                min_size=1, max_size=12))
def test_median_slack_is_the_median_of_the_arrivals_shares(arrivals):
    import statistics

    from andreas.policies.arrivals import ArrivalLog

    # (submission, slack in s, epochs) of each; the fastest run is 10 s per epoch
    jobs = [job(f"j{i}", submit=s, due=s + slack, epochs=e)
            for i, (s, slack, e) in enumerate(arrivals)]
    log = ArrivalLog(window=len(jobs))
    log.observe(snapshot(scenario(TWO_TYPES, PROFILES, jobs), now=max(s for s, _, _ in arrivals)))
    expected = statistics.median((j.due_date - j.submit_time) / (10.0 * j.epochs) - 1.0
                                 for j in jobs)
    assert log.median_slack() == pytest.approx(expected, rel=1e-9, abs=1e-9)
