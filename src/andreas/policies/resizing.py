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
docs/beyond-the-paper.md). So the policies resize only plans that leave no job waiting, while
the offered load is below `GreedyParams.resize_max_load`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

from .planning import Candidate, PlanningContext

Placed = list[tuple[int, Candidate] | None]
Move = tuple[Placed, list[int]]  # a neighbour plan, and the jobs whose entry it changed
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


def resized(ctx: PlanningContext, placed: Placed) -> Iterator[Move]:
    """Every plan one resize or one repack away from `placed`: none if a job waits."""
    if any(e is None for e in placed):
        return
    free = ctx.free_after(placed)
    for j in range(len(placed)):
        yield from resizes(ctx, placed, j, free)
    for node in sorted({e[0] for e in placed if e is not None}):
        move = repack(ctx, placed, node)
        if move is not None:
            yield move


def resizes(ctx: PlanningContext, placed: Placed, j: int, free: list[int]) -> Iterator[Move]:
    """Plans in which job j runs on its node with another number of GPUs that fits (`free`:
    the free GPUs per node under `placed`)."""
    node, cur = placed[j]
    room = free[node] + cur.gpus
    table = ctx.table  # filtered on its plain lists: a Candidate is made only of a match
    types, counts = table.shape(j)
    for c in range(len(types)):
        if types[c] == cur.gpu_type and counts[c] != cur.gpus and counts[c] <= room:
            plan = list(placed)
            plan[j] = (node, ctx.as_placed(j, node, table.candidate(j, c)))
            yield plan, [j]


def repack(ctx: PlanningContext, placed: Placed, node: int) -> Move | None:
    """The plan with every job on `node` on its fewest GPUs that meet its due date (a late job
    keeps its GPUs), and the GPUs this frees taken, in pressure order, by jobs waiting or on
    other nodes (each on its fewest GPUs on time that fit), and the jobs it changed; None if
    nothing changes."""
    kind = ctx.node_type[node]
    plan = list(placed)

    def fewest(j: int, room: int) -> Candidate | None:
        return min((c for c in ctx.cands[j]
                    if c.gpu_type == kind and c.gpus <= room and c.meets_due),
                   key=lambda c: c.gpus, default=None)

    room = ctx.node_cap[node]
    for j, e in enumerate(placed):
        if e is not None and e[0] == node:
            cand = fewest(j, e[1].gpus)
            if cand is not None and cand.gpus < e[1].gpus:
                plan[j] = e = (node, ctx.as_placed(j, node, cand))
            room -= e[1].gpus
    for j in ctx.ordered("pressure"):
        if room == 0:
            break
        if plan[j] is not None and plan[j][0] == node:
            continue
        cand = fewest(j, room)
        if cand is not None:
            plan[j] = (node, ctx.as_placed(j, node, cand))
            room -= cand.gpus
    if plan == placed:
        return None
    return plan, [j for j, (a, b) in enumerate(zip(plan, placed)) if a is not b]


class Judge(Protocol):
    """What a hill climb asks of the plans it meets."""

    def moved(self, placed: Placed) -> None:
        """The climb now stands on `placed` (its neighbours are one move from it)."""

    def admits(self, plan: Placed, changed: list[int]) -> bool:
        """Whether the climb may take `plan`, in which the jobs `changed` differ from where the
        climb stands (asked first, once per neighbour)."""

    def score(self, plan: Placed, changed: list[int]) -> float:
        """`plan`'s cost (asked only for an admitted plan)."""


@dataclass(frozen=True)
class WholePlans:
    """A judge that tests and scores every plan whole (the local searches' moves change
    several jobs at once)."""

    test: Callable[[Placed], bool]
    cost: Callable[[Placed], float]

    def moved(self, placed: Placed) -> None:
        pass

    def admits(self, plan: Placed, changed: list[int]) -> bool:
        return self.test(plan)

    def score(self, plan: Placed, changed: list[int]) -> float:
        return self.cost(plan)


def climb(placed: Placed, cost: float, neighbours: Callable[[Placed], Iterable[Move]],
          judge: Judge, budget: Callable[[], bool]) -> tuple[Placed, float]:
    """First-improvement hill climbing from `placed` (of `cost`) among the neighbours the
    judge admits, while `budget()` allows another neighbour (asked after each one, admitted
    or not)."""
    judge.moved(placed)
    improved = True
    while improved and budget():
        improved = False
        for plan, changed in neighbours(placed):
            if judge.admits(plan, changed):
                c = judge.score(plan, changed)
                if c < cost - 1e-12:
                    placed, cost, improved = plan, c, True
                    judge.moved(placed)
                    break
            if not budget():
                break
    return placed, cost
