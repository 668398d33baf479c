"""Rollouts over a portfolio: a decision that stops a running job is played forward against
the same policy's decision that stops none, on the same sampled futures, and the cheaper kept."""

import pytest
from helpers import cluster, job, scenario, snapshot
from hypothesis import given, settings
from hypothesis import strategies as st
from test_invariants import check_invariants, fingerprint, scenarios

from andreas.policies import make_policy
from andreas.policies.arrivals import ArrivalLog
from andreas.policies.base import Assignment, check_plan
from andreas.policies.budget import Deadline
from andreas.policies.greedy import follower, steady_follower
from andreas.policies.rollouts import cheapest, stops_restarting_job
from andreas.policies.steps.forward_check import future_cost
from andreas.sim.engine import simulate

# a slow node s (100 W busy) and a fast one f (200 W busy), one GPU each; 1e-7 EUR per joule;
# every restart loses 300 s, with the GPU held and powered
CL = cluster([("s", "S", 1), ("f", "F", 1)], {"S": [100], "F": [200]}, overhead=300.0)
PROFILES = {"p": {("S", 1): 10.0, ("F", 1): 5.0}}  # s per epoch
KEEP = {"a": Assignment("s", 1)}
MOVE = {"a": Assignment("f", 1)}


def test_a_move_whose_restart_does_not_pay_is_refused():
    # 10 epochs left: 100 s where it runs; moved, 300 s restart + 50 s. Due at 60 s: late
    # either way, later if moved.
    sc = scenario(CL, PROFILES, [job("a", due=60.0, weight=0.01)])
    snap = snapshot(sc, running={"a": ("s", 1)})
    # by hand: kept, 100 s x 100 W x 1e-7 = 1e-3 EUR + 40 s late x 0.01 = 0.4 EUR;
    # moved, 350 s x 200 W x 1e-7 = 7e-3 EUR + 290 s late x 0.01 = 2.9 EUR
    assert future_cost(snap, KEEP, [()], follower) == pytest.approx(0.401)
    assert future_cost(snap, MOVE, [()], follower) == pytest.approx(2.907)
    assert cheapest(snap, [(MOVE, follower), (KEEP, follower)], ArrivalLog(), 4, 1) == 1
    assert cheapest(snap, [(KEEP, follower), (MOVE, follower)], ArrivalLog(), 4, 1) == 0


def test_a_move_that_pays_its_restart_is_made():
    # 100 epochs left: 1000 s where it runs; moved, 300 s + 500 s. Due at 800 s.
    sc = scenario(CL, PROFILES, [job("a", due=800.0, weight=0.01, epochs=100.0)])
    snap = snapshot(sc, running={"a": ("s", 1)})
    # by hand: kept, 1000 s x 100 W x 1e-7 = 0.01 EUR + 200 s late x 0.01 = 2 EUR;
    # moved, 800 s x 200 W x 1e-7 = 0.016 EUR, on time
    assert future_cost(snap, KEEP, [()], follower) == pytest.approx(2.01)
    assert future_cost(snap, MOVE, [()], follower) == pytest.approx(0.016)
    assert cheapest(snap, [(MOVE, follower), (KEEP, follower)], ArrivalLog(), 4, 1) == 0


def test_equal_candidates_and_a_passed_deadline_keep_the_policys_own():
    sc = scenario(CL, PROFILES, [job("a", due=60.0, weight=0.01)])
    snap = snapshot(sc, running={"a": ("s", 1)})
    assert cheapest(snap, [(MOVE, follower), (dict(MOVE), follower)], ArrivalLog(), 4, 1) == 0
    passed = Deadline(at=0.0)  # long gone: nothing is played, the first candidate stands
    assert cheapest(snap, [(MOVE, follower), (KEEP, follower)], ArrivalLog(), 4, 1, passed) == 0


def test_only_a_stop_that_pays_a_restart_asks_for_rollouts():
    sc = scenario(CL, PROFILES, [job("a", due=60.0)])
    snap = snapshot(sc, running={"a": ("s", 1)})
    assert stops_restarting_job(snap, MOVE)
    assert stops_restarting_job(snap, {})  # a pause
    assert not stops_restarting_job(snap, KEEP)
    assert not stops_restarting_job(snap, {"a": Assignment("s", 1, power_limit_w=80.0)})
    free = cluster([("s", "S", 1), ("f", "F", 1)], {"S": [100], "F": [200]}, overhead=0.0)
    snap_free = snapshot(scenario(free, PROFILES, [job("a", due=60.0)]),
                         running={"a": ("s", 1)})
    assert not stops_restarting_job(snap_free, MOVE)  # no restart to save


def test_the_decision_keeping_running_jobs_plans_the_waiting_ones_on_free_gpus():
    jobs = [job("a", due=60.0, weight=0.01), job("b", due=500.0, epochs=20.0)]
    snap = snapshot(scenario(CL, PROFILES, jobs), running={"a": ("s", 1)})
    policy = make_policy("andreas", restart_rollouts=4)
    kept = policy.decision_keeping_running(snap)
    assert kept["a"] == Assignment("s", 1)
    assert kept["b"] == Assignment("f", 1)  # the one GPU left free
    check_plan(snap, kept, "andreas")
    waiting = job("c", due=500.0)
    snap = snapshot(scenario(CL, PROFILES, jobs + [waiting]),
                    running={"a": ("s", 1), "b": ("f", 1)})
    kept = policy.decision_keeping_running(snap)
    assert dict(kept) == {"a": Assignment("s", 1), "b": Assignment("f", 1)}
    assert kept.reasons["c"].kind == "no_capacity"  # both GPUs held: c can only wait



def test_the_policy_keeps_running_jobs_its_search_would_pause_at_a_loss():
    """Two jobs nearly done (j0, j1) and three arrivals. The search pauses both to give j3 and
    j4 two GPUs each: its look-ahead prices each restart but not what later arrivals do. With
    rollouts the policy plays both decisions forward on the same sampled futures and keeps the
    one that costs less: here the running jobs stay (found by a search over this family)."""
    from andreas.policies.steps.forward_check import sampled_futures, with_profiles_of

    snap, sc = _two_nearly_done()
    plain = make_policy("andreas", restart_rollouts=0)
    rolled = make_policy("andreas", restart_rollouts=4, rollout_min_late=0.0, rollout_risk=None)
    for policy in (plain, rolled):
        policy.arrivals.observe(snapshot(sc, now=0.0))
    moved = plain.decide(snap)
    assert "j0" not in moved and "j1" not in moved  # both paused
    kept = rolled.decide(snap)
    assert kept["j0"] == Assignment("s", 1) and kept["j1"] == Assignment("f", 1)
    check_plan(snap, kept, "andreas")
    # the choice is the rollouts': on the futures the policy sampled, kept costs less
    futures = sampled_futures(snap, rolled.arrivals, 4, seed=1)
    assert any(futures)  # arrivals were sampled: the comparison is not of the known jobs alone
    with_samples = with_profiles_of(snap, rolled.arrivals, futures)
    assert (future_cost(with_samples, kept, futures, steady_follower)
            < future_cost(with_samples, moved, futures, follower))


def test_the_rollouts_sample_the_futures_their_options_ask_for(monkeypatch):
    """The case above: the futures reach the backlog's time x `rollout_drain` with at most
    `rollout_arrivals` arrivals each (forward_check.sampled_futures, tested there); by
    default to the last due date in view, with up to 20."""
    import andreas.policies.rollouts as rollouts_module

    asked = []

    def sampled(snapshot, history, samples, seed, reach=1.0, most=20, drain=0.0):
        asked.append((samples, reach, most, drain))
        return []

    monkeypatch.setattr(rollouts_module, "sampled_futures", sampled)
    snap, sc = _two_nearly_done()
    for options in ({}, {"rollout_drain": 2.5, "rollout_arrivals": 70}):
        policy = make_policy("andreas", restart_rollouts=3, rollout_min_late=0.0, **options)
        policy.arrivals.observe(snapshot(sc, now=0.0))
        policy.decide(snap)
    assert asked == [(3, 1.0, 20, 0.0), (3, 1.0, 70, 2.5)]  # andreas's defaults, then these


def test_futures_as_long_as_the_backlog_refuse_a_pause_short_ones_approve():
    """Six jobs on 2 x 2 GPUs with 300 s restarts, j0 and j1 running at 300 s (found by a
    search over this family). The last due date in view is 297 s away; the backlog's time is
    139.5 s (558 GPU-s of work, each job on one F GPU, over 4 GPUs), so 3x that reaches
    418.5 s. Cut at the due dates, the futures hold fewer arrivals and the pause of j1 costs
    no more in any of them, so it is made; played to 418.5 s with up to 200 arrivals,
    keeping both running jobs costs less in every future, and both stay."""
    from andreas.policies.steps.forward_check import backlog_s, sampled_futures, with_profiles_of

    snap, sc = _six_jobs(16)
    decisions, futures = [], []
    for drain in (0.0, 3.0):
        policy = make_policy("andreas", restart_rollouts=16, rollout_min_late=0.0,
                             rollout_risk=0.0, rollout_drain=drain, rollout_arrivals=200)
        policy.arrivals.observe(snapshot(sc, now=0.0))
        decisions.append(policy.decide(snap))
        futures.append(sampled_futures(snap, policy.arrivals, 16, 1, most=200, drain=drain))
    short, long = decisions
    assert "j1" not in short and short["j0"] == Assignment("s", 1)  # j1 paused
    assert long["j0"] == Assignment("s", 1) and long["j1"] == Assignment("f", 1)
    assert max(v.job.due_date for v in snap.jobs) - snap.time == pytest.approx(297.0)
    assert backlog_s(snap) == pytest.approx(139.5)
    assert max(len(f) for f in futures[1]) > max(len(f) for f in futures[0])
    samples = with_profiles_of(snap, policy.arrivals, futures[1])
    for future in futures[1]:
        assert (future_cost(samples, long, [future], steady_follower)
                < future_cost(samples, short, [future], follower))


def _six_jobs(k):
    """Two jobs running at 300 s (j0 on s, j1 on f) and four arrivals: `_two_running`."""
    return _two_running(k, jobs=6, now=300.0, due_spread=400)


def _two_nearly_done():
    """Two jobs nearly done (j0, j1) running at 200 s and three arrivals: `_two_running`."""
    return _two_running(17, jobs=5, now=200.0, due_spread=900)


def _two_running(k, jobs, now, due_spread):
    """`jobs` jobs on 2 x 2 GPUs with 300 s restarts, drawn by `k`, j0 and j1 submitted at 0
    and running at `now` (j0 on s, j1 on f), the others arriving every 50 s: the snapshot
    and its scenario."""
    cl = cluster([("s", "S", 2), ("f", "F", 2)], {"S": [100, 180], "F": [200, 380]},
                 overhead=300.0)
    profiles = {"p": {("S", 1): 10.0, ("S", 2): 6.0, ("F", 1): 5.0, ("F", 2): 3.0},
                "q": {("S", 1): 20.0, ("S", 2): 11.0, ("F", 1): 8.0, ("F", 2): 5.0}}
    drawn = [job(f"j{i}", submit=0.0 if i < 2 else 50.0 * i,
                 due=50.0 * i + 100 + ((k * 37 + i * 91) % due_spread),
                 weight=0.001 * (1 + (k + i) % 5), epochs=5 + (k * i) % 30,
                 profile="pq"[(i + k) % 2]) for i in range(jobs)]
    sc = scenario(cl, profiles, drawn)
    snap = snapshot(sc, now=now, running={"j0": ("s", 1), "j1": ("f", 1)},
                    remaining={"j0": 4.0 + k % 7, "j1": 3.0 + k % 11})
    return snap, sc


@pytest.mark.parametrize("due, overloaded", [(150.0, True), (210.0, False)])
def test_by_default_andreas_plays_the_rollouts_under_overload_only(due, overloaded):
    """The case above with one more job, of one epoch, due at `due`. Due at 150 s it is late
    at 200 s already: 2 of 6 jobs hopeless, past a quarter, and default andreas plays its
    16 rollouts and keeps j0 and j1 running where the search would pause them (as it does
    without rollouts). Due at 210 s it can still make it: 1 of 6, no rollouts, the pause."""
    from dataclasses import replace

    from andreas.policies.greedy import hopeless_share

    snap, sc = _two_nearly_done()
    more = scenario(sc.cluster, dict(sc.profiles.table),
                    list(sc.jobs) + [job("x", due=due, weight=0.001, epochs=1.0)])
    snap = replace(snap, jobs=snap.jobs + tuple(v for v in snapshot(more, now=200.0).jobs
                                                if v.job_id == "x"))
    assert hopeless_share(snap) == pytest.approx(2 / 6 if overloaded else 1 / 6)
    decisions = []
    for options in ({}, {"restart_rollouts": 0}):
        policy = make_policy("andreas", **options)
        policy.arrivals.observe(snapshot(more, now=0.0))
        decisions.append(policy.decide(snap))
    default, without = decisions
    assert "j0" not in without and "j1" not in without  # the search's pause
    if overloaded:
        assert default["j0"] == Assignment("s", 1) and default["j1"] == Assignment("f", 1)
    else:
        assert "j0" not in default and "j1" not in default


def test_hopeless_share_by_hand():
    from andreas.policies.greedy import hopeless_share

    # at 100 s: a (10 epochs, 50 s at best on f) due at 160: on time; b due at 120: hopeless;
    # c (1 epoch, 5 s) due at 104: hopeless; d due at 106: on time
    jobs = [job("a", due=160.0), job("b", due=120.0), job("c", due=104.0, epochs=1.0),
            job("d", due=106.0, epochs=1.0)]
    snap = snapshot(scenario(CL, PROFILES, jobs), now=100.0)
    assert hopeless_share(snap) == pytest.approx(2 / 4)


def test_the_rollouts_wait_for_the_share_of_hopeless_jobs_they_are_given():
    """The case below (the search pauses j0 and j1 at a loss; the rollouts keep them), with
    `rollout_min_late`: one job of the five is hopeless there, so at a share above a fifth
    the rollouts are not played and the search's decision stands."""
    from andreas.policies.greedy import hopeless_share

    snap, sc = _two_nearly_done()
    assert hopeless_share(snap) == pytest.approx(1 / 5)
    decisions = []
    for share in (0.2, 0.25):
        policy = make_policy("andreas", restart_rollouts=4, rollout_min_late=share,
                             rollout_risk=None)
        policy.arrivals.observe(snapshot(sc, now=0.0))
        decisions.append(policy.decide(snap))
    assert decisions[0]["j0"] == Assignment("s", 1)  # the rollouts kept it
    assert "j0" not in decisions[1] and "j1" not in decisions[1]  # the search's pause


def test_a_bet_that_wins_on_average_but_loses_one_future_badly_is_refused_at_a_risk():
    from andreas.policies.rollouts import least

    own, bet = [10.0, 10.0, 10.0, 10.0], [1.0, 1.0, 1.0, 30.0]  # mean 8.25 < 10, one 3x
    assert least([own, bet]) == 1  # on the mean alone
    assert least([own, bet], risk=0.1) == 0  # 30 > 1.1 x 10 in the fourth future
    assert least([own, [9.0, 9.0, 9.0, 10.5]], risk=0.1) == 1  # at most 5 % dearer anywhere
    assert least([own, [9.0, 9.0, 9.0, 10.5]], risk=0.0) == 0
    assert least([own, list(own)]) == 0  # equal: the policy's own stands


@settings(max_examples=25, deadline=None)
@given(scenarios(), st.integers(1, 3), st.sampled_from([None, 0.0]), st.booleans())
def test_simulations_with_rollouts_keep_every_invariant(sc, seed, risk, first_start_overhead):
    """The invariants every policy keeps (test_invariants.py), with the rollouts on: no node
    over-subscribed, every epoch run, costs recomputed from the segments, the same run twice."""
    def policy():
        return make_policy("andreas", seed=seed, max_iterations=10, restart_rollouts=2,
                           rollout_min_late=0.0, rollout_risk=risk)

    result = simulate(sc, policy(), first_start_overhead=first_start_overhead)
    check_invariants(sc, result)
    again = simulate(sc, policy(), first_start_overhead=first_start_overhead)
    assert fingerprint(again) == fingerprint(result)
