"""The plan representation of the search (policies/placement.py), by hand."""

import numpy as np
from helpers import cluster, job, placement, scenario, snapshot

from andreas.policies.base import Assignment
from andreas.policies.search.placement import Placement
from andreas.policies.search.planning import PlanningContext


def context():
    # two 2-GPU nodes, a 60 s restart; 10 epochs: 10 s each on 1 GPU, 6 s on 2. a runs on n1
    # with 1 GPU (due 1000); b waits (due 50: even 2 GPUs, 60 s, end late)
    sc = scenario(cluster([("n1", "G", 2), ("n2", "G", 2)], {"G": [100, 150]}, overhead=60.0),
                  {"p": {("G", 1): 10.0, ("G", 2): 6.0}},
                  [job("a", due=1000.0), job("b", due=50.0)])
    ctx = PlanningContext(snapshot(sc, running={"a": ("n1", 1)}))
    return ctx, ctx.job_ids.index("a"), ctx.job_ids.index("b")


def test_a_job_moved_in_its_own_configuration_pays_a_restart_and_only_then():
    ctx, a, b = context()
    stays = placement(ctx, {a: (0, 1)})
    moves = placement(ctx, {a: (1, 1)})
    grows = placement(ctx, {a: (1, 2)})
    assert (stays.moved[a], moves.moved[a], grows.moved[a]) == (False, True, False)
    # 100 s where it runs; moved: a whole restart more; 2 GPUs: 60 s + the restart (the
    # table's time for another configuration includes it)
    assert (stays.time_of(ctx, a), moves.time_of(ctx, a), grows.time_of(ctx, a)) == \
        (100.0, 160.0, 120.0)
    assert moves.times(ctx)[b] == 0.0 and not moves.runs(b)


def test_free_busy_late_and_the_plan_of_a_placement():
    ctx, a, b = context()
    placed = placement(ctx, {a: (1, 1), b: (0, 2)})
    assert placed.busy(ctx).tolist() == [2, 1] and placed.free(ctx).tolist() == [0, 1]
    assert (placed.gpus(ctx)[a], placed.gpus(ctx)[b]) == (1, 2)
    assert placed.late(ctx)[[a, b]].tolist() == [False, True]
    # a waiting job is late when even its fastest configuration, started now, is
    assert placement(ctx, {a: (0, 1)}).late(ctx)[b]
    assert placed.to_plan(ctx) == {"a": Assignment("n2", 1), "b": Assignment("n1", 2)}
    assert Placement.waiting(2).to_plan(ctx) == {}


def test_moves_make_new_placements_and_name_what_changed():
    ctx, a, b = context()
    start = placement(ctx, {a: (0, 1)})
    before = (start.node.copy(), start.cand.copy(), start.moved.copy())
    col = int(placement(ctx, {b: (1, 2)}).cand[b])
    after = start.moved_to(ctx, {a: None, b: (1, col)})
    for kept, now in zip(before, (start.node, start.cand, start.moved)):
        assert np.array_equal(kept, now)  # the start is unchanged
    assert start.changed(after) == sorted([a, b]) and after.changed(after) == []
    assert after == placement(ctx, {b: (1, 2)}) and after != start
