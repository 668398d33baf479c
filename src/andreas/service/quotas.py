"""Per-user limits of the live service (`quotas` in service.yaml) and drained nodes.

`max_gpus`: GPUs a user's jobs may hold at once; a job the plan would start past it waits,
with the reason `over_quota`. `max_queued`: jobs a user may have waiting (queued or paused);
a submission past it is refused. A drained node finishes (or loses, when the plan moves them)
the jobs it runs and starts nothing new (`node_drained`). These are the service's rules, about
users and operators, so they are applied to the policy's decision here, not inside policies:
`WithinLimits` wraps a policy so that both the live decision and the forecast's later
decisions keep to them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import ClassVar

from ..policies import pinning
from ..policies.base import Assignment, Policy, Snapshot, revisit_at, stops_job
from ..policies.decision import Decision, Reason


@dataclass(frozen=True)
class Limits:
    max_gpus: int | None = None  # None: no limit
    max_queued: int | None = None


@dataclass(frozen=True)
class Quotas:
    default: Limits = Limits()
    users: Mapping[str, Limits] = field(default_factory=dict)

    @property
    def bound_gpus(self) -> bool:
        """Whether any user's GPUs are bounded (else within_limits has no quota to apply)."""
        return self.default.max_gpus is not None or any(
            q.max_gpus is not None for q in self.users.values())

    def of(self, user: str) -> Limits:
        """A user's limits: their own entry's, else the default's, field by field."""
        own = self.users.get(user, Limits())
        return Limits(own.max_gpus if own.max_gpus is not None else self.default.max_gpus,
                      own.max_queued if own.max_queued is not None else self.default.max_queued)


def within_limits(snapshot: Snapshot, plan: Mapping[str, Assignment], owners: Mapping[str, str],
                  quotas: Quotas, drained: set[str]) -> tuple[dict[str, Assignment],
                                                              dict[str, Reason]]:
    """`plan` less what the service forbids, and why each dropped job waits: a start on a
    drained node (a job keeps running where it runs), and the GPUs past a user's max_gpus
    (their jobs that run now keep their GPUs first, then the most urgent: highest weight,
    then earliest due date)."""
    views = {v.job_id: v for v in snapshot.jobs}
    out: dict[str, Assignment] = {}
    why: dict[str, Reason] = {}
    for job_id, a in plan.items():
        view = views.get(job_id)
        stays = view is not None and view.assignment is not None and \
            not stops_job(view.assignment, a)
        closed = next((n for n in a.nodes if n in drained), None)  # a gang's any node
        if closed is not None and not stays:
            why[job_id] = Reason("node_drained", node=closed)
        else:
            out[job_id] = a
    held: dict[str, int] = {}

    def urgency(job_id: str) -> tuple:
        v = views[job_id]
        stays = v.assignment is not None and not stops_job(v.assignment, out[job_id])
        return (not stays, -v.job.tardiness_weight, v.job.due_date, job_id)

    for job_id in sorted((j for j in out if j in views), key=urgency):
        user = owners.get(job_id, "")
        limit = quotas.of(user).max_gpus
        gpus = out[job_id].gpus * out[job_id].node_count  # a gang's on every node
        if limit is not None and held.get(user, 0) + gpus > limit:
            why[job_id] = Reason("over_quota", detail=f"{user}'s jobs may hold at most {limit} "
                                 f"GPUs at once and hold {held.get(user, 0)}")
            del out[job_id]
            continue
        held[user] = held.get(user, 0) + gpus
    return out, why


@dataclass(frozen=True)
class ServiceLimits:
    """What bounds the starts of one decision: who owns each job, the quotas, the drained
    nodes (picklable: the decision worker applies them)."""

    owners: Mapping[str, str]
    quotas: Quotas
    drained: frozenset[str] = frozenset()

    @property
    def bind(self) -> bool:
        """Whether they can refuse a start at all."""
        return bool(self.drained) or self.quotas.bound_gpus

    def apply(self, snapshot: Snapshot, plan: Mapping[str, Assignment]
              ) -> tuple[dict[str, Assignment], dict[str, Reason]]:
        """`within_limits` with these limits."""
        if not self.bind:
            return dict(plan), {}
        return within_limits(snapshot, plan, self.owners, self.quotas, set(self.drained))


@dataclass
class WithinLimits:
    """`policy`, keeping to the service's limits: its plan less the starts they refuse, and
    then its plan again without the refused jobs, so that their GPUs go to others. Each
    refused job says why. The live decision and the forecast's later ones both use it."""

    policy: Policy
    limits: ServiceLimits
    pins_itself: ClassVar[bool] = True  # the limits count the GPUs of pinned jobs too
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.policy.name

    def decide(self, snapshot: Snapshot) -> Decision:
        first = Decision.of(pinning.decide(self.policy, snapshot))
        plan, refused = self.limits.apply(snapshot, first)
        if not refused:
            return first
        rest = replace(snapshot, jobs=tuple(v for v in snapshot.jobs if v.job_id not in refused))
        again = Decision.of(pinning.decide(self.policy, rest) if rest.jobs else {})
        plan, more = self.limits.apply(rest, again)
        refused.update(more)
        return Decision(plan, revisit_at(again), {**again.reasons, **refused})


def limited(policy: Policy, limits: ServiceLimits | None) -> Policy:
    """`policy` within `limits`, or as it is where they refuse nothing."""
    return policy if limits is None or not limits.bind else WithinLimits(policy, limits)
