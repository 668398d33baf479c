"""Jobs that must not be paused or moved once started (`Job.preemptible` false), for every
policy by construction.

A job whose checkpoints are unreliable, or that holds a licence or a data lease, must run
through once started. Rather than teach each policy (ours, a baseline, a user's) to leave such
jobs alone, the drivers decide through `decide` here: the policy sees a snapshot without the
running non-preemptible jobs and without the GPUs they hold, and its decision gets them back
where they run. `check_plan` refuses any plan that stops one, so a driver that bypassed this
would fail loudly.

What the policy then does not see: that a node partly held by a pinned job is already
powered. It prices that node's GPUs as if the node were otherwise idle, which overstates the
energy a job added there would cost; the plan is still feasible, only less frugal.
"""

from __future__ import annotations

from dataclasses import replace

from .base import Assignment, Plan, Policy, Snapshot, preempts, with_capacities
from .decision import Decision
from .gangs import decide as decide_with_gangs


def pinned(snapshot: Snapshot, policy: Policy | None = None) -> dict[str, Assignment]:
    """The running jobs of `snapshot` that may not be paused or moved, where they run: the
    non-preemptible ones, and every one for a policy that never preempts (`preempts`), which
    then plans the waiting jobs alone on the GPUs left free, in every driver alike."""
    keep_all = policy is not None and not preempts(policy)
    return {v.job_id: v.assignment for v in snapshot.jobs
            if v.assignment is not None and (keep_all or not v.job.preemptible)}


def without_pinned(snapshot: Snapshot, pins: dict[str, Assignment]) -> Snapshot:
    """`snapshot` less the pinned jobs and the GPUs they hold (a node left with none is
    left out)."""
    held: dict[str, int] = {}
    for a in pins.values():
        for node in a.nodes:
            held[node] = held.get(node, 0) + a.gpus
    capacities = tuple(n.gpus - held.get(n.name, 0) for n in snapshot.cluster.nodes)
    return replace(snapshot, cluster=with_capacities(snapshot.cluster, capacities),
                   jobs=tuple(v for v in snapshot.jobs if v.job_id not in pins))


def decide(policy: Policy, snapshot: Snapshot) -> Plan:
    """`policy`'s decision on `snapshot`, with every running non-preemptible job kept where it
    runs and every gang job planned whole by gangs.py (the drivers' one way to ask a policy).
    A wrapper that asks this of the policy it wraps and needs the whole snapshot (the
    service's limits count the GPUs pinned jobs hold) says so with a class attribute
    `pins_itself = True`."""
    if getattr(policy, "pins_itself", False):
        return policy.decide(snapshot)
    if snapshot.profiles.gangs:  # gang jobs planned whole (gangs.py), the rest as below
        return decide_with_gangs(lambda rest: _decide_pinned(policy, rest), snapshot)
    return _decide_pinned(policy, snapshot)


def _decide_pinned(policy: Policy, snapshot: Snapshot) -> Plan:
    pins = pinned(snapshot, policy)
    if not pins:
        return policy.decide(snapshot)
    rest = without_pinned(snapshot, pins)
    plan = policy.decide(rest) if rest.jobs and rest.cluster.nodes else {}
    decision = Decision.of(plan)
    return decision.replaced({**decision, **pins})
