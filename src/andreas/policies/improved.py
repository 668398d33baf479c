"""`andreas-ls` and `andreas-pr`: the Randomized Greedy followed by local search (swap moves)
on its best plans, and by path relinking between them (search/local_search.py), then the same
plan steps as `andreas`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .arrivals import ArrivalLog
from .base import Plan, Snapshot
from .budget import NO_DEADLINE, Deadline
from .greedy import (
    GreedyParams,
    RandomizedGreedy,
    andreas_params,
    andreas_specs,
    more_options,
    spends_needed_slack,
)
from .registry import register
from .search.local_search import LocalSearch
from .search.placement import Placement
from .search.planning import PlanningContext


@dataclass
class ImprovedGreedy:
    """The Randomized Greedy followed by local search (and path relinking)."""

    name: str
    params: GreedyParams
    relinking: bool = False
    starts: int = 3  # elite plans the local search starts from
    max_evaluations: int = 3000
    arrivals: ArrivalLog = field(default_factory=ArrivalLog)  # for hold_for_company's load
    greedy: RandomizedGreedy = field(init=False)  # its search and its steps

    def __post_init__(self) -> None:
        self.greedy = RandomizedGreedy(self.name, self.params, self.arrivals)

    def best(self, ctx: PlanningContext, resizing: bool = True,
             deadline: Deadline = NO_DEADLINE) -> tuple[Placement, float]:
        found = self.greedy.search(ctx, deadline=deadline)
        elite = found.elite
        plans = [(e.placement, e.score) for e in elite]
        guard = self.params.choice.slack_guard
        if guard is None:
            admissible: Callable[[Placement], bool] = lambda placed: True
        else:  # as `andreas`: only plans that take from no job what the deterministic pass
            first, first_cost = found.first.placement, found.first.score  # gives it
            admissible = lambda placed: not spends_needed_slack(ctx, first, placed, guard)
            plans = sorted([(first, first_cost)] + [(p, c) for p, c in plans
                                                    if p != first and admissible(p)],
                           key=lambda pc: pc[1])
        search = LocalSearch(ctx, self.params.search.score, self.max_evaluations, admissible,
                             resizing, deadline)
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
        deadline = Deadline.after_ms(self.params.effort.decision_budget_ms)
        ctx = PlanningContext(snapshot, self.params.choice.plan_restart_s)
        resizing = self.arrivals.offered_load(snapshot) < self.params.choice.resize_max_load
        placed = self.best(ctx, resizing, deadline)[0]
        return self.greedy.refine(snapshot, ctx, placed, deadline)


@register("andreas-ls", randomized=True, options=andreas_specs(),
          more_options=more_options,
          summary="andreas, then local search (swap moves) on its best plans")
def andreas_ls(**params: Any) -> ImprovedGreedy:
    return ImprovedGreedy("andreas-ls", andreas_params(**params))


@register("andreas-pr", randomized=True, options=andreas_specs(),
          more_options=more_options,
          summary="andreas, then path relinking between its elite plans and local search")
def andreas_pr(**params: Any) -> ImprovedGreedy:
    return ImprovedGreedy("andreas-pr", andreas_params(**params), relinking=True)
