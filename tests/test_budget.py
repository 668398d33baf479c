"""The decision budget (policies/budget.py, option decision_budget_ms)."""

from __future__ import annotations

import time

import pytest

from andreas.errors import AndreasError
from andreas.policies import make_policy
from andreas.policies.arrivals import ArrivalLog
from andreas.policies.base import JobView, Snapshot
from andreas.policies.budget import Deadline
from andreas.policies.greedy import GreedyParams, follower, refine
from andreas.policies.search.planning import PlanningContext
from andreas.sim.generate import generate_paper_style, load_template


def _snap(jobs=40, nodes=8):
    sc = generate_paper_style(load_template("paper"), nodes, 3, 50000)
    return sc, Snapshot(0.0, sc.cluster, sc.profiles,
                        tuple(JobView(j, j.epochs) for j in sc.jobs[:jobs]))


def _plans(elite, ctx):
    return [(e.score, e.iteration, e.placement.to_plan(ctx)) for e in elite]


def test_passes_run_in_slices_give_the_plans_of_one_run():
    _, snap = _snap()
    ctx = PlanningContext(snap)
    policy = make_policy("andreas", seed=9, max_iterations=300)
    whole = policy.elite(ctx)
    sliced = policy.elite(ctx, deadline=Deadline(time.perf_counter() + 3600))  # in 2 slices
    assert _plans(sliced, ctx) == _plans(whole, ctx)
    assert len(whole) == 10


def test_a_spent_budget_still_completes_the_deterministic_pass():
    _, snap = _snap()
    ctx = PlanningContext(snap)
    policy = make_policy("andreas", seed=9, max_iterations=300)
    spent = Deadline(time.perf_counter() - 1.0)
    elite = policy.elite(ctx, deadline=spent)
    assert 0 in {e.iteration for e in elite}  # the deterministic pass is there
    # and the first slice only: the deterministic pass and 4 randomised ones
    assert max(e.iteration for e in elite) <= 4
    greedy = make_policy("greedy").deterministic_pass(ctx)[0]
    assert greedy.to_plan(ctx) in [e.placement.to_plan(ctx) for e in elite]
    # a whole decision with a budget of 1 microsecond: a valid plan, never worse than greedy's
    # plan by the policy's own score
    plan = make_policy("andreas", seed=9, decision_budget_ms=0.001).decide(snap)
    assert plan and all(a.node in {n.name for n in snap.cluster.nodes} for a in plan.values())


def test_steps_are_skipped_past_the_deadline():
    sc, snap = _snap(jobs=3, nodes=8)
    plan = make_policy("greedy", steps=()).decide(snap)
    params = GreedyParams.of(**{"wait.share": 10.0, "company.share": 10.0,
                                "consolidate.share": 10.0})  # steps that would hold jobs back
    spent = Deadline(time.perf_counter() - 1.0)
    decision = refine(snap, plan, params, ArrivalLog(), spent)
    assert dict(decision) == dict(plan)  # no step applied
    assert decision.revisit_at is None


def test_a_budget_must_be_a_finite_non_negative_number():
    for bad in (-1.0, float("inf"), float("nan")):
        with pytest.raises(AndreasError, match="decision_budget_ms"):
            make_policy("andreas", decision_budget_ms=bad)
    effort = make_policy("andreas", decision_budget_ms="250").params.effort
    assert effort.decision_budget_ms == 250.0


def test_without_a_budget_nothing_reads_the_clock(monkeypatch):
    _, snap = _snap(jobs=10, nodes=4)
    expected = make_policy("andreas", seed=2, max_iterations=50).decide(snap)

    def no_clock():
        raise AssertionError("the clock was read")

    monkeypatch.setattr(time, "perf_counter", no_clock)
    assert make_policy("andreas", seed=2, max_iterations=50).decide(snap) == expected


def test_a_forward_check_out_of_time_keeps_the_decision_before_the_bet():
    from andreas.policies.steps.forward_check import keeps_cost

    sc, snap = _snap(jobs=6, nodes=4)
    before = make_policy("greedy", steps=()).decide(snap)
    after = dict(list(before.items())[1:])  # a bet: one job held back
    log = ArrivalLog()
    log.observe(snap)
    spent = Deadline(time.perf_counter() - 1.0)
    assert keeps_cost(snap, before, after, log, follower, 1, spent) is False
    # no bet, no check
    assert keeps_cost(snap, before, dict(before), log, follower, 1, spent) is True
    # without a deadline the check plays both forward and decides on cost
    assert isinstance(keeps_cost(snap, before, after, log, follower, 1), bool)
