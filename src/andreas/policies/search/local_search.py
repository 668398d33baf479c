"""Improving the Randomized Greedy's elite plans: local search and path relinking.

`andreas-ls` runs first-improvement hill climbing from the best elite plans with three swap
neighbourhoods, every candidate judged by the look-ahead cost:

1. a late job and an expensive job on different nodes exchange places (each takes a
   configuration of its own profile on the other's node, if it fits);
2. a late job takes the place of a running job with low pressure, which waits;
3. a waiting job with high pressure takes the place of a running job with lower pressure;

and, while no job waits and the offered load is below `resize_max_load`, the resize moves of
`resizing.py`:

4. a running job takes another GPU count on its node, or a node is repacked (its jobs on
   their fewest GPUs on time, jobs from other nodes in the GPUs freed).

`andreas-pr` adds path relinking: from each elite plan towards each other one, jobs take the
guiding plan's placement one at a time (jobs in the way wait), and the best plan on every path is
kept; the best plan overall is then improved by the local search.

Neither ever returns a plan worse than the best it started from. With the slack guard on (the
default), both start from, move through and return only plans the guard admits against the
deterministic pass, as `andreas` does (path relinking may walk through others on its way).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..budget import NO_DEADLINE, Deadline
from .orderings import pressure_ranks
from .placement import Placement
from .planning import PlanningContext
from .resizing import Move, climb, resized
from .scoring import SCORES


def fits_on(ctx: PlanningContext, j: int, node: int, room: int) -> int:
    """Job j's most preferred candidate column of the node's GPU type within `room` GPUs;
    -1 if none."""
    kinds, gpus = ctx.rows[0][j], ctx.rows[1][j]
    kind = ctx.node_type[node]
    for c in range(len(kinds)):
        if kinds[c] == kind and gpus[c] <= room:
            return c
    return -1


@dataclass
class LocalSearch:
    ctx: PlanningContext
    score: str = "lookahead"
    max_evaluations: int = 3000
    # plans the search may return (the slack guard's test against the deterministic pass)
    admissible: Callable[[Placement], bool] = field(default=lambda placed: True)
    resizing: bool = True  # neighbourhood 4 (ImprovedGreedy: offered load below the limit)
    deadline: Deadline = NO_DEADLINE  # the decision's time budget
    evaluations: int = field(default=0, init=False)
    rank: list[int] = field(init=False)  # each job's pressure rank, read job by job

    def __post_init__(self) -> None:
        self.rank = pressure_ranks(self.ctx).tolist()

    def budget_left(self) -> bool:
        return self.evaluations < self.max_evaluations and not self.deadline.passed()

    def cost(self, placed: Placement) -> float:
        self.evaluations += 1
        return SCORES[self.score](self.ctx, placed)

    def late(self, placed: Placement) -> list[int]:
        """The placed jobs that end after their due dates."""
        return np.flatnonzero(placed.late(self.ctx) & (placed.node >= 0)).tolist()

    def neighbours(self, placed: Placement) -> Iterator[Move]:
        """Yield candidate plans (with the jobs each changed), most promising moves first."""
        ctx = self.ctx
        rank = self.rank
        runs = placed.node >= 0
        # the running jobs with the lowest pressure first, the waiting with the highest
        running = sorted(np.flatnonzero(runs).tolist(), key=lambda j: -rank[j])
        waiting = sorted(np.flatnonzero(~runs).tolist(), key=lambda j: rank[j])
        late = sorted(self.late(placed), key=lambda j: rank[j])
        expensive = sorted(running, key=lambda j: -placed.energy_of(ctx, j))
        for a in late:  # 1. late <-> expensive on another node
            for b in expensive:
                if a != b and placed.node[a] != placed.node[b]:
                    plan = self.exchange(placed, a, b)
                    if plan is not None:
                        yield plan, [a, b]
        for a in late + waiting:  # 2 and 3: take the place of a lower-pressure running job
            for b in running:
                if a != b and rank[b] > rank[a]:
                    plan = self.take_place(placed, a, b)
                    if plan is not None:
                        yield plan, [a, b]
        if self.resizing:  # 4. another GPU count, or a node repacked
            yield from resized(ctx, placed)

    def exchange(self, placed: Placement, a: int, b: int) -> Placement | None:
        ctx = self.ctx
        na, nb = int(placed.node[a]), int(placed.node[b])
        free, gpus = placed.free(ctx), placed.gpus(ctx)
        new_a = fits_on(ctx, a, nb, free[nb] + gpus[b])
        new_b = fits_on(ctx, b, na, free[na] + gpus[a])
        if new_a < 0 or new_b < 0:
            return None
        return placed.moved_to(ctx, {a: (nb, new_a), b: (na, new_b)})

    def take_place(self, placed: Placement, a: int, b: int) -> Placement | None:
        ctx = self.ctx
        nb = int(placed.node[b])
        free, gpus = placed.free(ctx), placed.gpus(ctx)
        room = free[nb] + gpus[b] + (gpus[a] if placed.node[a] == nb else 0)
        new_a = fits_on(ctx, a, nb, room)
        if new_a < 0:
            return None
        return placed.moved_to(ctx, {a: (nb, new_a), b: None})

    def improve(self, placed: Placement, cost: float | None = None) -> tuple[Placement, float]:
        """First-improvement hill climbing until no neighbour is cheaper or the budget ends."""
        return climb(placed, self.cost(placed) if cost is None else cost, self.neighbours,
                     lambda plan, _changed: self.admissible(plan), self.cost, self.budget_left)

    def relink(self, start: Placement, guide: Placement) -> tuple[Placement, float]:
        """Walk from `start` towards `guide`, one job at a time, keeping the best plan seen."""
        ctx, rank = self.ctx, self.rank
        current = start
        best, best_cost = start, self.cost(start)
        todo = start.changed(guide)
        while todo and self.budget_left():
            step_best = None
            for j in todo:
                node = int(guide.node[j])
                plan = current.moved_to(ctx, {j: None if node < 0 else (node, int(guide.cand[j]))})
                if node >= 0:  # make room: jobs in the way on that node wait
                    free, gpus = plan.free(ctx), plan.gpus(ctx)
                    in_the_way: dict[int, tuple[int, int] | None] = {}
                    for k in sorted((k for k in np.flatnonzero(plan.node == node).tolist()
                                     if k != j), key=lambda k: -rank[k]):
                        if free[node] >= 0:
                            break
                        free[node] += gpus[k]
                        in_the_way[k] = None
                    if in_the_way:
                        plan = plan.moved_to(ctx, in_the_way)
                c = self.cost(plan)
                if step_best is None or c < step_best[0]:
                    step_best = (c, j, plan)
            c, j, plan = step_best
            current = plan
            differs = set(current.changed(guide))
            todo = [k for k in todo if k != j and k in differs]
            if c < best_cost - 1e-12 and self.admissible(plan):
                best, best_cost = plan, c
        return best, best_cost
