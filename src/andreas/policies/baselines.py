"""First-principle baselines: FIFO, EDF and priority scheduling (PS) from the paper, and the
classic weighted-tardiness rules WSPT and ATC.

One engine, five orderings. Running jobs are never preempted; waiting jobs, in order, get the
cheapest configuration that meets their due date (else the fastest), placed best-fit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from .base import Assignment, Plan, Snapshot
from .registry import register
from .search.orderings import ORDERINGS, Ordering
from .search.passes import greedy_pass
from .search.planning import PlanningContext


@dataclass
class OrderedNonPreemptive:
    name: str
    order: Ordering
    preempts: ClassVar[bool] = False  # running jobs are kept: drivers may leave them out

    def decide(self, snapshot: Snapshot) -> Plan:
        plan: dict[str, Assignment] = {}
        busy: dict[str, int] = {}
        waiting = []
        for view in snapshot.jobs:
            a = view.assignment
            if a is None:
                waiting.append(view)
            else:  # never preempted: kept as it runs
                plan[view.job_id] = a
                busy[a.node] = busy.get(a.node, 0) + a.gpus
        if not waiting:
            return plan
        # only the waiting jobs are planned: a long-running cluster's running jobs cost nothing
        ctx = PlanningContext(replace(snapshot, jobs=tuple(waiting)))
        free = [n.gpus - busy.get(n.name, 0) for n in snapshot.cluster.nodes]
        jobs = list(range(len(waiting)))
        result = greedy_pass(ctx, self.order(ctx, jobs), free=free)
        for j in jobs:
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
