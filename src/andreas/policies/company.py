"""Hold a job back rather than power a node on for it alone, while its slack allows.

A node draws its base power whenever any of its GPUs is busy (360 W of the TESLA node's 530 W
with one busy GPU), so two jobs that overlap on one node cost much less than the same two runs
apart. A job the plan would start alone on a node, with slack to spare, waits for company
instead: the next arrival or completion re-plans the queue anyway, and the plan asks to be
revisited (`TimedPlan.revisit_at`) at the latest time the job can start and still keep
`share` × its run time of slack. If nothing arrives by then it starts as planned, later and at
the same energy; if a job arrives, the two can share a powered node. (Nodes whose type draws
`idle_w` when idle stay powered anyway, and their jobs are not held.)

Holding is a bet on arrivals and costs GPU time, so it is only made while the cluster has
room: when every job of the plan is placed and the offered load (the work arriving per second,
per GPU) is below `max_load`. The load comes from the arrivals the policy has seen
(`ArrivalLog`); with fewer than two it is unknown, and nothing is held.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .base import Plan, Snapshot, TimedPlan

DEFAULT_SHARE = 0.1  # slack kept at the latest start, as a share of the planned run time
DEFAULT_MAX_LOAD = 0.5  # hold only while the offered load is below this


@dataclass
class ArrivalLog:
    """Submission times of the newest `window` jobs a policy has seen. A snapshot shows only
    unfinished jobs, so a policy keeps this across its decisions to estimate the arrival rate."""

    window: int = 20
    seen: dict[str, float] = field(default_factory=dict)

    def observe(self, snapshot: Snapshot) -> None:
        for view in snapshot.jobs:
            self.seen.setdefault(view.job_id, view.job.submit_time)
        if len(self.seen) > 2 * self.window:
            newest = sorted(self.seen.items(), key=lambda kv: kv[1])[-self.window:]
            self.seen = dict(newest)

    def offered_load(self, snapshot: Snapshot) -> float:
        """Arrival rate × mean least GPU-time of the jobs in view ÷ the cluster's GPUs (1 = the
        cluster busy all the time at the jobs' most frugal sizes); inf while unknown."""
        submits = sorted(self.seen.values())[-self.window:]
        span = snapshot.time - submits[0] if submits else 0.0
        if len(submits) < 2 or span <= 0 or not snapshot.jobs:
            return math.inf
        work = [view.job.epochs * min(g * spe for (_, g), spe in
                                      snapshot.profiles.configs(view.job.profile).items())
                for view in snapshot.jobs]
        gpus = sum(n.gpus for n in snapshot.cluster.nodes)
        return (len(submits) - 1) / span * (sum(work) / len(work)) / gpus


def hold_for_company(snapshot: Snapshot, plan: Plan, *, share: float = DEFAULT_SHARE,
                     load: float = 0.0, max_load: float = DEFAULT_MAX_LOAD) -> Plan:
    """`plan` less the jobs it would start (or move) alone on a node while they have more than
    `share` × their run time of slack, revisited when the first of them must start."""
    if len(plan) < len(snapshot.jobs) or not load < max_load:
        return plan
    per_node: dict[str, int] = {}
    for a in plan.values():
        per_node[a.node] = per_node.get(a.node, 0) + 1
    node_type = {n.name: n.gpu_type for n in snapshot.cluster.nodes}
    gpu_types = snapshot.cluster.gpu_types
    out = dict(plan)
    wake = math.inf
    for view in snapshot.jobs:
        a = plan[view.job_id]
        if per_node[a.node] > 1 or (view.assignment is not None
                                    and view.assignment.place() == a.place()):
            continue  # it has company, or it keeps running where it is
        if gpu_types[node_type[a.node]].idle_w > 0:
            continue  # its node stays powered anyway: company would save little
        latest = view.job.due_date - (1.0 + share) * snapshot.start_run_s(
            view, node_type[a.node], a)
        if latest > snapshot.time + 1.0:  # at least a second ahead: no busy loop of revisits
            del out[view.job_id]
            wake = min(wake, latest)
    return TimedPlan(out, wake) if wake < math.inf else out
