"""Time-varying prices: leave a job waiting for cheaper hours when its due date allows.

With an hourly tariff the cheapest configuration is not the whole story: the same run costs
more at the evening peak than at night, and nothing at a negative price. After a policy has
planned, `defer_for_cheaper_hours` looks at each job it would *start* now and compares its
energy cost now with its cost if started at a later price change, no later than its latest
start with a safety margin. If waiting saves more than `margin` of the cost, the job waits;
the simulator wakes the policy at every price change while jobs wait, so it starts when the
cheap hours come. Running jobs are not paused for prices (a restart has a cost of its own).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..base import Plan, Snapshot
from ..decision import Decision, Reason
from .registry import StepContext, register_step

DEFAULT_MARGIN = 0.10  # defer only for savings above 10 % of the job's energy cost now
DEFAULT_SLACK = 0.25  # keep a quarter of the run time as a buffer before the latest start


def defer_for_cheaper_hours(snapshot: Snapshot, plan: Plan, *, margin: float = DEFAULT_MARGIN,
                            slack: float = DEFAULT_SLACK) -> Decision:
    """`plan` less the jobs it would start now that cost less than `margin` less at a later
    price change before their latest start, each with the time of its cheapest start."""
    cluster = snapshot.cluster
    tariff = cluster.tariff
    out = dict(plan)
    reasons: dict[str, Reason] = {}
    if tariff is None:
        return Decision.of(plan)
    now = snapshot.time
    views = {v.job_id: v for v in snapshot.jobs}
    node_type = {n.name: n.gpu_type for n in cluster.nodes}
    for job_id, a in plan.items():
        view = views[job_id]
        if view.assignment is not None:
            continue
        gpu_type = node_type[a.node]
        run_s = snapshot.start_run_s(view, gpu_type, a)
        latest = view.job.due_date - run_s * (1.0 + slack)
        if latest <= now:
            continue
        watts = cluster.gpu_types[gpu_type].extra_w(a.gpus)
        cost_now = cluster.energy_eur(watts, now, now + run_s)
        starts = list(tariff.changes(now, latest))
        later = [cluster.energy_eur(watts, s, s + run_s) for s in starts]
        if later and cost_now - min(later) > margin * abs(cost_now):
            del out[job_id]
            reasons[job_id] = Reason("deferred", until=starts[later.index(min(later))])
    return Decision.of(plan).replaced(out, reasons=reasons)


@register_step("defer")
@dataclass(frozen=True)
class DeferForCheaperHours:
    """Step: with a time-varying price, a job with slack waits for cheaper hours."""

    name: ClassVar[str] = "defer"

    def apply(self, snapshot: Snapshot, decision: Decision, ctx: StepContext) -> Decision:
        if snapshot.cluster.tariff is None:
            return decision
        return defer_for_cheaper_hours(snapshot, decision)
