"""GPU power limits: run a job with slack below its GPUs' default limit when that costs less.

A capped GPU is slower but draws less (Zeus measured both, per model and limit). Whether that
saves energy depends on what else the job keeps powered: alone on a node it also keeps the host
(CPUs, fans, memory) on for longer, which usually costs more than the GPU saves; sharing a busy
node, it only adds its GPUs' draw, and a cap often pays. So the choice is made after a policy
has placed the jobs, from each job's marginal draw on its node in that plan.

The rule, per planned job whose profile lists power limits for its configuration:
- if the job would miss its due date at the default limit, it keeps the default (fastest);
- a lower limit is allowed only if the job still finishes `slack` of its capped run time before
  its due date, so a job that meets its due date at the default limit is not made late by the
  cap (the decision is revisited at every rescheduling point);
- no cap on a GPU type some job in the plan is left waiting for: a slower job would keep GPUs
  from it;
- among the allowed limits the one with the least energy cost over the run wins (the default
  on ties): marginal node draw minus the GPUs' saving, times the run time, priced over the run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from ..base import Plan, Snapshot
from ..decision import Decision
from .registry import StepContext, register_step

DEFAULT_SLACK = 0.10  # keep a tenth of the capped run time as a buffer before the due date


def choose_power_limits(snapshot: Snapshot, plan: Plan, *, slack: float = DEFAULT_SLACK) -> dict:
    """`plan` with a power limit set on every job for which a lower one pays (see module doc)."""
    profiles = snapshot.profiles
    out = dict(plan)
    if not profiles.levels or not plan:
        return out
    cluster = snapshot.cluster
    node_type = {n.name: n.gpu_type for n in cluster.nodes}
    busy: dict[str, int] = {}
    for a in plan.values():
        busy[a.node] = busy.get(a.node, 0) + a.gpus
    blocked = {t for v in snapshot.jobs if v.job_id not in plan
               for t, _ in profiles.configs(v.job.profile)}
    now = snapshot.time
    for view in snapshot.jobs:
        a = plan.get(view.job_id)
        if a is None or node_type[a.node] in blocked:
            continue
        config = (node_type[a.node], a.gpus)
        levels = profiles.power_levels(view.job.profile, config)
        if len(levels) < 2:
            continue
        begin = now + snapshot.restart_s(view, a, config[0])
        run_default = view.remaining_epochs * levels[0].seconds_per_epoch
        if begin + run_default > view.job.due_date:
            out[view.job_id] = replace(a, power_limit_w=None)
            continue
        gpu_type = cluster.gpu_types[config[0]]
        b = busy[a.node]
        marginal_w = gpu_type.extra_w(b) - (gpu_type.extra_w(b - a.gpus) if b > a.gpus else 0.0)
        best, best_eur = None, None
        for i, level in enumerate(levels):
            limit = None if i == 0 else level.limit_w
            run_s = view.remaining_epochs * level.seconds_per_epoch
            if limit is not None and begin + run_s * (1.0 + slack) > view.job.due_date:
                continue
            watts = marginal_w - a.gpus * profiles.saved_w(view.job.profile, config, limit)
            eur = cluster.energy_eur(watts, begin, begin + run_s)
            if best_eur is None or eur < best_eur - 1e-12 * abs(best_eur):
                best, best_eur = limit, eur
        out[view.job_id] = replace(a, power_limit_w=best)
    return out


@register_step("power_limits")
@dataclass(frozen=True)
class PowerLimits:
    """Step: cap the GPUs of jobs with slack when their profiles give power limits."""

    name: ClassVar[str] = "power_limits"

    def apply(self, snapshot: Snapshot, decision: Decision, ctx: StepContext) -> Decision:
        if not snapshot.profiles.levels:  # no profile gives limits: nothing to choose
            return decision
        return decision.replaced(choose_power_limits(snapshot, decision))
