"""Hold a job back for company: rather than power a node for it alone, it waits while its
slack allows, in case a job arrives to share its node.

A node draws its base power whenever any of its GPUs is busy (360 W of the TESLA node's 530 W
with one busy GPU), so two jobs that overlap on one node cost much less than the same two runs
apart. A job the plan would run alone on a node (starting, moving, or staying where it runs)
waits until the latest time it can start and still keep `share` x its run time of slack. If
no job arrives to share its node, it starts then, at the same energy. This is a bet on
arrivals that costs GPU time, so it is only made while the offered load is below `max_load`
(0.5), and it is checked played forward (forward_check.py).

Only for plans that place every job (or leave jobs waiting for GPUs of a powered node: the
`wait` step, wait.py), and never on nodes that stay powered when idle (`idle_w` > 0). The plan
asks to be revisited (`Decision.revisit_at`) when the first held job should start. The offered
load (the work arriving per second, per GPU) comes from the arrivals the policy has seen
(`ArrivalLog`); with fewer than two it is unknown, and nothing is held.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import ClassVar

from ..base import Plan, Snapshot
from ..decision import Decision, Reason
from ..options import at_least, option
from .registry import StepContext, register_step

DEFAULT_SHARE = 0.1  # slack kept at the latest start, as a share of the planned run time
DEFAULT_MAX_LOAD = 0.5  # hold for company only while the offered load is below this


def hold_for_company(snapshot: Snapshot, plan: Plan, *, share: float = DEFAULT_SHARE,
                     load: float = 0.0, max_load: float = DEFAULT_MAX_LOAD,
                     awaited: Collection[str] = ()) -> Decision:
    """`plan` less the jobs it would run alone on a node while they have more than `share` ×
    their run time of slack (a running job is paused), revisited when the first must start.
    For a plan that places every job; jobs it leaves out were held by the caller, some of them
    waiting to join the `awaited` nodes, whose jobs have company coming and are not held."""
    if not load < max_load:
        return Decision.of(plan)
    per_node: dict[str, int] = {}
    for a in plan.values():
        per_node[a.node] = per_node.get(a.node, 0) + 1
    node_type = {n.name: n.gpu_type for n in snapshot.cluster.nodes}
    gpu_types = snapshot.cluster.gpu_types
    out = dict(plan)
    wake = math.inf
    reasons: dict[str, Reason] = {}
    for view in snapshot.jobs:
        a = plan.get(view.job_id)
        if a is None or per_node[a.node] > 1 or a.node in awaited:
            continue  # held already, or it has company (now or coming)
        if gpu_types[node_type[a.node]].idle_w > 0:
            continue  # its node stays powered anyway: company would save little
        latest = view.job.due_date - (1.0 + share) * snapshot.start_run_s(
            view, node_type[a.node], a)
        if latest > snapshot.time + 1.0:  # at least a second ahead: no busy loop of revisits
            del out[view.job_id]
            reasons[view.job_id] = Reason("held_for_company", until=latest)
            wake = min(wake, latest)
    return Decision.of(plan).replaced(out, revisit_at=wake if wake < math.inf else None,
                                      reasons=reasons)


def all_placed_or_waiting(snapshot: Snapshot, decision: Decision) -> bool:
    """Every job runs, or waits for GPUs of a powered node (the holds' precondition: a plan
    that leaves a job out for lack of GPUs, or that consolidation changed, is not held)."""
    return all(v.job_id in decision or (v.job_id in decision.reasons and
                                        decision.reasons[v.job_id].kind == "waiting_for_gpus")
               for v in snapshot.jobs)


@register_step("company")
@dataclass(frozen=True)
class HoldForCompany:
    """Step: a job the plan would run alone on a node waits, until its latest start, for a
    later arrival to share the node (`hold_for_company`), below `max_load`."""

    share: float
    max_load: float
    name: ClassVar[str] = "company"

    @dataclass(frozen=True)
    class Options:
        share: float | None = option(
            DEFAULT_SHARE, "slack a held job keeps at its latest start, as a share of its run "
            "time; off: the step is off")
        max_load: float = option(DEFAULT_MAX_LOAD, "hold for company only below this offered "
                                 "load")

        def __post_init__(self) -> None:
            at_least("company.share", self.share, 0.0, off=True)
            at_least("company.max_load", self.max_load, 0.0)

    @classmethod
    def configure(cls, options: Options) -> "HoldForCompany | None":
        return None if options.share is None else cls(options.share, options.max_load)

    def apply(self, snapshot: Snapshot, decision: Decision, ctx: StepContext) -> Decision:
        if snapshot.cluster.tariff is not None or not all_placed_or_waiting(snapshot, decision):
            return decision
        return hold_for_company(snapshot, decision, share=self.share, load=ctx.load,
                                max_load=self.max_load, awaited=ctx.awaited)
