"""The service's planning without a database (service/planner.py), by hand: a quota refuses a
start and the GPUs go to another job; the plan the last forecast foresaw is kept only after
foreseeable events; a changed speed estimate switches plans only when the forecast says it
pays."""

from dataclasses import replace

import pytest
from helpers import Scripted, cluster, job, scenario, snapshot

from andreas.policies import make_policy
from andreas.policies.base import Assignment
from andreas.service import decider
from andreas.service.decider import InlineDecider
from andreas.service.planner import Planner
from andreas.service.quotas import Limits, Quotas

# two nodes of 2 GPUs; 10 s per epoch on one GPU, 2 s on two
CLUSTER = cluster([("n1", "A", 2), ("n2", "A", 2)], {"A": [100, 150]})
PROFILES = {"p": {("A", 1): 10.0, ("A", 2): 2.0}}


def _planner(policy="fifo", quotas=Quotas(), scripted=None):
    decider = InlineDecider(scripted or make_policy(policy), policy, {})
    return Planner(decider, policy, quotas)


def test_a_start_over_quota_is_refused_and_the_policy_decides_again_without_it():
    one_node = cluster([("n1", "A", 2)], {"A": [100, 150]})
    snap = snapshot(scenario(one_node, {"p": {("A", 1): 10.0}},
                             [job("a", submit=0.0), job("b", submit=1.0), job("c", submit=2.0)]),
                    now=5.0)
    owners = {"a": "alice", "b": "alice", "c": "bob"}
    planner = _planner(quotas=Quotas(Limits(), {"alice": Limits(max_gpus=1)}))
    # fifo first runs a and b (2 GPUs); b is over alice's quota, so it decides again without
    # b, and c gets the GPU
    proposal = planner.decide(snap, {}, ["submit"], owners, set())
    assert proposal.plan == {"a": Assignment("n1", 1), "c": Assignment("n1", 1)}
    assert proposal.why["b"].kind == "over_quota" and proposal.source == "policy"
    # a drained node starts nothing: every start is refused, each saying why
    drained = planner.decide(snap, {}, ["submit"], owners, {"n1"})
    assert drained.plan == {} and {r.kind for r in drained.why.values()} == {"node_drained"}


def test_the_forecast_keeps_to_the_quotas_too():
    # alice's a (100 s) and bob's c (10 s) run on the two GPUs; alice's b waits. When c ends
    # at 10, b may not start: alice may hold one GPU. It starts when a ends, at 100; without
    # the quota the forecast starts it at 10.
    one_node = cluster([("n1", "A", 2)], {"A": [100, 150]})
    sc = scenario(one_node, {"p": {("A", 1): 10.0}},
                  [job("a", epochs=10.0), job("b", epochs=1.0), job("c", epochs=1.0)])
    snap = snapshot(sc, now=0.0, running={"a": ("n1", 1), "c": ("n1", 1)})
    running = {"a": Assignment("n1", 1), "c": Assignment("n1", 1)}
    owners = {"a": "alice", "b": "alice", "c": "bob"}
    starts = {}
    for name, quotas in (("quota", Quotas(Limits(), {"alice": Limits(max_gpus=1)})),
                         ("none", Quotas())):
        planner = _planner(quotas=quotas)
        proposal = planner.decide(snap, running, ["submit"], owners, set())
        assert proposal.plan == running
        starts[name] = planner.forecast(snap, proposal)["b"].start
        # the decisions it foresaw keep to the quota as well
        at_ten = next(d for d in planner.foreseen if d.time == pytest.approx(10.0))
        assert ("b" in at_ten.plan) == (name == "none")
    assert starts == {"quota": pytest.approx(100.0), "none": pytest.approx(10.0)}


def test_the_plan_the_forecast_foresaw_is_kept_after_foreseeable_events_only():
    # a (1 epoch) and b run at 0, c waits; the forecast foresees the decision at 10, when a
    # ends: b keeps running and c starts
    jobs = [job("a", epochs=1.0), job("b", submit=0.5), job("c", submit=1.0)]
    sc = scenario(cluster([("n1", "A", 2)], {"A": [100, 150]}), {"p": {("A", 1): 10.0}}, jobs)
    planner = _planner()
    first = planner.decide(snapshot(sc, now=1.0), {}, ["submit"], {}, set())
    assert set(first.plan) == {"a", "b"} and first.source == "policy"
    predicted = planner.forecast(snapshot(sc, now=1.0), first)
    assert predicted["a"].completion == pytest.approx(11.0)
    assert predicted["c"].start == pytest.approx(11.0)
    later = snapshot(sc, now=11.0, running={"b": ("n1", 1)}, remaining={"b": 9.0, "c": 10.0})
    later = replace(later, jobs=tuple(v for v in later.jobs if v.job_id != "a"))
    kept = planner.decide(later, {"b": Assignment("n1", 1)}, ["completion"], {}, set())
    assert kept.source == "forecast" and planner.kept == 1
    assert kept.plan == {"b": Assignment("n1", 1), "c": Assignment("n1", 1)}
    # a submission is not foreseen: a fresh decision
    fresh = planner.decide(later, {"b": Assignment("n1", 1)}, ["submit"], {}, set())
    assert fresh.source == "policy" and planner.kept == 1


def test_a_changed_speed_estimate_switches_plans_only_when_the_forecast_says_it_pays():
    sc = scenario(CLUSTER, PROFILES, [job("r", epochs=10.0)])
    snap = snapshot(sc, now=0.0, running={"r": ("n1", 1)})
    running = {"r": Assignment("n1", 1)}
    # the same configuration on the other node: no saving, so the running plan is kept
    moved = _planner(scripted=Scripted(lambda now, ids: {"r": ("n2", 1)}))
    proposal = moved.decide(snap, running, ["prediction-moved"], {}, set())
    assert proposal.source == "kept" and proposal.plan == running
    assert proposal.predicted is not None and proposal.revisit_at is None
    # two GPUs: 20 s at 150 W against 100 s at 100 W: it pays, so the fresh plan is taken
    wider = _planner(scripted=Scripted(lambda now, ids: {"r": ("n1", 2)}))
    proposal = wider.decide(snap, running, ["prediction-moved"], {}, set())
    assert proposal.source == "policy" and proposal.plan == {"r": Assignment("n1", 2)}
    assert proposal.predicted["r"].completion == pytest.approx(20.0)
    # after any other event, the fresh decision stands without that comparison
    proposal = moved.decide(snap, running, ["submit"], {}, set())
    assert proposal.source == "policy" and proposal.predicted is None
    # an operator who wants a switch to save more than 80 % (switch_gain) keeps the plan
    demanding = Planner(InlineDecider(Scripted(lambda now, ids: {"r": ("n1", 2)}), "fifo", {}),
                        "fifo", Quotas(), switch_gain=0.8)
    proposal = demanding.decide(snap, running, ["prediction-moved"], {}, set())
    assert proposal.source == "kept" and proposal.plan == running
    assert proposal.weighed["policy"] == pytest.approx(0.3 * proposal.weighed["kept"])



def test_a_switch_must_save_more_than_twice_the_learned_speeds_standard_error():
    """The fresh plan saves 70 % (as above). Learned speeds with a standard error of 40 %
    ask for 80 %: the plan is kept; 30 % asks for 60 %: it switches. Jobs out of view and
    small errors leave `switch_gain` (5 %)."""
    sc = scenario(CLUSTER, PROFILES, [job("r", epochs=10.0)])
    snap = snapshot(sc, now=0.0, running={"r": ("n1", 1)})
    running = {"r": Assignment("n1", 1)}
    wider = _planner(scripted=Scripted(lambda now, ids: {"r": ("n1", 2)}))
    proposal = wider.decide(snap, running, ["prediction-moved"], {}, set(), {"r": 0.4})
    assert proposal.source == "kept" and proposal.gain_needed == pytest.approx(0.8)
    assert proposal.weighed["policy"] == pytest.approx(0.3 * proposal.weighed["kept"])
    proposal = wider.decide(snap, running, ["prediction-moved"], {}, set(), {"r": 0.3})
    assert proposal.source == "policy" and proposal.gain_needed == pytest.approx(0.6)
    assert wider.gain_needed(snap, {"gone": 0.9, "r": 0.01}) == pytest.approx(0.05)
    # nothing weighed after an unforeseen event: the fresh decision stands, whatever the error
    proposal = wider.decide(snap, running, ["submit"], {}, set(), {"r": 0.9})
    assert proposal.source == "policy" and proposal.gain_needed is None
    # nor when the running plan no longer fits (its node is gone): no bar to report
    gone = {"r": Assignment("gone", 1)}
    proposal = wider.decide(snap, gone, ["prediction-moved"], {}, set(), {"r": 0.4})
    assert proposal.source == "policy" and proposal.weighed is None
    assert proposal.gain_needed is None

# two one-GPU nodes of one speed, the big one drawing 3x the small one's power
TWO_DRAWS = cluster([("big", "B", 1), ("small", "S", 1)], {"B": [300], "S": [100]})


class FillFree:
    """Keeps every running job where it runs and gives each free node, in the cluster's order,
    to the next waiting job by id: a policy whose every decision is known by hand."""

    name = "fill"

    def decide(self, snap):
        plan = {v.job_id: v.assignment for v in snap.jobs if v.assignment is not None}
        used = {a.node for a in plan.values()}
        free = [n.name for n in snap.cluster.nodes if n.name not in used]
        waiting = sorted(v.job_id for v in snap.jobs if v.assignment is None)
        plan.update({job_id: Assignment(node, 1) for job_id, node in zip(waiting, free)})
        return plan


def _reordered(c_due=1e9, c_weight=0.01):
    """a (1 epoch) starts on big and b (1.1 epochs) on small at 0, c and d wait: the forecast
    foresees c on big when a ends at 10 and d on small when b ends at 11. Then b ends first,
    at 9.5 s: the planner and the snapshot of that moment."""
    jobs = [job("a", epochs=1.0), job("b", epochs=1.1),
            job("c", epochs=1.0, due=c_due, weight=c_weight), job("d", epochs=1.0)]
    sc = scenario(TWO_DRAWS, {"p": {("B", 1): 10.0, ("S", 1): 10.0}}, jobs)
    planner = _planner(scripted=FillFree())
    first = planner.decide(snapshot(sc), {}, ["submit"], {}, set())
    assert first.plan == {"a": Assignment("big", 1), "b": Assignment("small", 1)}
    predicted = planner.forecast(snapshot(sc), first)
    assert (predicted["c"].start, predicted["d"].start) == (pytest.approx(10.0),
                                                           pytest.approx(11.0))
    later = snapshot(sc, now=9.5, running={"a": ("big", 1)}, remaining={"a": 0.05})
    return planner, replace(later, jobs=tuple(v for v in later.jobs if v.job_id != "b"))


def test_completions_in_another_order_start_the_jobs_where_the_forecast_said():
    planner, later = _reordered()
    # a fresh decision would start c on the free small node, at a third of the power its
    # forecast charged it; the repaired plan keeps c for big (busy until 10 s) and starts d
    # where it was foreseen. Both cost the same, so the foreseen one stays.
    proposal = planner.decide(later, {"a": Assignment("big", 1)}, ["completion"], {}, set())
    assert proposal.source == "repaired"
    assert proposal.plan == {"a": Assignment("big", 1), "d": Assignment("small", 1)}
    assert proposal.why["c"].kind == "waiting_for_gpus" and proposal.why["c"].node == "big"
    assert proposal.why["c"].until == pytest.approx(10.0)
    assert proposal.predicted["c"].start == pytest.approx(10.0)  # its forecast, made once
    assert proposal.weighed["policy"] == pytest.approx(proposal.weighed["repaired"])
    # after an unforeseen event the policy decides afresh
    fresh = planner.decide(later, {"a": Assignment("big", 1)}, ["submit"], {}, set())
    assert fresh.source == "policy"
    assert fresh.plan == {"a": Assignment("big", 1), "c": Assignment("small", 1)}


def test_a_fresh_decision_replaces_the_foreseen_starts_when_it_pays():
    # c is due at 15 at 100 EUR a second late: waiting for big it ends at 20 (5 s late),
    # started now on small at 19.5 (4.5 s): 10 % cheaper, over the 5 % a switch must save
    planner, later = _reordered(c_due=15.0, c_weight=100.0)
    proposal = planner.decide(later, {"a": Assignment("big", 1)}, ["completion"], {}, set())
    assert proposal.source == "policy"
    assert proposal.plan == {"a": Assignment("big", 1), "c": Assignment("small", 1)}
    assert proposal.predicted["c"].completion == pytest.approx(19.5)
    assert proposal.weighed["repaired"] - proposal.weighed["policy"] == pytest.approx(50.0)


def test_the_foreseen_starts_keep_each_nodes_order():
    from andreas.service.planner import foreseen_starts
    from andreas.sim.forecast import ForeseenDecision

    # n1 (2 GPUs) runs r on one GPU; x was foreseen on n1's two GPUs at 20 s, y on one at 30 s,
    # z on n2 at 40 s; w was never foreseen to start
    sc = scenario(CLUSTER, PROFILES, [job(j) for j in "rwxyz"])
    snap = snapshot(sc, now=5.0, running={"r": ("n1", 1)})
    foreseen = [ForeseenDecision(40.0, frozenset("wyz"), {"y": Assignment("n1", 1),
                                                         "z": Assignment("n2", 1)}),
                ForeseenDecision(20.0, frozenset("rwxyz"), {"r": Assignment("n1", 1),
                                                           "x": Assignment("n1", 2)}),
                ForeseenDecision(30.0, frozenset("wyz"), {"y": Assignment("n1", 1)})]
    plan, why = foreseen_starts(snap, foreseen)
    # y would fit n1's free GPU but x, foreseen there first, still waits; z starts on n2
    assert plan == {"r": Assignment("n1", 1), "z": Assignment("n2", 1)}
    assert {j: (r.node, r.until) for j, r in why.items()} == {"x": ("n1", 20.0),
                                                              "y": ("n1", 30.0)}


def _swapped(decision):
    """`decision` with its two jobs' nodes swapped: what an earlier forecast might have
    foreseen under other speeds."""
    from andreas.sim.forecast import ForeseenDecision

    (j1, a1), (j2, a2) = decision.plan.items()
    return ForeseenDecision(decision.time, decision.jobs, {j1: a2, j2: a1})


def _two_ends_at_ten():
    """a and b (1 epoch) start on big and small at 0 and both end at 10; c and d wait."""
    jobs = [job(j, epochs=1.0) for j in "abcd"]
    return scenario(TWO_DRAWS, {"p": {("B", 1): 10.0, ("S", 1): 10.0}}, jobs)


def test_a_forecast_keeps_to_the_decisions_the_last_one_foresaw():
    sc = _two_ends_at_ten()
    planner = _planner()
    first = planner.decide(snapshot(sc), {}, ["submit"], {}, set())
    predicted = planner.forecast(snapshot(sc), first)
    at_ten = planner.foreseen[0]
    assert at_ten.time == pytest.approx(10.0) and at_ten.jobs == {"c", "d"}
    # as if an earlier forecast, under other learned speeds, had foreseen c and d swapped
    planner.foreseen = [_swapped(at_ten)]
    running = dict(first.plan)
    now = snapshot(sc, now=5.0, running={j: (a.node, a.gpus) for j, a in running.items()},
                   remaining={"a": 0.5, "b": 0.5})
    # a foreseeable event: the forecast keeps to the foreseen decision at 10
    kept = planner.decide(now, running, ["revisit"], {}, set())
    assert kept.follows_foresight
    again = planner.forecast(now, kept)
    assert planner.foreseen[0].plan == _swapped(at_ten).plan
    # the energy of c and d swapped with their nodes (300 W against 100 W, 10 s each)
    assert again["c"].energy_cost == pytest.approx(predicted["d"].energy_cost)
    assert again["d"].energy_cost == pytest.approx(predicted["c"].energy_cost)
    assert predicted["c"].energy_cost != pytest.approx(predicted["d"].energy_cost)
    # an arrival was not foreseen: the forecast asks the policy afresh
    planner.foreseen = [_swapped(at_ten)]
    fresh = planner.decide(now, running, ["submit"], {}, set())
    assert not fresh.follows_foresight
    planner.forecast(now, fresh)
    assert planner.foreseen[0].plan == at_ten.plan


class FillFreeBackwards(FillFree):
    """FillFree giving the free nodes to the waiting jobs in reverse id order: a policy whose
    later decisions differ from FillFree's though it keeps the same running jobs now."""

    def decide(self, snap):
        plan = {v.job_id: v.assignment for v in snap.jobs if v.assignment is not None}
        used = {a.node for a in plan.values()}
        free = [n.name for n in snap.cluster.nodes if n.name not in used]
        waiting = sorted((v.job_id for v in snap.jobs if v.assignment is None), reverse=True)
        plan.update({job_id: Assignment(node, 1) for job_id, node in zip(waiting, free)})
        return plan


def _foreseen_then_backwards(monkeypatch, c_epochs, d_epochs):
    """a (1 epoch) on big and b (1.1 epochs) on small at 0, c and d waiting: the forecast
    (FillFree) foresees c on big when a ends at 10, d on small when b ends at 11. Then the
    policy changes its mind about the later decisions (FillFreeBackwards: d on big at 10, c
    on small at 11), as a policy does when a learned speed moves. The forecasts make their
    later decisions with the same policy as the planner (not a fresh one made by name)."""
    forecasting = [FillFree()]
    monkeypatch.setattr(decider, "forecast_policy", lambda name, options, jobs: forecasting[0])
    jobs = [job("a", epochs=1.0), job("b", epochs=1.1), job("c", epochs=c_epochs),
            job("d", epochs=d_epochs)]
    sc = scenario(TWO_DRAWS, {"p": {("B", 1): 10.0, ("S", 1): 10.0}}, jobs)
    planner = _planner(scripted=FillFree())
    first = planner.decide(snapshot(sc), {}, ["submit"], {}, set())
    predicted = planner.forecast(snapshot(sc), first)
    assert (predicted["c"].start, predicted["d"].start) == (pytest.approx(10.0),
                                                           pytest.approx(11.0))
    forecasting[0] = FillFreeBackwards()
    planner.decider = InlineDecider(forecasting[0], "fifo", {})
    return planner, sc


def _speed_moved_at_five(planner, sc):
    """The planner's decision at 5 s, a and b running as they started, after a learned
    speed moved; and the running plan."""
    running = {"a": Assignment("big", 1), "b": Assignment("small", 1)}
    at_five = snapshot(sc, now=5.0, running={"a": ("big", 1), "b": ("small", 1)},
                       remaining={"a": 0.5, "b": 0.6})
    return planner.decide(at_five, running, ["prediction-moved"], {}, set()), running


def test_a_changed_speed_keeps_the_foreseen_later_starts_unless_new_ones_pay(monkeypatch):
    # at 5 s a learned speed moves; the fresh decision runs a and b as they run, but foresees
    # d (2 epochs) on big at 300 W and c (1 epoch) on small: 20 x 300 + 10 x 100 = 7000 J
    # against the foreseen 10 x 300 + 20 x 100 = 5000 J. The foresight the users were told
    # stays: d still starts on small at 11 s.
    planner, sc = _foreseen_then_backwards(monkeypatch, c_epochs=1.0, d_epochs=2.0)
    proposal, running = _speed_moved_at_five(planner, sc)
    assert proposal.source == "kept" and proposal.plan == running
    assert proposal.predicted["d"].start == pytest.approx(11.0)
    assert proposal.predicted["d"].completion == pytest.approx(31.0)
    # the totals differ by the 2000 J, at the cluster's price (1e-7 EUR per joule)
    gap = proposal.weighed["policy"] - proposal.weighed["kept"]
    assert gap == pytest.approx(2000.0 * TWO_DRAWS.eur_per_joule())
    at_ten = next(d for d in planner.foreseen if d.time == pytest.approx(10.0))
    assert at_ten.plan["c"] == Assignment("big", 1)


def test_a_changed_speed_takes_new_later_starts_when_they_pay(monkeypatch):
    # the other way round (c 2 epochs, d 1): the fresh foresight costs 5000 J, the old 7000 J
    planner, sc = _foreseen_then_backwards(monkeypatch, c_epochs=2.0, d_epochs=1.0)
    proposal, running = _speed_moved_at_five(planner, sc)
    assert proposal.source == "policy" and proposal.plan == running
    assert proposal.predicted["d"].start == pytest.approx(10.0)
    assert proposal.weighed["kept"] - proposal.weighed["policy"] == pytest.approx(
        2000.0 * TWO_DRAWS.eur_per_joule())


def test_a_completion_with_a_changed_speed_keeps_the_foreseen_plan_unless_a_new_one_pays(
        monkeypatch):
    # a ends at 10 s as foreseen, and a learned speed moved at the same tick: the foreseen
    # decision (c on big) is weighed against the fresh one (d on big), not dropped for it
    for c_epochs, d_epochs, source, on_big in ((1.0, 2.0, "forecast", "c"),
                                               (2.0, 1.0, "policy", "d")):
        planner, sc = _foreseen_then_backwards(monkeypatch, c_epochs, d_epochs)
        at_ten = snapshot(sc, now=10.0, running={"b": ("small", 1)}, remaining={"b": 0.1})
        at_ten = replace(at_ten, jobs=tuple(v for v in at_ten.jobs if v.job_id != "a"))
        proposal = planner.decide(at_ten, {"b": Assignment("small", 1)},
                                  ["completion", "prediction-moved"], {}, set())
        assert proposal.source == source
        assert proposal.plan == {"b": Assignment("small", 1), on_big: Assignment("big", 1)}
        assert set(proposal.weighed) == {"policy", "forecast"}


def test_a_forecast_after_completions_in_another_order_keeps_each_nodes_foreseen_order(
        monkeypatch):
    # two one-GPU nodes of one draw; a (1 epoch) on big and b (1.1) on small, c, d, e (1 epoch
    # each) wait. Foreseen (FillFree): c on big at 10, d on small at 11, e on big at 20. Then b
    # ends first, at 9.5, and the policy has changed its mind (FillFreeBackwards: the highest
    # id first). The repaired plan starts d on small; its forecast keeps c and then e on big
    # (at 10 and 20), where the fresh policy would have put e there at 10 and c on small at
    # 19.5, each job on another node than its users were told.
    same = cluster([("big", "B", 1), ("small", "S", 1)], {"B": [100], "S": [100]})
    forecasting = [FillFree()]
    monkeypatch.setattr(decider, "forecast_policy", lambda name, options, jobs: forecasting[0])
    jobs = [job("a", epochs=1.0), job("b", epochs=1.1), job("c", epochs=1.0),
            job("d", epochs=1.0), job("e", epochs=1.0)]
    sc = scenario(same, {"p": {("B", 1): 10.0, ("S", 1): 10.0}}, jobs)
    planner = _planner(scripted=FillFree())
    first = planner.decide(snapshot(sc), {}, ["submit"], {}, set())
    predicted = planner.forecast(snapshot(sc), first)
    assert [predicted[j].start for j in "cde"] == pytest.approx([10.0, 11.0, 20.0])
    forecasting[0] = FillFreeBackwards()
    planner.decider = InlineDecider(forecasting[0], "fifo", {})
    later = snapshot(sc, now=9.5, running={"a": ("big", 1)}, remaining={"a": 0.05})
    later = replace(later, jobs=tuple(v for v in later.jobs if v.job_id != "b"))
    proposal = planner.decide(later, {"a": Assignment("big", 1)}, ["completion"], {}, set())
    assert proposal.source == "repaired"
    assert proposal.plan == {"a": Assignment("big", 1), "d": Assignment("small", 1)}
    assert [proposal.predicted[j].start for j in "ce"] == pytest.approx([10.0, 20.0])
    at_ten = next(d for d in planner.foreseen if d.time == pytest.approx(10.0))
    assert at_ten.plan["c"] == Assignment("big", 1) and "e" not in at_ten.plan
