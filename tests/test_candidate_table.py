"""The candidate table's compiled arithmetic (policies/search/table_kernel.py) against the
numpy arithmetic it replaced, kept here as the reference: equal to the bit on snapshots with
running, paused and restarting jobs, with and without a tariff."""

from __future__ import annotations

import dataclasses

import numpy as np
from helpers import cluster, job, scenario
from hypothesis import given, settings
from hypothesis import strategies as st

from andreas.cost import run_energy_cost
from andreas.model import Tariff
from andreas.policies.base import Assignment, JobView, Snapshot
from andreas.policies.search.planning import PlanningContext


def reference_table(ctx: PlanningContext, profiles):
    """The table as planning.py built it with numpy calls (before table_kernel.py): ct, cg,
    ctime, cen, meets, real, tmin, tmax."""
    views, now = ctx.views, ctx.now
    J = len(views)
    rows = ctx.tables.profile_rows(profiles)
    pidx, (p_type, p_gpus, p_spe, p_watts, p_n, p_restart) = rows.lookup(
        [v.job.profile for v in views])
    C = p_type.shape[1]
    rem = np.array([v.remaining_epochs for v in views], float)
    started = np.array([v.started for v in views], bool)
    due = np.array(ctx.due, float)
    ct, cg, nc = p_type[pidx], p_gpus[pidx], p_n[pidx]
    real = np.arange(C)[None, :] < nc[:, None]
    run = rem[:, None] * p_spe[pidx]
    overhead = np.where(np.isnan(p_restart[pidx]), ctx.overhead,
                        np.maximum(p_restart[pidx], ctx.plan_restart_s))
    times = np.where(started[:, None], run + overhead, run)
    on_current = (ct == ctx.home_type[:, None]) & (cg == ctx.home_g[:, None])
    times = np.where(on_current, run + ctx.restart_left[:, None], times)
    if ctx.cluster.tariff is None:
        energy = p_watts[pidx] * ((now + times) - now) * ctx.cluster.eur_per_joule()
    else:
        energy = np.zeros((J, C))
        for j, c in zip(*np.nonzero(real)):
            energy[j, c] = run_energy_cost(ctx.cluster, ctx.type_names[ct[j, c]],
                                           int(cg[j, c]), float(times[j, c]), now)
    ok = (now + times <= due[:, None]) & real
    miss = np.where(real, (~ok).astype(np.int64), 2)
    order = np.lexsort((np.where(ok, times, energy), np.where(ok, energy, times), miss), axis=-1)
    flat = (order + (np.arange(J) * C)[:, None]).ravel()

    def take(a):
        return a.ravel()[flat].reshape(J, C)

    zero = ~take(real)
    ctime = np.where(zero, 0.0, take(times))
    real_sorted = np.arange(C)[None, :] < nc[:, None]
    none = ~real_sorted.any(axis=1)
    tmin = np.where(none, np.nan, np.where(real_sorted, ctime, np.inf).min(axis=1))
    tmax = np.where(none, np.nan, np.where(real_sorted, ctime, -np.inf).max(axis=1))
    return (np.where(zero, 0, take(ct)), np.where(zero, 0, take(cg)), ctime,
            np.where(zero, 0.0, take(energy)), take(ok), real_sorted, tmin, tmax)


@st.composite
def busy_snapshots(draw):
    """Snapshots whose jobs wait, run (some on a configuration with a restart under way) or
    were paused, on a cluster with one price or an hourly tariff."""
    nodes = [("n0", "A", 4), ("n1", "B", 4), ("n2", "A", 2)]
    power = {t: sorted(draw(st.lists(st.floats(50, 500), min_size=4, max_size=4)))
             for t in "AB"}
    profiles = {}
    for p in ("p0", "p1"):
        configs = {("A", 1): draw(st.floats(1, 100))}
        for t, g in (("A", 2), ("A", 4), ("B", 1), ("B", 2), ("B", 4), ("B", 8)):
            if draw(st.booleans()):  # ("B", 8) fits no node: never a candidate
                # equal run times on purpose now and then: the order's ties
                configs[(t, g)] = draw(st.sampled_from([5.0, 20.0])) if draw(
                    st.booleans()) else draw(st.floats(1, 100)) / g ** 0.5
        profiles[p] = configs
    cl = cluster(nodes, power, overhead=draw(st.sampled_from([0.0, 30.0, 300.0])))
    if draw(st.booleans()):
        prices = tuple(draw(st.lists(st.floats(-0.05, 0.4), min_size=2, max_size=6)))
        cl = dataclasses.replace(cl, tariff=Tariff(prices, 600.0))
    sc = scenario(cl, profiles, [])
    now = draw(st.floats(0, 5000))
    views = []
    for i in range(draw(st.integers(1, 8))):
        j = job(f"j{i}", due=now + draw(st.floats(-100, 5000)), epochs=draw(st.floats(1, 50)),
                profile=draw(st.sampled_from(["p0", "p1"])))
        state = draw(st.sampled_from(["waiting", "paused", "running"]))
        if state == "running":
            t, g = draw(st.sampled_from(sorted(k for k in profiles[j.profile]
                                               if k != ("B", 8))))
            node = {"A": "n0", "B": "n1"}[t]
            views.append(JobView(j, j.epochs, Assignment(node, g), True,
                                 draw(st.sampled_from([0.0, 12.5]))))
        else:
            views.append(JobView(j, j.epochs, None, state == "paused"))
    return Snapshot(now, cl, sc.profiles, tuple(views))


@settings(max_examples=150, deadline=None)
@given(busy_snapshots(), st.sampled_from([0.0, 120.0]))
def test_the_compiled_table_equals_the_numpy_arithmetic(snap, plan_restart_s):
    ctx = PlanningContext(snap, plan_restart_s)
    expected = reference_table(ctx, snap.profiles)
    t = ctx.table
    for name, want in zip(("ct", "cg", "ctime", "cen", "meets", "real", "tmin", "tmax"),
                          expected):
        got = getattr(t, name)
        assert got.shape == want.shape, name
        assert np.array_equal(got, want, equal_nan=got.dtype.kind == "f"), name


def test_a_hand_computed_row():
    """One job, 10 epochs, due at 100 s: (A, 1) 8 s/epoch = 80 s on time, (A, 2) 5 s/epoch =
    50 s on time, (B, 1) 20 s/epoch = 200 s late. On time first, cheapest first: (A, 1) draws
    100 W x 80 s = 8,000 J, (A, 2) 180 W x 50 s = 9,000 J; then the late one."""
    cl = cluster([("n0", "A", 2), ("n1", "B", 1)], {"A": [100, 180], "B": [50]})
    sc = scenario(cl, {"p": {("A", 1): 8.0, ("A", 2): 5.0, ("B", 1): 20.0}},
                  [job("a", due=100.0, epochs=10.0)])
    ctx = PlanningContext(Snapshot(0.0, cl, sc.profiles, (JobView(sc.jobs[0], 10.0),)))
    t = ctx.table
    assert t.ct[0].tolist() == [0, 0, 1] and t.cg[0].tolist() == [1, 2, 1]
    assert t.ctime[0].tolist() == [80.0, 50.0, 200.0]
    assert t.meets[0].tolist() == [True, True, False]
    joule = cl.eur_per_joule()
    assert np.allclose(t.cen[0], [8000 * joule, 9000 * joule, 50 * 200 * joule])
    assert (t.tmin[0], t.tmax[0]) == (50.0, 200.0)
