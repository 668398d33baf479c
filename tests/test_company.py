"""Holding a job back rather than power a node for it alone (policies/company.py): for company
and for GPUs of a powered node, the rules by hand, the arrival-rate estimate by hand, and the
simulator and service revisiting a held job when it must start."""

import math

import pytest
from helpers import NO_HOLDS, Scripted, cluster, job, scenario, snapshot
from hypothesis import given, settings
from hypothesis import strategies as st

from andreas.policies import make_policy
from andreas.policies.arrivals import ArrivalLog
from andreas.policies.base import Assignment, revisit_at
from andreas.policies.decision import Decision
from andreas.policies.greedy import GreedyParams, refine
from andreas.policies.steps.company import hold_for_company
from andreas.policies.steps.wait import wait_for_a_powered_node
from andreas.sim.engine import simulate

# One node of 2 GPUs drawing 300 W with one busy, 400 W with two; 10 s per epoch on 1 GPU.
CLUSTER = cluster([("n0", "A", 2), ("n1", "A", 2)], {"A": [300, 400]})
PROFILES = {"p": {("A", 1): 10.0}}


def _snap(jobs, now, running=None):
    return snapshot(scenario(CLUSTER, PROFILES, jobs), now=now, running=running)


def test_a_job_alone_on_a_node_with_slack_waits_until_its_latest_start():
    snap = _snap([job("a", due=5000.0, epochs=100.0)], now=1000.0)  # runs 1000 s
    plan = {"a": Assignment("n0", 1)}
    held = hold_for_company(snap, plan, share=0.1, load=0.4, max_load=0.5)
    assert dict(held) == {} and revisit_at(held) == pytest.approx(5000.0 - 1.1 * 1000.0)
    # not while the load is unknown or too high, nor without the slack
    for load in (math.inf, 0.5):
        assert hold_for_company(snap, plan, share=0.1, load=load) == plan
    tight = _snap([job("a", due=2000.0, epochs=100.0)], now=1000.0)
    assert hold_for_company(tight, plan, share=0.1, load=0.0) == plan
    # nor on nodes that stay powered when idle
    from dataclasses import replace

    from andreas.model import GpuType

    powered = replace(snap, cluster=replace(CLUSTER, gpu_types={
        "A": GpuType("A", (300.0, 400.0), idle_w=200.0)}))
    assert hold_for_company(powered, plan, share=0.1, load=0.0) == plan


def test_no_hold_with_company_or_a_queue_but_a_running_job_alone_is_paused():
    jobs = [job("a", submit=0.0, due=19000.0, epochs=100.0),
            job("b", submit=5000.0, due=19000.0, epochs=100.0)]
    snap = _snap(jobs, now=10000.0)
    together = {"a": Assignment("n0", 1), "b": Assignment("n0", 1)}
    assert hold_for_company(snap, together, load=0.0) == together
    # one arrival in 10000 s x 1000 s of work / 4 GPUs: load 0.025, but with b left waiting
    # (the cluster short of GPUs) refine holds nothing back
    log = ArrivalLog()
    log.observe(snap)
    assert log.offered_load(snap) == pytest.approx(0.025)
    queue = {"a": Assignment("n0", 1)}
    assert refine(snap, queue, GreedyParams.of(), log) == queue
    # a job that would keep running alone on its node is paused for company as well
    running = _snap(jobs, now=10000.0, running={"a": ("n0", 1), "b": ("n1", 1)})
    apart = {"a": Assignment("n0", 1), "b": Assignment("n1", 1)}
    held = hold_for_company(running, apart, load=0.0)
    assert dict(held) == {} and revisit_at(held) == pytest.approx(19000.0 - 1.1 * 1000.0)


def test_a_hold_counts_the_first_start_overhead_that_the_forecast_charges():
    # The service's first starts pay the restart overhead (300 s here) and its forecast
    # charges it; the hold must count it too, or the held job starts too late to keep its
    # slack: held until 5000 - 1.1 x 1000 = 3900, it would end at 3900 + 300 + 1000 = 5200.
    from dataclasses import replace

    from andreas.sim.forecast import forecast

    slow_start = cluster([("n0", "A", 2), ("n1", "A", 2)], {"A": [300, 400]}, overhead=300.0)
    snap = replace(snapshot(scenario(slow_start, PROFILES, [job("a", due=5000.0, epochs=100.0)]),
                            now=1000.0), first_start_overhead=True)
    held = hold_for_company(snap, {"a": Assignment("n0", 1)}, share=0.1, load=0.0)
    assert dict(held) == {} and revisit_at(held) == pytest.approx(5000.0 - 1.1 * 1300.0)
    ahead = forecast(snap, held, make_policy("fifo"))["a"]
    assert ahead.start == pytest.approx(3570.0)
    assert ahead.completion == pytest.approx(3570.0 + 1300.0) and ahead.tardiness_cost == 0.0
    # the simulator's snapshots say so too, so a policy it drives counts the same overhead
    seen = []

    class Spy(Scripted):
        def decide(self, snapshot):
            seen.append(snapshot.first_start_overhead)
            return super().decide(snapshot)

    sc = scenario(slow_start, PROFILES, [job("a", due=5000.0, epochs=100.0)])
    simulate(sc, Spy(lambda now, ids: {j: ("n0", 1) for j in ids}), first_start_overhead=True)
    assert seen and all(seen)


# Two node types: A (2 GPUs, 300 W with one busy, 400 W with two) and a slower B (1 GPU,
# 500 W), 10 s and 20 s per epoch.
TWO_TYPES = cluster([("n0", "A", 2), ("n1", "B", 1)], {"A": [300, 400], "B": [500]})
TWO_PROFILES = {"p": {("A", 1): 10.0, ("B", 1): 20.0}}


def test_a_job_alone_on_a_node_waits_for_gpus_to_free_on_a_powered_one():
    # At 4000, a (ends at 5000) and c (ends at 10000) fill n0; the plan starts b alone on n1:
    # 500 W x 2000 s = 1 MJ. On n0 from 5000, b adds 100 W x 1000 s beside c: it waits,
    # revisited at 5000, if it ends there with 10 % of its run time to spare (5000 + 1100 s)
    # and can still start alone on n1 by 5000 with that slack (due - 2200 s >= 5000).
    def snap(due):
        sc = scenario(TWO_TYPES, TWO_PROFILES,
                      [job("a", epochs=500.0), job("c", epochs=1000.0),
                       job("b", submit=4000.0, due=due, epochs=100.0)])
        return snapshot(sc, now=4000.0, running={"a": ("n0", 1), "c": ("n0", 1)},
                        remaining={"a": 100.0, "c": 600.0})

    plan = {"a": Assignment("n0", 1), "c": Assignment("n0", 1), "b": Assignment("n1", 1)}
    held, awaited = wait_for_a_powered_node(snap(7200.0), plan, share=0.1)
    assert dict(held) == {"a": plan["a"], "c": plan["c"]} and awaited == {"n0"}
    assert revisit_at(held) == pytest.approx(5000.0)
    assert wait_for_a_powered_node(snap(7100.0), plan, share=0.1) == (plan, set())  # fallback
    assert wait_for_a_powered_node(snap(6000.0), plan, share=0.1) == (plan, set())  # late
    # nor while the offered load is 1 or more (refine): the arrivals at 0, 0 and 4000 with
    # their 5000, 10000 and 1000 s of work on 3 GPUs: 2 / 4000 x 5333 / 3 = 0.89
    log = ArrivalLog()
    log.observe(snap(7200.0))
    assert log.offered_load(snap(7200.0)) == pytest.approx(2 / 4000 * 16000 / 3 / 3)
    # (the timeline of consolidate.py, which refine tries first, is off here: it would run b
    # on n0 now and pause a, at the same energy)
    alone = GreedyParams.of(**{"consolidate.margin": None})
    assert dict(refine(snap(7200.0), plan, alone, log)) == dict(held)
    log.seen = {"x": (3000.0, 5000.0), "y": (3500.0, 5000.0), "z": (3990.0, 5000.0)}
    assert refine(snap(7200.0), plan, alone, log) == plan


def test_a_job_another_waits_to_join_keeps_its_node():
    # x runs alone on n0 (A, 1 GPU) until 1000. b, planned alone on n2 (B), waits for n0:
    # 300 W x 1000 s there against 500 W x 2000 s. x itself could wait for n1 (type C, full
    # until z1 ends at 500) and add only 100 W there beside z2; but b, first by due date, is
    # counting on x's GPU coming free, so x keeps running.
    cl = cluster([("n0", "A", 1), ("n1", "C", 2), ("n2", "B", 1)],
                 {"A": [300], "B": [500], "C": [300, 400]})
    profiles = {"p": {("A", 1): 10.0, ("B", 1): 20.0}, "q": {("A", 1): 10.0, ("C", 1): 10.0}}
    sc = scenario(cl, profiles, [job("x", due=9000.0, epochs=100.0, profile="q"),
                                 job("z1", epochs=50.0, profile="q"),
                                 job("z2", epochs=300.0, profile="q"),
                                 job("b", due=5000.0, epochs=100.0)])
    snap = snapshot(sc, running={"x": ("n0", 1), "z1": ("n1", 1), "z2": ("n1", 1)})
    plan = {"x": Assignment("n0", 1), "z1": Assignment("n1", 1), "z2": Assignment("n1", 1),
            "b": Assignment("n2", 1)}
    held, awaited = wait_for_a_powered_node(snap, plan, share=0.1)
    assert dict(held) == {k: plan[k] for k in ("x", "z1", "z2")} and awaited == {"n0"}
    assert revisit_at(held) == pytest.approx(1000.0)
    # and the hold for company, even on a quiet cluster, leaves x running for b to join
    assert hold_for_company(snap, held, load=0.0, awaited=awaited) == held
    assert "x" not in hold_for_company(snap, held, load=0.0)


def test_simulator_runs_a_waiting_job_on_the_powered_node_by_hand():
    # The same jobs from t = 0, a and c without slack (so the plan keeps them on n0): they
    # share n0 (400 W) until 5000; b, held at 4000, runs there 5000-6000 beside c; c alone
    # until 10000 (300 W): 400 x 6000 + 300 x 4000 J. Without holding, b runs on n1 (500 W)
    # from 4000 and moves to n0 when a ends (restarts are free), ending at 5500:
    # 400 x 5500 + 300 x 4500 + 500 x 1000 J.
    sc = scenario(TWO_TYPES, TWO_PROFILES,
                  [job("a", due=5000.0, epochs=500.0), job("c", due=10000.0, epochs=1000.0),
                   job("b", submit=4000.0, due=20000.0, epochs=100.0)])
    held = simulate(sc, make_policy("greedy"))
    plain = simulate(sc, make_policy("greedy", **NO_HOLDS))
    b = {r.job_id: r for r in held.jobs}["b"]
    assert (b.first_start, b.completion_time) == (pytest.approx(5000.0), pytest.approx(6000.0))
    assert held.summary["total_cost"] == pytest.approx((400 * 6000 + 300 * 4000) * 1e-7)
    assert plain.summary["total_cost"] == pytest.approx(
        (400 * 5500 + 300 * 4500 + 500 * 1000) * 1e-7)


def test_offered_load_by_hand():
    log = ArrivalLog(window=3)
    first = _snap([job("a", submit=0.0, epochs=100.0)], now=0.0)
    log.observe(first)
    assert log.offered_load(first) == math.inf  # one arrival: no rate yet
    jobs = [job("a", submit=0.0, epochs=100.0), job("b", submit=400.0, epochs=50.0)]
    snap = _snap(jobs, now=1000.0)
    log.observe(snap)
    # 1 arrival in 1000 s x mean least GPU-time (1000 + 500) / 2 s / 4 GPUs
    assert log.offered_load(snap) == pytest.approx(1 / 1000 * 750 / 4)
    for i in range(10):  # only the newest `window` arrivals count
        log.observe(_snap([job(f"x{i}", submit=2000.0 + 100 * i, epochs=100.0)], now=3000.0))
    assert len(log.seen) <= 2 * log.window
    later = _snap([job("x9", submit=2900.0, epochs=100.0)], now=3000.0)
    assert log.offered_load(later) == pytest.approx(2 / (3000.0 - 2700.0) * 1000 / 4)


def test_offered_load_averages_the_work_over_arrivals_not_over_jobs_in_view():
    # a (10000 s of work) and b (500 s) arrive at 0 and 100; at 2000 only a is left in view.
    # Long jobs stay in view longer: the mean over the jobs in view would be 10000 s.
    log = ArrivalLog()
    log.observe(_snap([job("a", epochs=1000.0), job("b", submit=100.0, epochs=50.0)],
                      now=100.0))
    later = _snap([job("a", epochs=1000.0)], now=2000.0)
    log.observe(later)
    assert log.offered_load(later) == pytest.approx(1 / 2000 * (10000 + 500) / 2 / 4)


def _one_node(*jobs):
    return scenario(cluster([("n0", "A", 2)], {"A": [300, 400]}), PROFILES, list(jobs))


def test_simulator_starts_a_held_job_at_its_latest_start_at_the_same_energy():
    # j0 runs 100 s at once (no slack). j1 arrives at 2000 (1000 s of work, due 11000): two
    # arrivals in 2000 s, load 1/2000 x 1000 / 2 = 0.25 < 0.5, alone: held until
    # 11000 - 1.1 x 1000 = 9900, when nothing has arrived; it starts then and ends at 10900.
    sc = _one_node(job("j0", submit=0.0, due=100.0, epochs=10.0),
                   job("j1", submit=2000.0, due=11000.0, epochs=100.0))
    held = simulate(sc, make_policy("greedy"))
    plain = simulate(sc, make_policy("greedy", **NO_HOLDS))
    j1 = {r.job_id: r for r in held.jobs}["j1"]
    assert (j1.first_start, j1.completion_time) == (pytest.approx(9900.0), pytest.approx(10900.0))
    assert {r.job_id: r for r in plain.jobs}["j1"].first_start == 2000.0
    # 300 W x (100 s + 1000 s), 1e-7 EUR per joule, either way; nobody late
    for result in (held, plain):
        assert result.summary["total_cost"] == pytest.approx(300 * 1100 * 1e-7)


def test_a_job_arriving_during_the_hold_shares_the_powered_node():
    # As above, and j2 arrives at 5000 (1000 s of work): j1 and j2 run side by side from
    # 5000 to 6000 at 400 W instead of 300 W each, apart: 300 x 100 + 400 x 1000 J.
    sc = _one_node(job("j0", submit=0.0, due=100.0, epochs=10.0),
                   job("j1", submit=2000.0, due=11000.0, epochs=100.0),
                   job("j2", submit=5000.0, due=20000.0, epochs=100.0))
    held = simulate(sc, make_policy("greedy"))
    plain = simulate(sc, make_policy("greedy", **NO_HOLDS))
    starts = {r.job_id: r.first_start for r in held.jobs}
    assert starts == {"j0": 0.0, "j1": 5000.0, "j2": 5000.0}
    assert held.summary["total_cost"] == pytest.approx((300 * 100 + 400 * 1000) * 1e-7)
    assert plain.summary["total_cost"] == pytest.approx(300 * 2100 * 1e-7)


def test_a_revisit_is_a_decision_point_and_not_a_stall():
    # A policy that holds j until 50 (and asks to be revisited then), then runs it.
    class Holding(Scripted):
        def decide(self, snap):
            plan = super().decide(snap)
            return plan if snap.time >= 50.0 else Decision({}, 50.0)

    sc = _one_node(job("j", submit=0.0, epochs=1.0))
    result = simulate(sc, Holding(lambda t, ids: {"j": ("n0", 1)}))
    assert result.jobs[0].first_start == 50.0 and result.rescheduling_points == 2


def test_the_service_replans_when_a_held_job_must_start(tmp_path):
    # A policy that holds every job until 1100 s on the service's clock: the scheduler looks
    # again then, with reason "revisit", not before; the forecast starts the job then.
    from conftest import write_service_files

    from andreas.executors.local import LocalExecutor
    from andreas.service.api import _nodes
    from andreas.service.config import read_service_config
    from andreas.service.db import JobRow
    from andreas.service.decider import InlineDecider
    from andreas.service.scheduler import Scheduler
    from andreas.service.store import Store

    class HoldUntil1100:
        name = "hold"

        def decide(self, snap):
            return Decision({}, 1100.0) if snap.time < 1100.0 else {}

    config = read_service_config(write_service_files(tmp_path))
    store = Store(config.database_url)
    store.create_token("u", "user")
    now = [1000.0]
    scheduler = Scheduler(config, store, LocalExecutor(_nodes(config)), clock=lambda: now[0],
                          decider=InlineDecider(HoldUntil1100(), config.policy,
                                                config.policy_options))
    with store.session() as s:
        s.add(JobRow(id="j", owner_id=1, name="j", command=["true"], epochs=100.0,
                     submitted_at=1000.0, due_date=5000.0, weight=0.01, profile_name="mlp",
                     state="queued", epochs_done=0.0, cancel_requested=False,
                     speed_factor=1.0))
    scheduler.tick()  # startup
    assert scheduler.board.latest.revisit_at == 1100.0 and scheduler.board.latest.assignments == {}
    assert scheduler.board.latest.forecast["j"]["start"] == pytest.approx(1100.0)
    now[0] = 1050.0
    scheduler.tick()
    assert scheduler.board.latest.decisions == 1  # nothing to look at yet
    now[0] = 1100.0
    scheduler.tick()
    assert scheduler.board.latest.decisions == 2 and "revisit" in scheduler.board.latest.reasons
    assert scheduler.board.latest.revisit_at is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.integers(1, 20), st.integers(1, 4)),
                max_size=8),
       st.integers(0, 30), st.integers(1, 20), st.integers(1, 4), st.integers(4, 12))
def test_busy_profile_and_earliest_start_match_their_definitions(raw, t0, length, gpus, cap):
    from andreas.policies.steps.wait import _busy_profile, _earliest_start, _usage

    runs = [(float(s), float(s + d), g) for s, d, g in raw]

    def busy(t):  # the definition: GPUs of the runs holding them at t
        return sum(g for s, e, g in runs if s <= t < e)

    pieces = _usage(_busy_profile(runs), float(t0), float(t0 + length))
    assert pieces[0][0] == t0
    for (t, b), nxt in zip(pieces, [p[0] for p in pieces[1:]] + [t0 + length]):
        assert b == busy(t) and all(busy(x + 0.5) == b for x in range(int(t), int(nxt)))
    # the first run end after now at which `gpus` GPUs stay free for `length`
    expected = next((e for e in sorted({e for _, e, _ in runs if e > 0})
                     if all(busy(x + 0.5) + gpus <= cap for x in range(int(e), int(e) + length))),
                    None)
    assert _earliest_start(runs, cap, gpus, float(length), 0.0) == expected


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 30)), max_size=70),
                min_size=1, max_size=8))
def test_the_arrival_log_skips_old_jobs_without_changing_what_it_keeps(decisions):
    # ArrivalLog.observe only counts the jobs older than every one of `window` it keeps; its
    # state must be what adding every unseen job, then trimming, gives (the plain rule)
    from andreas.model import Profiles
    from andreas.policies.base import JobView, Snapshot

    def plain(log, snap):
        for view in snap.jobs:
            if view.job_id not in log.seen:
                log.seen[view.job_id] = (view.job.submit_time, view.job.epochs * 10.0)
                log.jobs[view.job_id] = view.job
        if len(log.seen) > 2 * log.window:
            log.seen = dict(sorted(log.seen.items(), key=lambda kv: kv[1][0])[-log.window:])
            log.jobs = {k: log.jobs[k] for k in log.seen}

    fast, reference = ArrivalLog(window=5), ArrivalLog(window=5)
    for k, jobs in enumerate(decisions):
        views = tuple(JobView(job(f"j{i}", submit=float(t), epochs=1.0), 1.0)
                      for i, t in dict(jobs).items())
        snap = Snapshot(100.0 * k, CLUSTER, Profiles(PROFILES), views)
        fast.observe(snap)
        plain(reference, snap)
        assert fast.seen == reference.seen and list(fast.seen) == list(reference.seen)
        assert fast.jobs == reference.jobs


def test_a_first_start_overhead_does_not_pause_a_just_started_job_for_an_identical_one():
    # Seen in the live service under load: a and b just started (no progress yet), c, the
    # same job submitted 0.2 s after a, waits. Were c's first start (300 s here) charged in
    # the plan's tables, c would look more urgent than a, and the plan would pause a for it:
    # a wasted restart. Only the holds and the forecast count a first start's overhead.
    from dataclasses import replace

    slow_start = cluster([("n0", "A", 2)], {"A": [300, 400]}, overhead=300.0)
    jobs = [job("a", submit=0.0, due=50000.0, epochs=100.0),
            job("b", submit=0.1, due=50000.1, epochs=100.0),
            job("c", submit=0.2, due=50000.2, epochs=100.0)]
    snap = replace(snapshot(scenario(slow_start, PROFILES, jobs), now=1.0,
                            running={"a": ("n0", 1), "b": ("n0", 1)}),
                   first_start_overhead=True)
    for name in ("greedy", "andreas", "andreas-paper"):
        plan = make_policy(name, seed=1).decide(snap)
        assert dict(plan) == {"a": Assignment("n0", 1), "b": Assignment("n0", 1)}, name
