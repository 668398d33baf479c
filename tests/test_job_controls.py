"""Per-job controls on the policy side: a running non-preemptible job is never paused or moved
(policies/pinning.py), and a start-as-soon-as-possible job is never held back by a plan step
(policies/pipeline.py: kept_asap). By hand, and as a property of every policy."""

from dataclasses import replace

import pytest
from helpers import cluster, job, policy_with, scenario, snapshot
from hypothesis import given, settings
from hypothesis import strategies as st
from test_invariants import scenarios

from andreas.policies import make_policy, pinning, policy_names
from andreas.policies.base import Assignment, PlanError, check_plan
from andreas.sim.engine import simulate

CL = cluster([("n0", "A", 2), ("n1", "A", 2)], {"A": [300, 400]})
PROFILES = {"p": {("A", 1): 10.0, ("A", 2): 6.0}}


def test_a_pinned_job_keeps_its_gpus_and_the_policy_plans_around_it():
    a = replace(job("a", due=50.0, epochs=100.0, weight=1.0), preemptible=False)
    b = job("b", due=60.0, epochs=10.0, weight=1.0)
    snap = snapshot(scenario(CL, PROFILES, [a, b]), running={"a": ("n0", 1)})
    # a policy that would pause `a` for the more urgent `b` on all of n0's GPUs
    class GreedyForB:
        name = "greedy-for-b"

        def decide(self, s):
            n0 = next((n for n in s.cluster.nodes if n.name == "n0"), None)
            return {"b": Assignment("n0", 2)} if n0 is not None and n0.gpus == 2 else {}

    greedy_for_b = GreedyForB()
    with pytest.raises(PlanError, match="paused or moved job 'a', which is not preemptible"):
        check_plan(snap, greedy_for_b.decide(snap), "scripted")
    # through pinning.decide the policy sees n0 with one GPU and no `a`: it cannot take n0
    plan = pinning.decide(greedy_for_b, snap)
    assert plan == {"a": Assignment("n0", 1)}
    check_plan(snap, plan, "scripted")
    # a real policy places b beside a, or on n1, and leaves a where it is
    for name in ("fifo", "edf", "greedy", "andreas"):
        plan = pinning.decide(make_policy(name), snap)
        assert plan["a"] == Assignment("n0", 1) and "b" in plan
        check_plan(snap, plan, name)


@pytest.mark.parametrize("plan, message", [
    ({"a": Assignment("n0", 1), "zz": Assignment("n1", 1)},
     "planned unknown or finished job 'zz'"),
    ({"b": Assignment("n9", 1)}, "planned job 'b' on unknown node 'n9'"),
    ({"b": Assignment("n1", 3)}, r"planned job 'b' on \('A', 3\), which its profile"),
    ({"b": Assignment("n1", 1, 150.0)}, "at a power limit of 150 W"),
    ({"a": Assignment("n0", 1), "b": Assignment("n0", 2)}, "over-subscribed node 'n0': 3 > 2"),
    ({"b": Assignment("n1", 1)}, "paused or moved job 'a', which is not preemptible"),
    ({"a": Assignment("n1", 1)}, "paused or moved job 'a', which is not preemptible"),
])
def test_the_plan_check_refuses_each_kind_of_bad_plan(plan, message):
    """check_plan, which both drivers call on every plan: each fault named (`a` runs on n0
    and may not be paused or moved; `b` waits)."""
    a = replace(job("a", epochs=100.0), preemptible=False)
    snap = snapshot(scenario(CL, PROFILES, [a, job("b")]), running={"a": ("n0", 1)})
    with pytest.raises(PlanError, match=message):
        check_plan(snap, plan, "scripted")
    check_plan(snap, {"a": Assignment("n0", 1), "b": Assignment("n1", 2)}, "scripted")


@pytest.mark.parametrize("name", policy_names())
def test_a_pinned_job_holding_what_every_waiting_job_needs_leaves_them_waiting(name):
    """n0 has 2 GPUs, `a` (not preemptible) holds one, `b` runs only on 2: what the policy
    sees is a 1-GPU node no waiting job can use. The ANDREAS policies and milp crashed on
    planning tables without a single candidate column (IndexError, then min() of nothing)."""
    one = cluster([("n0", "A", 2)], {"A": [300, 400]})
    profiles = {"one": {("A", 1): 10.0}, "two": {("A", 2): 6.0}}
    a = replace(job("a", due=50.0, epochs=100.0, weight=1.0, profile="one"), preemptible=False)
    b = job("b", submit=1.0, due=60.0, epochs=10.0, weight=1.0, profile="two")
    sc = scenario(one, profiles, [a, b])
    snap = snapshot(sc, running={"a": ("n0", 1)})
    plan = pinning.decide(make_policy(name), snap)
    assert dict(plan) == {"a": Assignment("n0", 1)}
    check_plan(snap, plan, name)
    # the same in a whole simulation: `a` starts alone at 0, `b` arrives at 1 and must wait
    records = {r.job_id: r for r in simulate(sc, policy_with(name, 1)).jobs}
    assert records["a"].first_start == 0.0
    assert records["b"].first_start == records["a"].completion_time == 1000.0


def test_a_preemptible_job_may_still_be_paused():
    a = job("a", due=1e6, epochs=100.0, weight=0.0)
    b = job("b", due=60.0, epochs=10.0, weight=1.0)
    one = cluster([("n0", "A", 2)], {"A": [300, 400]})
    snap = snapshot(scenario(one, PROFILES, [a, b]), running={"a": ("n0", 2)})
    plan = pinning.decide(make_policy("greedy"), snap)  # replans running jobs too
    assert plan.get("a") != Assignment("n0", 2) and "b" in plan


def test_a_start_asap_job_is_not_held_for_company():
    # j1 would be held for company until its latest start (as in test_company's hand case)
    one = cluster([("n0", "A", 2)], {"A": [300, 400]})
    jobs = [job("j0", submit=0.0, due=100.0, epochs=10.0),
            job("j1", submit=2000.0, due=11000.0, epochs=100.0)]
    held = {r.job_id: r for r in simulate(scenario(one, PROFILES, jobs),
                                          make_policy("greedy")).jobs}
    assert held["j1"].first_start > 9000.0  # held for company, near its latest start
    jobs[1] = replace(jobs[1], start_asap=True)
    asap = {r.job_id: r for r in simulate(scenario(one, PROFILES, jobs),
                                          make_policy("greedy")).jobs}
    assert asap["j1"].first_start == 2000.0


@settings(max_examples=40, deadline=None)
@given(scenarios(), st.sampled_from(policy_names()), st.integers(1, 3), st.data())
def test_no_policy_pauses_or_moves_a_started_non_preemptible_job(sc, policy, seed, data):
    """Every policy, whole simulations: each non-preemptible job runs in one stretch, on one
    node and GPU count, from its first start to its completion."""
    pins = set(data.draw(st.sets(st.sampled_from([j.job_id for j in sc.jobs]))))
    sc = replace(sc, jobs=tuple(replace(j, preemptible=j.job_id not in pins) for j in sc.jobs))
    result = simulate(sc, policy_with(policy, seed))
    for job_id in pins:
        segments = sorted((s for s in result.segments if s.job_id == job_id),
                          key=lambda s: s.start)
        assert len({(s.node, s.gpus) for s in segments}) == 1, f"{job_id} moved"
        for before, after in zip(segments, segments[1:]):
            assert after.start == pytest.approx(before.end), f"{job_id} was paused"
