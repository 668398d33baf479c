"""The forward check: a hold survives only if, played forward, it costs no more."""

import dataclasses

import numpy as np
import pytest
from helpers import cluster, job, scenario, snapshot

from andreas.errors import AndreasError
from andreas.policies import make_policy
from andreas.policies.arrivals import ArrivalLog
from andreas.policies.base import Assignment
from andreas.policies.decision import Decision
from andreas.policies.greedy import follower
from andreas.policies.steps.forward_check import (
    MAX_SAMPLED,
    Rule,
    backlog_s,
    future_cost,
    keeps_cost,
    sample_arrivals,
    sampled_futures,
)

# one node of 2 GPUs: 100 W with one busy, 150 W with two; 1e-7 EUR per joule
CL = cluster([("n", "T", 2)], {"T": [100, 150]})
PROFILES = {"p": {("T", 1): 10.0, ("T", 2): 6.0}}  # s per epoch


def test_a_hold_that_makes_a_job_late_is_undone():
    # 10 epochs on 1 GPU = 100 s; due at 100 s: no slack at all
    sc = scenario(CL, PROFILES, [job("a", due=100.0, weight=0.01)])
    snap = snapshot(sc, now=0.0)
    now_plan = {"a": Assignment("n", 1)}
    held = Decision({}, revisit_at=50.0)  # waits 50 s, then runs: 50 s late
    # by hand: running now costs 100 s x 100 W x 1e-7 = 1e-3 EUR; held, the follower starts it
    # at 50 s on the configuration that meets... none does, so the fastest (2 GPUs, 60 s):
    # 60 x 150 W x 1e-7 = 9e-4 EUR + 10 s late x 0.01 = 0.1 EUR
    assert future_cost(snap, now_plan, [()], follower) == pytest.approx(1e-3)
    assert future_cost(snap, held, [()], follower) == pytest.approx(9e-4 + 0.1)
    assert not keeps_cost(snap, now_plan, held, ArrivalLog(), follower)


def test_a_step_that_saves_energy_on_time_is_kept():
    sc = scenario(CL, PROFILES, [job("a", due=1000.0)])
    snap = snapshot(sc, now=0.0)
    # 2 GPUs: 60 s x 150 W = 9 kJ; 1 GPU: 100 s x 100 W = 10 kJ: the 2-GPU plan is cheaper
    assert keeps_cost(snap, {"a": Assignment("n", 1)}, {"a": Assignment("n", 2)}, ArrivalLog(),
                      follower)
    assert not keeps_cost(snap, {"a": Assignment("n", 2)}, {"a": Assignment("n", 1)},
                          ArrivalLog(), follower)
    assert keeps_cost(snap, {"a": Assignment("n", 1)}, {"a": Assignment("n", 1)}, ArrivalLog(),
                      follower)


def test_sampled_arrivals_copy_seen_jobs_at_the_observed_rate():
    jobs = [job(f"j{i}", submit=100.0 * i, due=100.0 * i + 500.0, epochs=3.0) for i in range(5)]
    sc = scenario(CL, PROFILES, jobs)
    snap = snapshot(sc, now=400.0)
    log = ArrivalLog()
    log.observe(snap)
    assert log.rate() == pytest.approx(4 / 400.0)
    rng = np.random.default_rng(1)
    sampled = sample_arrivals(snap, log, 2000.0, rng)
    assert 0 < len(sampled) <= MAX_SAMPLED
    for s in sampled:
        assert 400.0 < s.submit_time <= 2400.0
        assert s.due_date - s.submit_time == pytest.approx(500.0)  # slack kept
        assert s.epochs == 3.0 and s.profile == "p" and s.job_id.startswith("~sampled")
    long = sample_arrivals(snap, log, 1e7, np.random.default_rng(2))
    assert len(long) == MAX_SAMPLED
    assert sample_arrivals(snap, ArrivalLog(), 2000.0, rng) == ()  # rate unknown


def test_sampled_arrivals_never_take_the_id_of_a_job_in_view():
    """A scenario may name its jobs anything, `~sampled0` included: the sampled arrivals'
    ids then start with one more `~` (two jobs of one id in a forecast over-filled a node)."""
    jobs = [job(name, submit=100.0 * i, due=100.0 * i + 500.0, epochs=3.0)
            for i, name in enumerate(["~sampled0", "~sampled1", "~~sampled0", "j3", "j4"])]
    snap = snapshot(scenario(CL, PROFILES, jobs), now=400.0)
    log = ArrivalLog()
    log.observe(snap)
    sampled = sample_arrivals(snap, log, 2000.0, np.random.default_rng(1))
    assert sampled and all(s.job_id.startswith("~~~sampled") for s in sampled)
    assert not {s.job_id for s in sampled} & {v.job_id for v in snap.jobs}


def test_a_scenario_whose_jobs_are_named_like_samples_simulates_as_any_other():
    """The paper scenario with its jobs renamed `~sampled<i>` costs what it costs under its
    own names (before: a forecast placed a sample and the job of its id on one node, which
    then held more GPUs than it has, and the simulation stopped with an IndexError)."""
    from dataclasses import replace

    from andreas.sim.engine import simulate
    from andreas.sim.generate import generate_paper_style, load_template

    sc = generate_paper_style(load_template("paper"), 3, 2, 3000.0)
    renamed = replace(sc, jobs=tuple(replace(j, job_id=f"~sampled{i}")
                                     for i, j in enumerate(sc.jobs)))
    runs = [simulate(s, make_policy("andreas", max_iterations=50)) for s in (sc, renamed)]
    assert runs[1].summary["total_cost"] == pytest.approx(runs[0].summary["total_cost"])
    assert runs[1].summary["restarts"] == runs[0].summary["restarts"]


def test_one_restart_rule():
    from andreas.policies.base import stops_job

    here = Assignment("n", 1)
    assert not stops_job(None, here)  # a start, not a restart
    assert not stops_job(here, Assignment("n", 1, power_limit_w=150.0))  # a new cap only
    assert stops_job(here, Assignment("n", 2))  # resized
    assert stops_job(here, Assignment("m", 1))  # moved
    assert stops_job(here, None)  # paused


def test_the_forecast_pays_no_restart_for_a_new_power_limit():
    from andreas.model import PowerLevel, Profiles, Scenario
    from andreas.sim.forecast import forecast

    cl = cluster([("n", "T", 2)], {"T": [100, 150]}, overhead=30.0)
    levels = {"p": {("T", 1): (PowerLevel(250.0, 10.0, 80.0), PowerLevel(150.0, 12.0, 50.0))}}
    profiles = Profiles({"p": {("T", 1): 10.0, ("T", 2): 6.0}}, levels)
    sc = Scenario(cl, profiles, (job("a", due=1e4),))
    snap = snapshot(sc, running={"a": ("n", 1)})
    later = make_policy("greedy", steps=(), resize_max_load=0.0)
    same = forecast(snap, {"a": Assignment("n", 1)}, later)["a"].completion
    assert same == pytest.approx(100.0)  # 10 epochs x 10 s, no restart
    capped = forecast(snap, {"a": Assignment("n", 1, 150.0)}, later)["a"].completion
    assert capped == pytest.approx(120.0)  # 10 x 12 s at the cap, and no 30 s restart
    moved = forecast(snap, {"a": Assignment("n", 2)}, later)["a"].completion
    assert moved == pytest.approx(30.0 + 60.0)  # a resize pays the restart


def test_sampled_copies_of_finished_jobs_keep_their_profiles():
    """A live service's snapshot holds only its unfinished jobs' profiles (one per job); a
    sampled arrival copies a finished job too. (This was a KeyError that failed every
    scheduler tick where a hold was checked.)"""
    from andreas.model import Profiles
    from andreas.policies.base import Snapshot

    done = scenario(CL, {"job:a": PROFILES["p"], "job:b": PROFILES["p"]},
                    [job("a", submit=0.0, due=500.0, profile="job:a"),
                     job("b", submit=10.0, due=500.0, profile="job:b")])
    history = ArrivalLog()
    history.observe(snapshot(done, now=10.0))
    # later: a and b have finished; only c is in view, with its own profile alone
    c = job("c", submit=100.0, due=1000.0, profile="job:c")
    views = snapshot(scenario(CL, {"job:c": PROFILES["p"]}, [c]), now=100.0).jobs
    snap = Snapshot(100.0, CL, Profiles({"job:c": PROFILES["p"]}), views)
    assert history.rate() > 0
    # every sampled arrival copies a or b, whose profiles the snapshot lacks
    assert keeps_cost(snap, {"c": Assignment("n", 1)}, {"c": Assignment("n", 2)}, history,
                      follower)
    assert set(history.profiles) == {"job:a", "job:b"}


def test_a_randomised_plan_replaces_the_deterministic_pass_only_if_it_keeps_cost(monkeypatch):
    """With a job late whatever happens, the search's choice over the deterministic pass
    (policy `greedy`'s plan) stands only when the forward check says it costs no more."""
    import andreas.policies.greedy as greedy_module

    cl = cluster([("a", "T", 2), ("b", "U", 2)], {"T": [100, 180], "U": [150, 260]})
    profiles = {"p": {("T", 1): 10.0, ("T", 2): 6.0, ("U", 1): 7.0, ("U", 2): 4.0},
                "q": {("T", 1): 20.0, ("T", 2): 11.0, ("U", 1): 12.0, ("U", 2): 7.0}}
    k = 34  # found by a search over this family: here the search's plan is not the pass's
    jobs = [job(f"j{i}", due=20 + ((k * 37 + i * 91) % 300), weight=0.001 * (1 + (k + i) % 5),
                epochs=5 + (k * i) % 9, profile="pq"[(i + k) % 2]) for i in range(5)]
    jobs.append(job("late", due=1.0, weight=0.0001, epochs=3, profile="p"))  # late anyway
    snap = snapshot(scenario(cl, profiles, jobs))
    unchecked = dict(make_policy("andreas", search_check=False).decide(snap))
    deterministic = dict(make_policy("greedy").decide(snap))
    assert unchecked != deterministic
    monkeypatch.setattr(greedy_module, "keeps_cost", lambda *a, **kw: False)
    assert dict(make_policy("andreas").decide(snap)) == deterministic
    monkeypatch.setattr(greedy_module, "keeps_cost", lambda *a, **kw: True)
    assert dict(make_policy("andreas").decide(snap)) == unchecked


def test_a_policy_that_has_decided_can_be_pickled():
    """A policy carries what it has seen (ArrivalLog) from one decision to the next; it must
    pickle, so that decisions can run in another process."""
    import pickle

    sc = scenario(CL, PROFILES, [job("a", due=500.0), job("b", submit=0.0, due=900.0)])
    policy = make_policy("andreas")
    policy.decide(snapshot(sc))
    again = pickle.loads(pickle.dumps(policy))
    assert dict(again.arrivals.profiles) == {"p": dict(PROFILES["p"])}
    assert dict(again.decide(snapshot(sc))) == dict(policy.decide(snapshot(sc)))


class FirstFree:
    """Later decisions by hand: running jobs stay as they run; a waiting job starts on one free
    GPU of node n (2 GPUs), in id order."""

    name = "first-free"

    def decide(self, snap):
        plan = {v.job_id: v.assignment for v in snap.jobs if v.assignment is not None}
        free = 2 - sum(a.gpus for a in plan.values())
        for v in sorted(snap.jobs, key=lambda v: v.job_id):
            if v.assignment is None and free >= 1:
                plan[v.job_id] = Assignment("n", 1)
                free -= 1
        return plan


def _wide_bet(monkeypatch):
    """Job a on 1 GPU (before) or on both (after, the bet): 1 GPU takes 10 s per epoch, 2 take
    4 s. Four futures, the same for both: three with no arrival, one where b arrives at 1 s,
    due at 61 s with weight 1e-5 per second late."""
    import andreas.policies.steps.forward_check as fc

    profiles = {"p": {("T", 1): 10.0, ("T", 2): 4.0}}
    snap = snapshot(scenario(CL, profiles, [job("a", due=1000.0)]))
    b = job("~b", submit=1.0, due=61.0, weight=1e-5)
    futures = [(), (), (), (b,)]
    monkeypatch.setattr(fc, "sampled_futures", lambda *a: futures)
    return snap, {"a": Assignment("n", 1)}, {"a": Assignment("n", 2)}, futures


def test_a_bet_that_wins_on_the_mean_but_loses_one_future_badly_is_refused(monkeypatch):
    snap, before, after, futures = _wide_bet(monkeypatch)
    cost = [[future_cost(snap, plan, [f], FirstFree) for f in futures] for plan in (before, after)]
    # by hand, with no arrival: 100 s x 100 W = 1e-3 EUR before; 40 s x 150 W = 6e-4 after.
    # With b, before: a alone 1 s (100 J), then a and b share 150 W for 99 s (7,425 J each),
    # b alone 1 s (100 J): 15,050 J = 1.505e-3 EUR, and b ends at 101 s, 40 s late: 4e-4.
    # After: a 40 s x 150 W = 6,000 J; b waits for it, runs 40-140 s alone at 100 W
    # (10,000 J), 79 s late: 1.6e-3 + 7.9e-4 = 2.39e-3 EUR, 25.5 % dearer than before.
    assert cost[0] == pytest.approx([1e-3] * 3 + [1.905e-3])
    assert cost[1] == pytest.approx([6e-4] * 3 + [2.39e-3])
    # the mean: 1.0475e-3 after against 1.22625e-3 before: the bet wins on the mean alone
    assert keeps_cost(snap, before, after, ArrivalLog(), FirstFree, rule=Rule(samples=4))
    assert keeps_cost(snap, before, after, ArrivalLog(), FirstFree, rule=Rule(4, risk=0.3))
    assert not keeps_cost(snap, before, after, ArrivalLog(), FirstFree, rule=Rule(4, risk=0.2))
    # a margin: the bet must be that share cheaper on the mean (1.0475e-3 / 1.22625e-3 =
    # 0.854: 14.6 % cheaper)
    assert keeps_cost(snap, before, after, ArrivalLog(), FirstFree, rule=Rule(4, margin=0.14))
    assert not keeps_cost(snap, before, after, ArrivalLog(), FirstFree, rule=Rule(4, margin=0.15))
    # no sample at all: the step is trusted, unchecked
    assert keeps_cost(snap, after, before, ArrivalLog(), FirstFree, rule=Rule(samples=0))


def test_within_risk_by_hand():
    from andreas.policies.steps.forward_check import within_risk

    assert within_risk([1.0, 12.0], [2.0, 10.0], None)  # no limit
    assert within_risk([1.0, 12.0], [2.0, 10.0], 0.2)  # 12 = 10 x 1.2
    assert not within_risk([1.0, 12.01], [2.0, 10.0], 0.2)
    assert within_risk([0.0], [0.0], 0.0)  # equal, free: not a loss


def test_the_policy_stand_in_decides_as_one_pass_of_the_policy_with_unchecked_holds():
    """check_follower=policy: later decisions by the policy's own steps on one greedy pass,
    their holds unchecked, from a copy of the arrivals the policy has seen."""
    from andreas.policies.greedy import check_follower, policy_follower

    sc = scenario(CL, PROFILES, [job("a", due=400.0), job("b", submit=50.0, due=900.0)])
    snap = snapshot(sc, now=50.0, running={"a": ("n", 1)}, remaining={"a": 5.0})
    policy = make_policy("andreas", check_follower="policy", check_samples=4, check_risk=0.1)
    policy.arrivals.observe(snap)
    stand_in = policy_follower(policy.params, policy.arrivals)()
    assert stand_in.params.search.max_iterations == 1
    assert stand_in.params.pipeline.steps == policy.params.pipeline.steps
    assert stand_in.params.check.check_samples == 0  # its holds are not replayed again
    assert stand_in.arrivals.seen == policy.arrivals.seen
    stand_in.arrivals.observe(snapshot(scenario(CL, PROFILES, [job("c", submit=60.0)]), 60.0))
    assert "c" not in policy.arrivals.seen  # a copy: a replay does not teach the policy
    one_pass = make_policy("andreas", max_iterations=1, check_samples=0, resize_max_load=0.0)
    one_pass.arrivals.observe(snap)
    assert dict(stand_in.decide(snap)) == dict(one_pass.decide(snap))
    assert check_follower(make_policy("andreas").params, policy.arrivals).__name__ == "follower"


def test_check_options_are_checked():
    for bad in ({"check_samples": -1}, {"check_risk": -0.1}, {"check_follower": "oracle"},
                {"check_reach": -1.0}, {"check_arrivals": -1}):
        with pytest.raises(AndreasError, match=next(iter(bad))):
            make_policy("andreas", **bad)


def test_the_guard_is_overruled_only_by_a_refused_plan_that_pays_by_the_margin():
    """guard_rollouts by hand: job a on 1 GPU (the deterministic pass's plan) costs 100 s x
    100 W = 1e-3 EUR; on 2 GPUs at 4 s per epoch (the plan the guard refused) 40 s x 150 W =
    6e-4 EUR: 40 % less. No arrival is known, so every sampled future is empty."""
    profiles = {"p": {("T", 1): 10.0, ("T", 2): 4.0}}
    snap = snapshot(scenario(CL, profiles, [job("a", due=1000.0)]))
    first, refused = {"a": Assignment("n", 1)}, {"a": Assignment("n", 2)}

    def overrules(**options):
        return make_policy("andreas", **options).overrules_guard(snap, first, refused)

    assert overrules(guard_rollouts=2, guard_margin=0.3)  # 6e-4 <= 0.7 x 1e-3
    assert not overrules(guard_rollouts=2, guard_margin=0.5)  # 6e-4 > 0.5 x 1e-3
    assert not overrules(guard_rollouts=0)  # off: the guard's word is final
    assert not overrules(guard_rollouts=2, pass_budget=100)  # a replay needs the whole queue
    # the other way round: the refused plan dearer
    assert not make_policy("andreas", guard_rollouts=2).overrules_guard(snap, refused, first)


def test_a_plan_the_slack_guard_refused_is_taken_when_the_rollouts_say_it_pays(monkeypatch):
    import andreas.policies.greedy as greedy_module

    cl = cluster([("a", "T", 2), ("b", "U", 2)], {"T": [100, 180], "U": [150, 260]})
    profiles = {"p": {("T", 1): 10.0, ("T", 2): 6.0, ("U", 1): 7.0, ("U", 2): 4.0},
                "q": {("T", 1): 20.0, ("T", 2): 11.0, ("U", 1): 12.0, ("U", 2): 7.0}}
    k = 2  # found by a search over this family: here the slack guard refuses the search's plan
    jobs = [job(f"j{i}", due=60 + ((k * 37 + i * 91) % 300), weight=0.001 * (1 + (k + i) % 5),
                epochs=5 + (k * i) % 9, profile="pq"[(i + k) % 2]) for i in range(5)]
    snap = snapshot(scenario(cl, profiles, jobs))
    options = {"search_check": False, "resize_max_load": 0.0, "steps": ()}
    guarded = dict(make_policy("andreas", **options).decide(snap))
    unguarded = dict(make_policy("andreas", slack_guard=None, **options).decide(snap))
    assert guarded != unguarded
    asked = []
    monkeypatch.setattr(greedy_module, "keeps_cost", lambda *a, **kw: asked.append(a[7]) or True)
    assert dict(make_policy("andreas", **options).decide(snap)) == guarded  # off by default
    assert asked == []
    assert dict(make_policy("andreas", guard_rollouts=3, **options).decide(snap)) == unguarded
    assert asked == [Rule(samples=3, margin=0.01)]  # the futures as the check options say
    monkeypatch.setattr(greedy_module, "keeps_cost", lambda *a, **kw: False)
    assert dict(make_policy("andreas", guard_rollouts=3, **options).decide(snap)) == guarded


def test_the_futures_reach_as_far_and_hold_as_many_arrivals_as_the_options_say():
    jobs = [job(f"j{i}", submit=100.0 * i, due=100.0 * i + 500.0, epochs=3.0) for i in range(5)]
    snap = snapshot(scenario(CL, PROFILES, jobs), now=400.0)  # the last due date: 900 s
    log = ArrivalLog()
    log.observe(snap)  # one arrival per 100 s
    short = sampled_futures(snap, log, 4, 1)
    assert all(400.0 < j.submit_time <= 900.0 for f in short for j in f)
    long = sampled_futures(snap, log, 4, 1, reach=3.0, most=100)  # up to 400 + 3 x 500
    assert all(400.0 < j.submit_time <= 1900.0 for f in long for j in f)
    assert any(j.submit_time > 900.0 for f in long for j in f)
    assert max(len(f) for f in long) > MAX_SAMPLED // 2
    assert all(len(f) <= 2 for f in sampled_futures(snap, log, 4, 1, reach=3.0, most=2))
    rule = make_policy("andreas", check_reach=3.0, check_arrivals=100).params.check.rule()
    assert (rule.reach, rule.most, rule.samples, rule.risk) == (3.0, 100, 1, None)


def test_the_backlog_by_hand_and_futures_that_reach_past_it():
    """Five jobs of 30 epochs, due at 300 s, seen at 400 s: the due dates are past, so a
    future cut at the last one holds no arrival. Their work on the configuration of fewest
    GPU-seconds (1 GPU, 10 s an epoch: 10 GPU-s, against 2 x 6 = 12) is 5 x 30 x 10 =
    1,500 GPU-s, 750 s on the node's 2 GPUs; with drain 2 the futures reach 1,500 s."""
    jobs = [job(f"j{i}", submit=50.0 * i, due=300.0, epochs=30.0) for i in range(5)]
    snap = snapshot(scenario(CL, PROFILES, jobs), now=400.0)
    assert backlog_s(snap) == pytest.approx(750.0)
    log = ArrivalLog()
    log.observe(snap)  # one arrival per 50 s
    assert all(f == () for f in sampled_futures(snap, log, 4, 1))
    reached = sampled_futures(snap, log, 4, 1, most=100, drain=2.0)
    assert all(400.0 < j.submit_time <= 1900.0 for f in reached for j in f)
    assert any(j.submit_time > 1500.0 for f in reached for j in f)
    assert max(len(f) for f in reached) > MAX_SAMPLED  # up to 100 arrivals
    half_done = snapshot(scenario(CL, PROFILES, jobs), now=400.0,
                         remaining={f"j{i}": 15.0 for i in range(5)})
    assert backlog_s(half_done) == pytest.approx(375.0)
    # a gang's rows count too: 2 nodes x 2 GPUs at 4 s an epoch is 16 GPU-s an epoch, more
    # than one GPU's 10: unchanged; at 2 s (8 GPU-s) it is the fewest, 5 x 30 x 8 / 2 = 600 s
    for spe, expected in ((4.0, 750.0), (2.0, 600.0)):
        gangs = dataclasses.replace(snap.profiles, gangs={"p": {("T", 2, 2): spe}})
        assert backlog_s(dataclasses.replace(snap, profiles=gangs)) == pytest.approx(expected)


def test_the_rollouts_futures_are_the_options():
    options = make_policy("andreas", rollout_drain=3.0, rollout_arrivals=150).params.rollouts
    assert (options.rollout_drain, options.rollout_arrivals) == (3.0, 150)
    with pytest.raises(AndreasError, match="rollout_drain"):
        make_policy("andreas", rollout_drain=-1.0)
