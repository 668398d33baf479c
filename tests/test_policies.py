"""Ordering of the baselines, best-fit placement, and the Randomized Greedy against the greedy."""

import pytest
from helpers import NO_HOLDS, cluster, job, scenario, snapshot
from hypothesis import given, settings
from hypothesis import strategies as st

from andreas.policies import make_policy
from andreas.policies.base import Assignment
from andreas.policies.greedy import RandomizedGreedy
from andreas.policies.search.orderings import ordered
from andreas.policies.search.planning import PlanningContext

ONE_GPU = {"p": {("G", 1): 10.0}}


def three_waiting():
    cl = cluster([("n1", "G", 1)], {"G": [100]})
    jobs = [job("early", submit=0, due=900, weight=0.01),
            job("urgent", submit=1, due=300, weight=0.02),
            job("heavy", submit=2, due=800, weight=0.05)]
    return scenario(cl, ONE_GPU, jobs)


@pytest.mark.parametrize("policy, first", [("fifo", "early"), ("edf", "urgent"),
                                           ("ps", "heavy")])
def test_baseline_orders(policy, first):
    plan = make_policy(policy).decide(snapshot(three_waiting(), now=5))
    assert list(plan) == [first]


def test_baselines_never_preempt_running_jobs():
    sc = three_waiting()
    snap = snapshot(sc, now=5, running={"early": ("n1", 1)})
    for name in ("fifo", "edf", "ps"):
        assert dict(make_policy(name).decide(snap)) == {"early": snap.jobs[0].assignment}


def best_fit_cluster():
    return cluster([("n1", "G", 4), ("n2", "G", 4), ("n3", "G", 4), ("n4", "G", 4)],
                   {"G": [100, 150, 200, 250]})


@pytest.mark.parametrize("gpus, expected", [(1, "n1"), (2, "n3"), (4, "n2")])
def test_best_fit_node_left_with_fewest_free_gpus(gpus, expected):
    jobs = [job("r1", profile="one"), job("r3", profile="two"), job("new", profile="new")]
    profiles = {"one": {("G", 3): 1.0}, "two": {("G", 2): 1.0}, "new": {("G", gpus): 1.0}}
    sc = scenario(best_fit_cluster(), profiles, jobs)
    # n1 has 1 free GPU, n2 4 free, n3 2 free, n4 4 free.
    snap = snapshot(sc, running={"r1": ("n1", 3), "r3": ("n3", 2)})
    plan = make_policy("fifo").decide(snap)
    assert plan["new"].node == expected  # ties (n2 vs n4) go to the node listed first


def test_falls_back_to_next_configuration_then_waits():
    cl = cluster([("n1", "G", 2)], {"G": [100, 150]})
    profiles = {"p": {("G", 2): 5.0, ("G", 1): 10.0}}
    jobs = [job("run"), job("next"), job("wait")]
    sc = scenario(cl, profiles, jobs)
    snap = snapshot(sc, running={"run": ("n1", 1)})
    plan = make_policy("fifo").decide(snap)
    assert plan["next"].gpus == 1  # (G,2) does not fit any more; (G,1) does
    assert "wait" not in plan


def test_greedy_replans_running_jobs_by_pressure():
    cl = cluster([("n1", "G", 1)], {"G": [100]})
    jobs = [job("relaxed", due=1e6, weight=0.01), job("late", due=10, weight=0.05)]
    sc = scenario(cl, ONE_GPU, jobs)
    snap = snapshot(sc, running={"relaxed": ("n1", 1)})
    plan = make_policy("greedy").decide(snap)
    assert list(plan) == ["late"]  # the running, relaxed job is paused


@st.composite
def snapshots(draw):
    n_nodes = draw(st.integers(1, 4))
    nodes = [(f"n{i}", "AB"[i % 2], draw(st.integers(1, 4))) for i in range(n_nodes)]
    power = {t: sorted(draw(st.lists(st.floats(50, 500), min_size=4, max_size=4)))
             for t in "AB"}
    profiles = {}
    for p in ("p0", "p1"):
        configs = {}
        for t in "AB":
            for g in (1, 2, 4):
                if draw(st.booleans()) or (t == "A" and g == 1):
                    configs[(t, g)] = draw(st.floats(1, 100)) / g ** 0.5
        profiles[p] = configs
    # every node of type A must exist to host ("A", 1): make node 0 type A
    n_jobs = draw(st.integers(1, 8))
    jobs = [job(f"j{i}", submit=0, due=draw(st.floats(10, 5000)),
                weight=draw(st.floats(0.001, 0.1)), epochs=draw(st.floats(1, 50)),
                profile=draw(st.sampled_from(["p0", "p1"]))) for i in range(n_jobs)]
    return snapshot(scenario(cluster(nodes, power), profiles, jobs), now=draw(st.floats(0, 100)))


@settings(max_examples=60, deadline=None)
@given(snapshots(), st.integers(1, 1000), st.sampled_from(["proxy", "lookahead"]))
def test_randomized_greedy_never_worse_than_greedy_on_its_score(snap, seed, score):
    ctx = PlanningContext(snap)
    greedy_best = make_policy("greedy", score=score).elite(ctx)[0]
    andreas_elite = make_policy("andreas", seed=seed, max_iterations=50, score=score).elite(ctx)
    assert andreas_elite[0].score <= greedy_best.score + 1e-12
    # the decision's own deterministic pass (iteration 0 of its passes, which the slack guard
    # compares against) is the greedy pass run alone
    first = make_policy("andreas", seed=seed, max_iterations=50, score=score).search(ctx).first
    alone, alone_score = make_policy("greedy", score=score).deterministic_pass(ctx)
    assert (first.placement, first.score, first.iteration) == (alone, alone_score, 0)
    costs = [e.score for e in andreas_elite]
    assert costs == sorted(costs) and len(andreas_elite) <= 10
    # The plan it returns is the best of its elite, unless that plan spends slack the greedy
    # pass keeps (the slack guard): then the greedy pass's. (The search check, which may also
    # keep the pass when a job is late, has its own test in test_forward_check.py.)
    from andreas.policies.greedy import spends_needed_slack

    best = andreas_elite[0]  # (holding for company, a refinement after the choice, is off)
    plan = make_policy("andreas", seed=seed, max_iterations=50, score=score,
                       **NO_HOLDS, resize_max_load=0.0, search_check=False).decide(snap)
    guarded = best.iteration != 0 and spends_needed_slack(
        ctx, greedy_best.placement, best.placement, 0.5)
    assert plan == (greedy_best if guarded else best).placement.to_plan(ctx)
    unguarded = make_policy("andreas", seed=seed, max_iterations=50, score=score,
                            slack_guard=None, **NO_HOLDS, resize_max_load=0.0,
                            search_check=False).decide(snap)
    assert unguarded == best.placement.to_plan(ctx)


def test_greedy_and_andreas_share_one_implementation():
    assert isinstance(make_policy("greedy"), RandomizedGreedy)
    assert make_policy("greedy").params.search.max_iterations == 1
    assert make_policy("andreas", max_iterations=7).params.search.max_iterations == 7


@settings(max_examples=30, deadline=None)
@given(snapshots(), st.integers(1, 5))
def test_pass_budget_bounds_the_passes_of_a_decision(snap, per_job):
    """With a budget of per_job × jobs placements, only the first per_job passes are made:
    every elite plan comes from one of them, and the same seed gives the same first passes."""
    ctx = PlanningContext(snap)
    n = len(ctx.job_ids)
    budgeted = make_policy("andreas", seed=3, max_iterations=50,
                           pass_budget=per_job * n).elite(ctx)
    assert all(e.iteration < per_job for e in budgeted)
    limited = make_policy("andreas", seed=3, max_iterations=per_job).elite(ctx)
    assert [e.placement for e in budgeted] == [e.placement for e in limited]


def test_baselines_leave_waiting_a_job_no_node_can_host():
    # b needs 2 GPUs, the free node has 1; a holds the other node: nothing fits, nothing fails
    sc = scenario(cluster([("n1", "G", 1), ("n2", "G", 1)], {"G": [100]}),
                  {"p": {("G", 1): 1.0}, "big": {("G", 2): 1.0}},
                  [job("a"), job("b", profile="big")])
    for name in ("fifo", "edf", "ps", "wspt", "atc"):
        plan = make_policy(name).decide(snapshot(sc, running={"a": ("n1", 1)}))
        assert {k: (v.node, v.gpus) for k, v in plan.items()} == {"a": ("n1", 1)}, name


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(-1, 5), max_size=40))
def test_jobs_by_node_lists_each_nodes_jobs_in_index_order(nodes):
    # the kernel's scores visit each node's jobs through this one pass (they scanned every
    # job for every node): it must give each node's jobs, in increasing index, no others
    import numpy as np

    from andreas.policies.search.kernel import _jobs_by_node

    pn = np.array(nodes, np.int64)
    start, members = _jobs_by_node(pn, 6)
    for n in range(6):
        assert members[start[n]:start[n + 1]].tolist() == [j for j, m in enumerate(nodes)
                                                           if m == n]
    assert len(members) == sum(1 for m in nodes if m >= 0)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(1, 8)), min_size=1, max_size=9),
       st.lists(st.tuples(st.integers(0, 8), st.integers(1, 4)), max_size=20),
       st.integers(-1, 8), st.floats(0, 0.999), st.booleans(),
       st.lists(st.integers(0, 4), min_size=9, max_size=9), st.booleans())
def test_node_orders_stay_best_fit_order_as_a_pass_takes_gpus(nodes, takes, home, u,
                                                            use_rand, held, overhead):
    # a pass keeps each GPU type's node order up to date as it places jobs (it re-sorted every
    # type for every job): after any placements, pick_node must choose what the plain rule
    # does, the k-th fitting node in the order (free, n != home, n). With a restart overhead,
    # first among the nodes where the job fits beside the GPUs running jobs still to place
    # hold there (`held`), in the order (free - held, n != home, n); the plain rule if none.
    import numpy as np

    from andreas.policies.search.kernel import _pick_index, node_orders, pick_node, take_gpus

    node_type = np.array([t for t, _ in nodes], np.int64)
    free = np.array([cap for _, cap in nodes], np.int64)
    held_gpus = np.array(held[:len(nodes)], np.int64)
    type_nodes = np.argsort(node_type, kind="stable").astype(np.int64)
    type_start = np.searchsorted(node_type[type_nodes], np.arange(3)).astype(np.int64)
    order, start, pos = node_orders(free, node_type, type_nodes, type_start, 10)
    home = home if home < len(nodes) else -1

    def kth(fits):
        k = _pick_index(u, 1.0, len(fits)) if use_rand and len(fits) > 1 else 0
        return fits[k] if fits else -1

    for n, g in takes + [(0, 1)]:
        for typ in (0, 1):
            for want in range(1, 9):
                same = [n2 for n2 in range(len(nodes)) if node_type[n2] == typ]
                fits = sorted((n2 for n2 in same if free[n2] >= want),
                              key=lambda n2: (free[n2], n2 != home, n2))
                unheld = sorted((n2 for n2 in fits if free[n2] - held_gpus[n2] >= want),
                                key=lambda n2: (free[n2] - held_gpus[n2], n2 != home, n2))
                expected = kth(unheld) if overhead and unheld else kth(fits)
                assert pick_node(typ, want, home, 0, overhead, u, use_rand, 1.0, free,
                                 node_type, order, start, pos, held_gpus) == expected
        if n < len(nodes) and free[n] >= g:
            take_gpus(n, g, free, node_type, order, start, pos)


@st.composite
def roomy_snapshots(draw):
    """Few jobs on 8-GPU nodes with room to grow, some of them running, some due soon: the
    post-processing's ground (idle GPUs handed to jobs that gain from them)."""
    n_nodes = draw(st.integers(1, 3))
    nodes = [(f"n{i}", "AB"[i % 2], 8) for i in range(n_nodes)]
    power = {t: sorted(draw(st.lists(st.floats(50, 500), min_size=8, max_size=8)))
             for t in "AB"}
    profiles = {p: {(t, g): draw(st.floats(1, 100)) / g ** draw(st.floats(0.3, 1.0))
                    for t in "AB" for g in (1, 2, 3, 4, 6, 8)} for p in ("p0", "p1")}
    n_jobs = draw(st.integers(1, 8))
    jobs = [job(f"j{i}", due=draw(st.sampled_from([200.0, 1000.0]) | st.floats(10, 3000)),
                weight=draw(st.floats(0.001, 5.0)),
                epochs=draw(st.sampled_from([5.0, 20.0]) | st.floats(1, 50)),
                profile=draw(st.sampled_from(["p0", "p1"]))) for i in range(n_jobs)]
    running = {f"j{i}": (f"n{i % n_nodes}", 1) for i in range(n_jobs) if draw(st.booleans())}
    overhead = draw(st.sampled_from([0.0, 60.0]))
    return snapshot(scenario(cluster(nodes, power, overhead=overhead), profiles, jobs),
                    running=running)


@settings(max_examples=300, deadline=None)
@given(roomy_snapshots(), st.data(), st.sampled_from(["fast", "plain"]))
def test_post_processing_bound_changes_nothing(snap, data, impl):
    """kernel.post_process judges a trial from the two look-ahead terms it changes when no job
    waits: from any placement of every job, the same placements, GPUs and score, to the bit,
    as scoring every trial whole."""
    import numpy as np

    from andreas.policies.search import passes

    ctx = PlanningContext(snap)
    k = ctx.packed
    J = len(ctx.job_ids)
    node, cand = np.full(J, -1, np.int64), np.full(J, -1, np.int64)
    moved, free = np.zeros(J, np.bool_), np.array(ctx.node_cap, np.int64)
    for j in range(J):  # each job on a candidate and node drawn among those that fit
        fits = [(n, c) for c in range(int(k.nc[j])) for n in range(len(free))
                if k.node_type[n] == k.ct[j, c] and k.cg[j, c] <= free[n]]
        if fits:
            node[j], cand[j] = data.draw(st.sampled_from(fits))
            free[node[j]] -= k.cg[j, cand[j]]
            moved[j] = k.cmov[j, cand[j]] and node[j] != k.home[j]
    results = []
    for bound in (True, False):
        r = passes.PassResult(node.copy(), cand.copy(), moved.copy(), free.copy())
        score = passes.post_process(ctx, r, "lookahead", impl, bound=bound)
        results.append((score, r.node.tolist(), r.cand.tolist(), r.moved.tolist(),
                        r.free.tolist()))
    assert results[0] == results[1]


@settings(max_examples=60, deadline=None)
@given(roomy_snapshots(), st.integers(1, 1000), st.sampled_from(["fast", "plain"]))
def test_each_pass_is_post_processed_from_its_own_placement(snap, seed, impl):
    """run_iterations reuses the post-processing of an earlier pass that placed every job
    alike: every pass's result must still be post_process of its own placement (moved flags
    and free GPUs derived from it), whether it repeated an earlier pass or not."""
    import numpy as np

    from andreas.policies.budget import NO_DEADLINE
    from andreas.policies.search import passes

    ctx = PlanningContext(snap)
    k = ctx.packed
    policy = make_policy("andreas", seed=seed, max_iterations=40, impl=impl)
    starts = np.array([ordered(ctx, "pressure")], np.int64)
    pre_node, pre_cand, post_node, post_cand, post_moved, scores = policy._passes(
        ctx, starts, policy.draws(ctx, 40), NO_DEADLINE)
    for it in range(len(scores)):
        node, cand = pre_node[it].copy(), pre_cand[it].copy()
        placed = node >= 0
        moved = placed & k.cmov[np.arange(len(node)), np.maximum(cand, 0)] & (node != k.home)
        free = np.array(ctx.node_cap, np.int64)
        np.subtract.at(free, node[placed], k.cg[np.flatnonzero(placed), cand[placed]])
        r = passes.PassResult(node, cand, moved, free)
        score = passes.post_process(ctx, r, "lookahead", impl)
        assert (score, r.node.tolist(), r.cand.tolist(), r.moved.tolist()) == (
            scores[it], post_node[it].tolist(), post_cand[it].tolist(), post_moved[it].tolist())


@pytest.mark.parametrize("name", ["greedy", "andreas"])
def test_a_new_job_takes_a_node_with_room_rather_than_a_running_jobs_gpus(name):
    # n0 (2 GPUs) runs r on both; w, due sooner, arrives wanting 2 GPUs. Placed first, w took
    # the best fit, n0, whose GPUs count as free until r is placed, and r moved to n1: a
    # 300 s restart for nothing (the zoo's hold-out family h-dear-restart moved jobs about
    # twice per decision so). Now w goes where no running job holds the GPUs, r stays.
    cl = cluster([("n0", "A", 2), ("n1", "A", 4)], {"A": [100, 200, 300, 400]},
                 overhead=300.0)
    profiles = {"p": {("A", 2): 10.0}}
    r = job("r", due=5000.0, epochs=100.0, weight=1.0)
    w = job("w", due=400.0, epochs=10.0, weight=1.0)
    snap = snapshot(scenario(cl, profiles, [r, w]), running={"r": ("n0", 2)},
                    remaining={"r": 80.0})
    plan = make_policy(name, seed=1, steps="").decide(snap)
    assert plan["r"] == Assignment("n0", 2)
    assert plan["w"] == Assignment("n1", 2)


@settings(max_examples=60, deadline=None)
@given(snapshots(), st.data())
def test_the_pressure_order_is_the_sort_by_its_definition(snap, data):
    """orderings.pressure sorts in numpy: the order of the plain sort by (-pressure, submit
    time), ties kept in the given order, on any subset of the jobs in any order."""
    from andreas.policies.search.orderings import pressure

    ctx = PlanningContext(snap)
    jobs = data.draw(st.permutations(range(len(ctx.job_ids))))
    jobs = jobs[: data.draw(st.integers(0, len(jobs)))]

    def p(j):
        x = ctx.now + ctx.tmin[j] - ctx.due[j]
        return x * ctx.weight[j] if x > 0 else x

    assert pressure(ctx, list(jobs)) == sorted(
        jobs, key=lambda j: (-p(j), ctx.views[j].job.submit_time))


def test_a_job_view_is_a_frozen_dataclass_with_its_own_fast_init():
    import dataclasses
    import pickle

    from andreas.policies.base import JobView

    j = job("a")
    view = JobView(j, 3.0, Assignment("n1", 2), True, 0.5)
    assert [f.name for f in dataclasses.fields(JobView)] == [
        "job", "remaining_epochs", "assignment", "started", "restart_remaining_s"]
    assert (view.job, view.remaining_epochs, view.assignment, view.started,
            view.restart_remaining_s) == (j, 3.0, Assignment("n1", 2), True, 0.5)
    assert JobView(j, 3.0) == JobView(j, 3.0, None, False, 0.0) != view
    assert dataclasses.replace(view, started=False).started is False
    assert pickle.loads(pickle.dumps(view)) == view and hash(view) == hash(
        JobView(j, 3.0, Assignment("n1", 2), True, 0.5))
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.remaining_epochs = 1.0  # type: ignore[misc]


@settings(max_examples=20, deadline=None)
@given(snapshots(), st.sampled_from(["andreas", "andreas-paper", "greedy", "edf"]))
def test_a_decision_leaves_no_cyclic_garbage(snap, name):
    """A decision's objects (context, candidate table, kernel arrays, plans) are freed by
    reference counting when it returns: cyclic garbage would wait for the collector, whose
    passes inside a long replay walk everything the decisions left (collector.py)."""
    import gc

    policy = make_policy(name, seed=1)
    policy.decide(snap)  # first calls may create lasting objects (imports, compiled kernels)
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(3):
            policy.decide(snap)
        assert gc.collect() == 0
    finally:
        if was:
            gc.enable()


@settings(max_examples=40, deadline=None)
@given(roomy_snapshots(), st.integers(1, 1000), st.sampled_from([1, 2, 3]))
def test_the_passes_on_threads_give_the_same_plans(snap, seed, threads):
    """run_iterations_parallel spreads a decision's passes over numba's threads: the same
    placements, post-processed plans and scores as the passes in turn, and the same
    decision."""
    import numpy as np

    from andreas.policies.budget import NO_DEADLINE
    from andreas.policies.search import passes

    ctx = PlanningContext(snap)
    one = make_policy("andreas", seed=seed, max_iterations=40)
    many = make_policy("andreas", seed=seed, max_iterations=40, threads=threads)
    assert passes.compiled_passes("fast", threads) is (
        passes.kernel.run_iterations_parallel if threads > 1 else passes.kernel.run_iterations)
    starts = np.array([ordered(ctx, "pressure"), ordered(ctx, "atc")], np.int64)
    draws = one.draws(ctx, 40)
    for a, b in zip(one._passes(ctx, starts, draws, NO_DEADLINE),
                    many._passes(ctx, starts, draws, NO_DEADLINE)):
        assert np.array_equal(a, b)
    assert one.decide(snap) == many.decide(snap)
