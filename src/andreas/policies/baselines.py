"""The paper's first-principle baselines: FIFO, EDF and priority scheduling (PS).

One engine, three orderings. Running jobs are never preempted; waiting jobs, in order, get the
cheapest configuration that meets their due date (else the fastest), placed best-fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .base import Assignment, JobView, Plan, Snapshot, register
from .planning import PlanningContext

OrderKey = Callable[[JobView], tuple]


@dataclass
class OrderedNonPreemptive:
    name: str
    key: OrderKey

    def decide(self, snapshot: Snapshot) -> Plan:
        ctx = PlanningContext(snapshot)
        free = list(ctx.node_cap)
        plan = {}
        for j, current in enumerate(ctx.current):
            if current is not None:
                free[current[0]] -= current[1]
                plan[ctx.job_ids[j]] = ctx.views[j].assignment
        waiting = [j for j, v in enumerate(ctx.views) if v.assignment is None]
        waiting.sort(key=lambda j: self.key(ctx.views[j]))
        for j in waiting:
            placed = ctx.place(j, free)
            if placed is not None:
                node, cand = placed
                plan[ctx.job_ids[j]] = Assignment(ctx.node_names[node], cand.gpus)
        return plan


def _submit(v: JobView) -> tuple:
    return (v.job.submit_time,)


def _due(v: JobView) -> tuple:
    return (v.job.due_date, v.job.submit_time)


def _weight(v: JobView) -> tuple:
    return (-v.job.tardiness_weight, v.job.submit_time)


@register("fifo", randomized=False, summary="first in, first out; never preempts")
def fifo(**_: object) -> OrderedNonPreemptive:
    return OrderedNonPreemptive("fifo", _submit)


@register("edf", randomized=False, summary="earliest due date first; never preempts")
def edf(**_: object) -> OrderedNonPreemptive:
    return OrderedNonPreemptive("edf", _due)


@register("ps", randomized=False, summary="priority: highest tardiness weight first; never preempts")
def ps(**_: object) -> OrderedNonPreemptive:
    return OrderedNonPreemptive("ps", _weight)
