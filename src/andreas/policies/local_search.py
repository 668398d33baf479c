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
from typing import Any, Callable

from .base import Plan, Snapshot, register
from .budget import NO_DEADLINE, Deadline
from .company import ArrivalLog
from .greedy import (
    GREEDY_OPTIONS,
    GreedyParams,
    RandomizedGreedy,
    leaves_late,
    refine,
    spends_needed_slack,
)
from .planning import Candidate, PlanningContext
from .resizing import Move, WholePlans, climb, resized
from .scoring import SCORES

Placed = list[tuple[int, Candidate] | None]


def _fit_on(ctx: PlanningContext, j: int, node: int, room: int) -> Candidate | None:
    """Job j's most preferred candidate that runs on `node` within `room` free GPUs."""
    for cand in ctx.cands[j]:
        if cand.gpu_type == ctx.node_type[node] and cand.gpus <= room:
            return ctx.as_placed(j, node, cand)
    return None


@dataclass
class LocalSearch:
    ctx: PlanningContext
    score: str = "lookahead"
    max_evaluations: int = 3000
    # plans the search may return (the slack guard's test against the deterministic pass)
    admissible: Callable[[Placed], bool] = field(default=lambda placed: True)
    resizing: bool = True  # neighbourhood 4 (ImprovedGreedy: offered load below the limit)
    deadline: Deadline = NO_DEADLINE  # the decision's time budget
    evaluations: int = field(default=0, init=False)

    def budget_left(self) -> bool:
        return self.evaluations < self.max_evaluations and not self.deadline.passed()

    def cost(self, placed: Placed) -> float:
        self.evaluations += 1
        return SCORES[self.score](self.ctx, placed)

    def late(self, placed: Placed) -> list[int]:
        ctx = self.ctx
        return [j for j, e in enumerate(placed)
                if e is not None and ctx.now + e[1].time_s > ctx.due[j]]

    def neighbours(self, placed: Placed) -> Iterator[Move]:
        """Yield candidate plans (with the jobs each changed), most promising moves first."""
        ctx = self.ctx
        rank = ctx.pressure_rank
        running = sorted((j for j, e in enumerate(placed) if e is not None),
                         key=lambda j: -rank[j])  # lowest pressure first
        waiting = sorted((j for j, e in enumerate(placed) if e is None), key=lambda j: rank[j])
        late = sorted(self.late(placed), key=lambda j: rank[j])
        expensive = sorted(running, key=lambda j: -placed[j][1].energy_eur)
        for a in late:  # 1. late <-> expensive on another node
            for b in expensive:
                if a != b and placed[a][0] != placed[b][0]:
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

    def exchange(self, placed: Placed, a: int, b: int) -> Placed | None:
        na, ca = placed[a]
        nb, cb = placed[b]
        free = self.ctx.free_after(placed)
        new_a = _fit_on(self.ctx, a, nb, free[nb] + cb.gpus)
        new_b = _fit_on(self.ctx, b, na, free[na] + ca.gpus)
        if new_a is None or new_b is None:
            return None
        plan = list(placed)
        plan[a], plan[b] = (nb, new_a), (na, new_b)
        return plan

    def take_place(self, placed: Placed, a: int, b: int) -> Placed | None:
        nb, cb = placed[b]
        free = self.ctx.free_after(placed)
        room = free[nb] + cb.gpus + (placed[a][1].gpus if placed[a] is not None
                                     and placed[a][0] == nb else 0)
        new_a = _fit_on(self.ctx, a, nb, room)
        if new_a is None:
            return None
        plan = list(placed)
        plan[a], plan[b] = (nb, new_a), None
        return plan

    def improve(self, placed: Placed, cost: float | None = None) -> tuple[Placed, float]:
        """First-improvement hill climbing until no neighbour is cheaper or the budget ends."""
        return climb(list(placed), self.cost(placed) if cost is None else cost,
                     self.neighbours, WholePlans(self.admissible, self.cost), self.budget_left)

    def relink(self, start: Placed, guide: Placed) -> tuple[Placed, float]:
        """Walk from `start` towards `guide`, one job at a time, keeping the best plan seen."""
        current = list(start)
        best, best_cost = list(start), self.cost(start)
        todo = [j for j in range(len(start)) if start[j] != guide[j]]
        while todo and self.budget_left():
            step_best = None
            for j in todo:
                plan = list(current)
                plan[j] = guide[j]
                if guide[j] is not None:  # make room: jobs in the way on that node wait
                    node = guide[j][0]
                    free = self.ctx.free_after(plan)
                    for k in sorted((k for k, e in enumerate(plan)
                                     if e is not None and e[0] == node and k != j),
                                    key=lambda k: -self.ctx.pressure_rank[k]):
                        if free[node] >= 0:
                            break
                        free[node] += plan[k][1].gpus
                        plan[k] = None
                c = self.cost(plan)
                if step_best is None or c < step_best[0]:
                    step_best = (c, j, plan)
            c, j, plan = step_best
            current = plan
            todo = [k for k in todo if k != j and current[k] != guide[k]]
            if c < best_cost - 1e-12 and self.admissible(plan):
                best, best_cost = list(plan), c
        return best, best_cost


@dataclass
class ImprovedGreedy:
    """The Randomized Greedy followed by local search (and path relinking)."""

    name: str
    params: GreedyParams
    relinking: bool = False
    starts: int = 3  # elite plans the local search starts from
    max_evaluations: int = 3000
    arrivals: ArrivalLog = field(default_factory=ArrivalLog)  # for hold_for_company's load

    def best(self, ctx: PlanningContext, resizing: bool = True,
             deadline: Deadline = NO_DEADLINE) -> tuple[Placed, float]:
        greedy = RandomizedGreedy(self.name, self.params)
        found = greedy.search(ctx, deadline=deadline)
        elite = found.elite
        plans = [(list(e.placed), e.score) for e in elite]
        guard = self.params.slack_guard
        if guard is None:
            admissible: Callable[[Placed], bool] = lambda placed: True
        else:  # as `andreas`: only plans that take from no job what the deterministic pass
            first, first_cost = list(found.first.placed), found.first.score  # gives it
            admissible = lambda placed: not spends_needed_slack(ctx, first, placed, guard)
            plans = sorted([(first, first_cost)] + [(p, c) for p, c in plans
                                                    if p != first and admissible(p)],
                           key=lambda pc: pc[1])
        search = LocalSearch(ctx, self.params.score, self.max_evaluations, admissible, resizing,
                             deadline)
        best, best_cost = plans[0]
        if self.relinking:
            for i, (a, _) in enumerate(plans):
                for b, _ in plans[i + 1:]:
                    for start, guide in ((a, b), (b, a)):
                        plan, cost = search.relink(start, guide)
                        if cost < best_cost - 1e-12:
                            best, best_cost = plan, cost
            candidates = [(best, best_cost)] + plans[: self.starts - 1]
        else:
            candidates = plans[: self.starts]
        for plan, cost in candidates:
            plan, cost = search.improve(plan, cost)
            if cost < best_cost - 1e-12:
                best, best_cost = plan, cost
        return best, best_cost

    def decide(self, snapshot: Snapshot) -> Plan:
        self.arrivals.observe(snapshot)
        if not snapshot.jobs:
            return {}
        deadline = Deadline.after_ms(self.params.decision_budget_ms)
        ctx = PlanningContext(snapshot, self.params.plan_restart_s)
        resizing = self.arrivals.offered_load(snapshot) < self.params.resize_max_load
        placed = self.best(ctx, resizing, deadline)[0]
        return refine(snapshot, ctx.to_plan(placed), self.params, self.arrivals, deadline,
                      late=leaves_late(ctx, placed))


@register("andreas-ls", randomized=True, options=GREEDY_OPTIONS,
          summary="andreas, then local search (swap moves) on its best plans")
def andreas_ls(**params: Any) -> ImprovedGreedy:
    return ImprovedGreedy("andreas-ls", GreedyParams(**params))


@register("andreas-pr", randomized=True, options=GREEDY_OPTIONS,
          summary="andreas, then path relinking between its elite plans and local search")
def andreas_pr(**params: Any) -> ImprovedGreedy:
    return ImprovedGreedy("andreas-pr", GreedyParams(**params), relinking=True)
