"""The simulator's event heap (sim/events.py): order, superseded events, batches."""

from __future__ import annotations

import math

from helpers import cluster, job, scenario
from hypothesis import given, settings
from hypothesis import strategies as st

from andreas.policies import make_policy
from andreas.policies.base import Assignment
from andreas.sim.engine import Simulator, _JobState
from andreas.sim.events import Arrival, Completion, EventQueue, Timer


class _Sim:
    """Just what events look at."""


def test_events_pop_in_time_order_then_push_order():
    q, sim = EventQueue(), _Sim()
    a, b, c = job("a", submit=5.0), job("b", submit=1.0), job("c", submit=5.0)
    for j in (a, b, c):
        q.push(Arrival(j.submit_time, j))
    assert q.next_time(sim) == 1.0
    assert [e.job.job_id for e in q.pop_batch(sim, 1.0)] == ["b"]
    assert [e.job.job_id for e in q.pop_batch(sim, 5.0)] == ["a", "c"]
    assert q.next_time(sim) == math.inf


def test_a_completion_of_a_replaced_stretch_is_skipped():
    q, sim = EventQueue(), _Sim()
    s = _JobState(job("a"), 10.0, 0, stretch=object(), stamp=1)  # type: ignore[arg-type]
    q.push(Completion(100.0, s, 1))
    s.stamp = 2  # the job was moved: a new stretch, a new completion
    q.push(Completion(150.0, s, 2))
    assert q.next_time(sim) == 150.0
    assert [e.time for e in q.pop_batch(sim, 150.0)] == [150.0]
    s.stretch = None  # paused: its completion no longer holds
    q.push(Completion(200.0, s, 2))
    assert q.next_time(sim) == math.inf


def test_a_re_armed_timer_leaves_one_valid_event():
    q, sim = EventQueue(), _Sim()
    t = Timer("tick")
    t.arm(q, 300.0)
    t.arm(q, 300.0)  # unchanged: nothing pushed
    assert len(q.heap) == 1
    t.arm(q, 600.0)
    assert q.next_time(sim) == 600.0
    (event,) = q.pop_batch(sim, 600.0)
    event.fire(sim, 600.0)  # type: ignore[arg-type]
    assert t.fired and t.at == math.inf
    t.arm(q, math.inf)  # disarmed: nothing pushed
    assert q.next_time(sim) == math.inf


def test_a_batch_takes_completions_within_rounding_but_not_later_arrivals():
    q, sim = EventQueue(), _Sim()
    s = _JobState(job("a"), 1.0, 0, stretch=object(), stamp=1)  # type: ignore[arg-type]
    now = 1000.0
    q.push(Completion(now + 1e-7, s, 1))  # within 1e-9 x 1000 s: ends now
    late = job("b", submit=now + 1e-7)
    q.push(Arrival(late.submit_time, late))
    batch = q.pop_batch(sim, now)
    assert [type(e).__name__ for e in batch] == ["Completion"]
    assert q.next_time(sim) == now + 1e-7  # the arrival waits for its own time


def test_the_simulator_asks_at_arrivals_completions_and_ticks_only():
    # one 1-GPU node, two jobs of 100 s each: a at 0, b at 50; rounds of 30 s
    sc = scenario(cluster([("n1", "G", 1)], {"G": [100]}), {"p": {("G", 1): 1.0}},
                  [job("a", epochs=100.0), job("b", submit=50.0, epochs=100.0)])
    asked = []

    class Scripted:  # keeps the running job, starts a waiting one when n1 is free
        name = "scripted"

        def decide(self, snap):
            asked.append(snap.time)
            running = {v.job_id: v.assignment for v in snap.jobs if v.assignment}
            if running:
                return running
            return {snap.jobs[0].job_id: Assignment("n1", 1)}

    result = Simulator(sc, Scripted(), period=30.0).run()
    # arrivals 0, 50; a's completion at 100; ticks every 30 s while jobs are active; none
    # at 200, when the last job ends and nothing is left to decide
    assert asked == [0.0, 30.0, 50.0, 60.0, 90.0, 100.0, 120.0, 150.0, 180.0]
    assert [r.completion_time for r in result.jobs] == [100.0, 200.0]



def test_a_non_preempting_policy_decides_alike_on_the_waiting_jobs_alone():
    from andreas.policies.base import preempts
    from andreas.sim.generate import generate_paper_style, load_template

    sc = generate_paper_style(load_template("paper"), 4, 7, 1500, jobs_per_node=4)
    for name in ("fifo", "edf", "ps", "wspt", "atc"):
        assert not preempts(make_policy(name))
        fast = Simulator(sc, make_policy(name))
        assert fast.waiting_only
        general = Simulator(sc, make_policy(name))
        general.waiting_only = False  # every job in the snapshot, through pinning.decide
        a, b = fast.run(), general.run()
        assert a.segments == b.segments, name
        assert a.summary["rescheduling_points"] == b.summary["rescheduling_points"]
        assert a.summary["restarts"] == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.floats(0.0, 50.0)), min_size=1, max_size=80))
def test_dropping_superseded_completions_keeps_what_pops_and_bounds_the_heap(moves):
    """Jobs moved again and again (each move: a new completion, the old one superseded): the
    queue pops the same events as one that never drops any, and its heap stays near the
    number of events that still hold."""
    sim = _Sim()
    kept, plain = EventQueue(compact_after=2), EventQueue(compact_after=10**9)
    states = [_JobState(job(f"j{k}"), 1.0, k, stretch=object())  # type: ignore[arg-type]
              for k in range(6)]
    for k, end in moves:
        s = states[k]
        if s.stamp:
            kept.supersede(sim)  # type: ignore[arg-type]
            plain.supersede(sim)  # type: ignore[arg-type]
        s.stamp += 1
        for q in (kept, plain):
            q.push(Completion(end, s, s.stamp))
        live = sum(1 for x in states if x.stamp)
        assert len(kept.heap) <= max(2 * live, live + kept.compact_after) + 1

    def drain(q):
        out = []
        while (t := q.next_time(sim)) < math.inf:
            out += [(e.time, e.state.index) for e in q.pop_batch(sim, t)]  # type: ignore[attr-defined]
        return out

    assert drain(kept) == drain(plain)


def test_a_simulation_collects_between_decisions_and_restores_the_pacing():
    import gc

    from andreas import simulate
    from andreas.sim import collector

    seen = []

    class Hoarding:  # keeps 3,000 new containers from each decision to the next
        name = "hoarding"
        kept: list = []

        def decide(self, snapshot):
            seen.append(gc.get_threshold()[0])
            young.append(gc.get_count()[0])
            self.kept = [[] for _ in range(3000)]
            return make_policy("fifo").decide(snapshot)

    def jobs():
        return scenario(cluster([("n1", "G", 1)], {"G": [100]}), {"p": {("G", 1): 1.0}},
                        [job("a"), job("b", submit=5.0), job("c", submit=7.0)])

    young: list[int] = []
    before = gc.get_threshold()
    simulate(jobs(), Hoarding())
    assert seen and all(t == max(before[0], collector.SAFETY_THRESHOLD) for t in seen)
    # the interpreter's own pass does not run before 20,000 allocations: only a collection
    # between the decisions keeps the young generation below the 3,000 containers kept
    assert len(young) >= 3 and all(n < 3000 for n in young[1:])
    assert gc.get_threshold() == before
    gc.set_threshold(30_000, *before[1:])  # a caller's own, laxer pacing is kept inside
    try:
        seen.clear()
        simulate(jobs(), Hoarding())
        assert seen and set(seen) == {30_000}
    finally:
        gc.set_threshold(*before)
