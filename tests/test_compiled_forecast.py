"""The compiled forecast (sim/compiled_forecast.py) gives the Python simulator's cost, or
declines: by hand on small cases, and to 1e-9 on random clusters, queues and plans."""

from dataclasses import replace

import numpy as np
import pytest
from helpers import cluster, drawn_jobs, drawn_profiles, job, scenario
from hypothesis import given, settings
from hypothesis import strategies as st

from andreas.model import Tariff
from andreas.policies import make_policy
from andreas.policies.base import Assignment, JobView, Snapshot
from andreas.policies.decision import Decision
from andreas.policies.greedy import follower, steady_follower
from andreas.policies.search import rollout_kernel
from andreas.policies.steps.forward_check import future_cost
from andreas.sim.compiled_forecast import LIST_SORT, compiled_cost
from andreas.sim.forecast import forecast

# two nodes of one GPU each, 100 W busy; 1e-7 EUR per joule; 10 s per epoch
TWO = {"T": [100]}
PROFILES = {"p": {("T", 1): 10.0}}


def python_cost(snap, plan, arrivals=(), make=follower):
    return sum(c.total_cost for c in forecast(snap, plan, make(), arrivals=arrivals).values())


def test_a_running_job_and_an_arrival_by_hand():
    sc = scenario(cluster([("n", "T", 1), ("m", "T", 1)], TWO, overhead=7.0), PROFILES,
                  [job("a", epochs=10.0)])
    snap = Snapshot(0.0, sc.cluster, sc.profiles,
                    (JobView(sc.jobs[0], 10.0, Assignment("n", 1), True),))
    arrival = (job("b", submit=50.0, due=200.0, epochs=5.0),)
    plan = {"a": Assignment("n", 1)}
    # a: 100 s x 100 W x 1e-7 = 1e-3 EUR; b starts on the free node m at 50 s and runs 50 s:
    # 5e-4 EUR, or with its first start paying the 7 s overhead, 57 s: 5.7e-4 EUR
    assert compiled_cost(snap, plan, follower(), arrival) == pytest.approx(1.5e-3, rel=1e-12)
    first_pays = replace(snap, first_start_overhead=True)
    assert compiled_cost(first_pays, plan, follower(), arrival) == pytest.approx(1.57e-3,
                                                                                 rel=1e-12)
    # paused now and revisited at 30 s (a restart of 7 s): 107 s of a, and it ends at 137 s
    # after its due date of 120 s: 17 s x 0.01 EUR/s late
    late = replace(snap, jobs=(JobView(replace(sc.jobs[0], due_date=120.0), 10.0,
                                       Assignment("n", 1), True),))
    held = Decision({}, revisit_at=30.0)
    assert compiled_cost(late, held, follower()) == pytest.approx(1.07e-3 + 0.17, rel=1e-12)
    assert python_cost(late, held) == pytest.approx(1.07e-3 + 0.17, rel=1e-12)


def test_forecasts_it_does_not_cover_play_in_python():
    sc = scenario(cluster([("n", "T", 1)], TWO), PROFILES, [job("a")])
    snap = Snapshot(0.0, sc.cluster, sc.profiles, (JobView(sc.jobs[0], 10.0),))
    plan = {"a": Assignment("n", 1)}
    assert compiled_cost(snap, plan, follower()) is not None
    tariff = replace(snap, cluster=replace(sc.cluster, tariff=Tariff((0.1, 0.3), 50.0)))
    own_draw = replace(snap, profiles=replace(sc.profiles, power={"p": {("T", 1): 80.0}}))
    limited = {"a": Assignment("n", 1, power_limit_w=150.0)}
    assert compiled_cost(tariff, plan, follower()) is None
    assert compiled_cost(own_draw, plan, follower()) is None
    assert compiled_cost(snap, limited, follower()) is None
    assert compiled_cost(snap, plan, make_policy("andreas")) is None  # another follower
    # and the checks get the simulator's answer there
    assert future_cost(tariff, plan, [()], follower) == pytest.approx(
        python_cost(tariff, plan), rel=1e-12)
    # 100 s at its own 80 W, not the table's 100 W: 8e-4 EUR
    assert future_cost(own_draw, plan, [()], follower) == pytest.approx(8e-4, rel=1e-12)


@st.composite
def cases(draw):
    """A random cluster and queue (as tests/test_invariants.py draws them, within what the
    compiled path covers), jobs running or waiting at `now`, later arrivals, and a plan: the
    follower's own, the running jobs kept, or every job held until a revisit."""
    types = ["A", "B"][: draw(st.integers(1, 2))]
    nodes = [(f"n{i}", types[i % len(types)], draw(st.integers(1, 4)))
             for i in range(draw(st.integers(1, 4)))]
    power = {t: sorted(draw(st.lists(st.integers(50, 600), min_size=4, max_size=4)))
             for t in types}
    profiles = drawn_profiles(draw, types)
    jobs = drawn_jobs(draw, 12, 600, 900)
    overhead = float(draw(st.sampled_from([0, 0, 7, 30])))
    cl = cluster(nodes, power, overhead=overhead)
    if draw(st.booleans()):  # nodes that stay powered when idle
        cl = replace(cl, gpu_types={t: replace(gt, idle_w=float(gt.node_power_w[0] // 2))
                                    for t, gt in cl.gpu_types.items()})
    sc = scenario(cl, profiles, jobs)
    now = float(draw(st.integers(0, 300)))
    free = {name: gpus for name, _, gpus in nodes}
    views = []
    for j in sc.jobs:
        if j.submit_time > now:
            continue
        left = j.epochs * draw(st.sampled_from([1.0, 0.5, 0.1]))
        fits = [(name, g) for name, t, _ in nodes for (pt, g) in profiles[j.profile]
                if pt == t and free[name] >= g]
        if fits and draw(st.booleans()):
            name, g = draw(st.sampled_from(fits))
            free[name] -= g
            views.append(JobView(j, left, Assignment(name, g), True,
                                 draw(st.sampled_from([0.0, overhead / 2]))))
        else:
            views.append(JobView(j, left, None, draw(st.booleans())))
    snap = Snapshot(now, sc.cluster, sc.profiles, tuple(views),
                    first_start_overhead=draw(st.booleans()))
    arrivals = tuple(j for j in sc.jobs if j.submit_time > now)
    running = {v.job_id: v.assignment for v in views if v.assignment is not None}
    kind = draw(st.sampled_from(["follower", "kept", "held"]))
    if kind == "follower" and views:
        plan = follower().decide(snap)
    elif kind == "kept":
        plan = running
    else:
        plan = Decision({}, revisit_at=now + float(draw(st.integers(1, 500))))
    return snap, plan, arrivals


@settings(max_examples=300, deadline=None)
@given(cases(), st.sampled_from([follower, steady_follower]))
def test_the_compiled_forecast_costs_what_the_simulator_does(case, make):
    """Both followers: the plain greedy pass, and its twin that plans the waiting jobs alone
    on the GPUs left free (whose queues often hold a job with no configuration that fits:
    Python's sort orders those, and the compiled loop must order them alike)."""
    snap, plan, arrivals = case
    compiled = compiled_cost(snap, plan, make(), arrivals)
    assert compiled is not None
    assert compiled == pytest.approx(python_cost(snap, plan, arrivals, make), rel=1e-9,
                                     abs=1e-12)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([float("nan"), -2.0, -1.0, 0.0, 1.5, 3.0]),
                          st.sampled_from([0.0, 1.0, 2.0])), min_size=0, max_size=63))
def test_queues_with_unplaceable_jobs_are_ordered_as_python_sorts_them(items):
    """A job with no configuration on the GPUs left free has a NaN key: no order is total,
    and Python's sort gives its own. The compiled loop reproduces it (short lists), or says
    it cannot and the future plays in Python."""
    key = np.array([k for k, _ in items])
    submit = np.array([s for _, s in items])
    expected = sorted(range(len(items)), key=lambda i: (float(key[i]), float(submit[i])))
    order, ok = rollout_kernel.ordered(key, submit, LIST_SORT)
    assert ok == (LIST_SORT or not np.isnan(key).any() or np.isnan(key).all())
    if ok:
        assert order.tolist() == expected
    longer = np.concatenate([key, [np.nan, 1.0] * 40])
    assert not rollout_kernel.ordered(longer, np.zeros(len(longer)), LIST_SORT)[1]
