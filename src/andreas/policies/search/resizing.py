"""Resizing a chosen plan: other GPU counts for its jobs, or a node repacked.

A greedy pass sizes each job as it places it, before the jobs after it are placed. The first
job on an empty TESLA node takes 2 GPUs (700 W for a run 29 % shorter beats 530 W alone), so
a later job goes to the slow TURING node (400 W for a run 2.6 × as long); and two jobs on two
GPUs each (1040 W for 9,780 s) cost more than both on one (700 W for 13,780 s), which no
single resize reaches. The moves here are:

- a running job takes another GPU count on its node (`resizes`);
- a node is repacked (`repack`): its jobs on their fewest GPUs that meet their due dates, the
  GPUs this frees taken, in pressure order, by jobs waiting or on other nodes.

They save energy by spending slack, and a look-ahead that does not know future arrivals
cannot price that: near or above full load they cost more than they saved (measured in
docs/overload-and-search.md). So the policies resize only plans that leave no job waiting, while
the offered load is below `GreedyParams.resize_max_load`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np

from .orderings import ordered
from .placement import Placement
from .planning import PlanningContext

Move = tuple[Placement, list[int]]  # a neighbour plan, and the jobs whose entry it changed
RESIZE_EVALUATIONS = 200  # plans looked at per decision when `andreas` resizes its plan
RESIZE_JOB_SCORES = 20_000  # ... and at most this many jobs scored over those plans


def evaluation_budget(jobs: int, pass_budget: int = 0) -> int:
    """Plans to look at when resizing a plan of `jobs` jobs: each costs O(jobs), so long queues
    (a trace replay) get fewer, and with a pass budget (job placements per decision) no more
    than that budget's worth."""
    budget = min(RESIZE_EVALUATIONS, RESIZE_JOB_SCORES // max(1, jobs))
    if pass_budget:
        budget = min(budget, pass_budget // max(1, jobs))
    return max(1, budget)


def resized(ctx: PlanningContext, placed: Placement) -> Iterator[Move]:
    """Every plan one resize or one repack away from `placed`: none if a job waits."""
    if (placed.node < 0).any():
        return
    free = placed.free(ctx)
    for j in range(len(placed)):
        yield from resizes(ctx, placed, j, free)
    for node in sorted(set(placed.node.tolist())):
        move = repack(ctx, placed, node)
        if move is not None:
            yield move


def resizes(ctx: PlanningContext, placed: Placement, j: int,
            free: np.ndarray) -> Iterator[Move]:
    """Plans in which job j runs on its node with another number of GPUs that fits (`free`:
    the free GPUs per node under `placed`)."""
    types, counts, _ = ctx.rows
    kinds, gpus = types[j], counts[j]
    node, cur = int(placed.node[j]), int(placed.cand[j])
    room = free[node] + gpus[cur]
    for c in range(len(kinds)):
        if kinds[c] == kinds[cur] and gpus[c] != gpus[cur] and gpus[c] <= room:
            yield placed.moved_to(ctx, {j: (node, c)}), [j]


def fewest_on_time(ctx: PlanningContext, j: int, node: int, room: int) -> int:
    """Job j's candidate column of the node's GPU type with the fewest GPUs (the first in its
    row on a tie) within `room` that meets its due date; -1 if none."""
    types, counts, meets = ctx.rows
    kinds, gpus, on_time = types[j], counts[j], meets[j]
    kind, best = ctx.node_type[node], -1
    for c in range(len(kinds)):
        if kinds[c] == kind and gpus[c] <= room and on_time[c] and (
                best < 0 or gpus[c] < gpus[best]):
            best = c
    return best


def repack(ctx: PlanningContext, placed: Placement, node: int) -> Move | None:
    """The plan with every job on `node` on its fewest GPUs that meet its due date (a late job
    keeps its GPUs), and the GPUs this frees taken, in pressure order, by jobs waiting or on
    other nodes (each on its fewest GPUs on time that fit), and the jobs it changed; None if
    nothing changes."""
    k = ctx.packed
    changes: dict[int, tuple[int, int]] = {}
    room = int(k.node_cap[node])
    for j in map(int, (placed.node == node).nonzero()[0]):
        gpus = k.cg[j, placed.cand[j]]
        c = fewest_on_time(ctx, j, node, gpus)
        if c >= 0 and k.cg[j, c] < gpus:
            changes[j] = (node, c)
            gpus = k.cg[j, c]
        room -= gpus
    for j in ordered(ctx, "pressure"):
        if room == 0:
            break
        if placed.node[j] == node:
            continue
        c = fewest_on_time(ctx, j, node, room)
        if c >= 0:
            changes[j] = (node, c)
            room -= k.cg[j, c]
    if not changes:
        return None
    plan = placed.moved_to(ctx, changes)
    return plan, placed.changed(plan)


def climb(placed: Placement, cost: float, neighbours: Callable[[Placement], Iterable[Move]],
          admits: Callable[[Placement, list[int]], bool], score: Callable[[Placement], float],
          budget: Callable[[], bool]) -> tuple[Placement, float]:
    """First-improvement hill climbing from `placed` (of `cost`) among the neighbours that
    `admits` lets it take (asked first, once per neighbour, with the jobs its move changed;
    `score` only for those), while `budget()` allows another neighbour (asked after each one,
    admitted or not)."""
    improved = True
    while improved and budget():
        improved = False
        for plan, changed in neighbours(placed):
            if admits(plan, changed):
                c = score(plan)
                if c < cost - 1e-12:
                    placed, cost, improved = plan, c, True
                    break
            if not budget():
                break
    return placed, cost
