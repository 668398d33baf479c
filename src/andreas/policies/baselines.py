"""First-principle baselines: FIFO, EDF and priority scheduling (PS) from the paper, and the
classic weighted-tardiness rules WSPT and ATC.

One engine, five orderings. Running jobs are never preempted; waiting jobs, in order, get the
cheapest configuration that meets their due date (else the fastest), placed best-fit.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Assignment, Plan, Snapshot, register
from .orderings import ORDERINGS, Ordering
from .passes import greedy_pass
from .planning import PlanningContext


@dataclass
class OrderedNonPreemptive:
    name: str
    order: Ordering

    def decide(self, snapshot: Snapshot) -> Plan:
        ctx = PlanningContext(snapshot)
        free = list(ctx.node_cap)
        plan: dict[str, Assignment] = {}
        for j, (view, current) in enumerate(zip(ctx.views, ctx.current)):
            if view.assignment is not None and current is not None:
                free[current[0]] -= current[1]
                plan[ctx.job_ids[j]] = view.assignment
        waiting = [j for j, v in enumerate(ctx.views) if v.assignment is None]
        if not waiting:
            return plan
        result = greedy_pass(ctx, self.order(ctx, waiting), free=free)
        for j in waiting:
            if result.node[j] >= 0:
                plan[ctx.job_ids[j]] = Assignment(ctx.node_names[result.node[j]],
                                                  int(ctx.table.cg[j, result.cand[j]]))
        return plan


def _register(name: str, summary: str) -> None:
    register(name, randomized=False, summary=summary)(
        lambda **_: OrderedNonPreemptive(name, ORDERINGS[name]))


_register("fifo", "first in, first out; never preempts")
_register("edf", "earliest due date first; never preempts")
_register("ps", "priority: highest tardiness weight first; never preempts")
_register("wspt", "weighted shortest processing time (weight / fastest remaining time) first; "
          "never preempts")
_register("atc", "apparent tardiness cost rule (K = 2) first; never preempts")
