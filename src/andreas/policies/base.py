"""What a policy sees and what it returns: the contract between policies and their drivers.

A policy is a pure function `plan = policy.decide(snapshot)`. The simulator (simulated clock)
and the live service (real clock) both build `Snapshot`s and apply `Plan`s; neither is visible
to the policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Protocol

from ..errors import PlanError
from ..model import Cluster, Job, Profiles


@dataclass(frozen=True)
class Assignment:
    """Run a job on `gpus` GPUs of node `node`, capped at `power_limit_w` watts per GPU (None:
    the default limit). Changing only the limit needs no restart."""

    node: str
    gpus: int
    power_limit_w: float | None = None

    def place(self) -> tuple[str, int]:
        """Where it runs, whatever the power limit: what a restart depends on."""
        return self.node, self.gpus


def stops_job(current: Assignment | None, target: Assignment | None) -> bool:
    """Whether going from `current` (where a job runs; None: it waits) to `target` (None: it
    waits) stops the job's process: a pause, or a move to another node or GPU count. A new power
    limit alone is applied to the running process. The one restart rule of the simulator, the
    forecast, the service and the policies' cost estimates."""
    if current is target:  # the same object (plans reuse one per place): nothing changes
        return False
    return current is not None and (target is None or current.place() != target.place())


@dataclass(frozen=True, init=False)
class JobView:
    """An unfinished, submitted job as the policy sees it."""

    job: Job
    remaining_epochs: float
    assignment: Assignment | None = None  # where it runs now; None = waiting
    started: bool = False  # has it ever run? (resuming costs the restart overhead)
    restart_remaining_s: float = 0.0  # restart overhead still to pay on its current assignment

    def __init__(self, job: Job, remaining_epochs: float, assignment: Assignment | None = None,
                 started: bool = False, restart_remaining_s: float = 0.0) -> None:
        # The generated __init__ of a frozen dataclass sets each field through
        # object.__setattr__, three times as slow as this: a driver makes a view of every
        # active job at every decision. Still frozen: assignment afterwards raises.
        fields = self.__dict__
        fields["job"] = job
        fields["remaining_epochs"] = remaining_epochs
        fields["assignment"] = assignment
        fields["started"] = started
        fields["restart_remaining_s"] = restart_remaining_s

    @property
    def job_id(self) -> str:
        return self.job.job_id


@dataclass(frozen=True)
class Snapshot:
    time: float
    cluster: Cluster
    profiles: Profiles
    jobs: tuple[JobView, ...]
    # a job's first start pays the restart overhead too: true of real processes (interpreter,
    # data loading), which the paper's model leaves out; the live service sets it
    first_start_overhead: bool = False

    def pays_overhead(self, view: JobView) -> bool:
        """Whether `view` pays the restart overhead when it starts on a new assignment: it ran
        before, or first starts pay it too. The one rule the holds, the consolidation timeline
        and the forecast use; the plan's candidate table charges only jobs that have run
        (CandidateTable.build says why)."""
        return view.started or self.first_start_overhead

    def start_run_s(self, view: JobView, gpu_type: str, target: Assignment) -> float:
        """How long `view` takes if it (re)starts now on `target`, a node of `gpu_type`: its
        remaining epochs there, plus the restart overhead if it pays one (`pays_overhead`)."""
        run_s = view.remaining_epochs * self.profiles.seconds_per_epoch(
            view.job.profile, gpu_type, target.gpus, target.power_limit_w)
        return run_s + (self.overhead_s(view, gpu_type, target.gpus)
                        if self.pays_overhead(view) else 0.0)

    def overhead_s(self, view: JobView, gpu_type: str, gpus: int) -> float:
        """How long a restart of `view` on `gpus` GPUs of `gpu_type` takes: its profile's
        measured start-up there, else the cluster's `restart_overhead_s`."""
        return self.profiles.restart_s(view.job.profile, (gpu_type, gpus),
                                       self.cluster.restart_overhead_s)

    def restart_s(self, view: JobView, target: Assignment, gpu_type: str) -> float:
        """The restart time `view` pays before it runs on `target`, a node of `gpu_type`: what
        is left of its restart where it runs already, else the restart overhead there if it
        pays one."""
        if view.assignment is not None and not stops_job(view.assignment, target):
            return view.restart_remaining_s
        return self.overhead_s(view, gpu_type, target.gpus) if self.pays_overhead(view) else 0.0

    def run_s(self, view: JobView, gpu_type: str, target: Assignment) -> float:
        """How long `view` takes from now on `target` (staying where it runs, or not)."""
        return self.restart_s(view, target, gpu_type) + view.remaining_epochs * \
            self.profiles.seconds_per_epoch(view.job.profile, gpu_type, target.gpus,
                                            target.power_limit_w)

    def free_gpus(self) -> dict[str, int]:
        free = {n.name: n.gpus for n in self.cluster.nodes}
        for view in self.jobs:
            if view.assignment is not None:
                free[view.assignment.node] -= view.assignment.gpus
        return free


Plan = Mapping[str, Assignment]
"""job_id -> where it runs until the next rescheduling point; a job not in the plan waits."""


def revisit_at(plan: Plan) -> float | None:
    """When the policy must be asked again, even if nothing happens (`decision.Decision`);
    None for a plain mapping."""
    return getattr(plan, "revisit_at", None)


def lookup(plan: Mapping[str, Assignment]) -> Callable[[str], Assignment | None]:
    """`plan.get`, as the plain dict's own method when `plan` wraps one (a `Decision` keeps
    its assignments in `_assignments`): a driver looks up every active job at every
    decision."""
    inner = getattr(plan, "_assignments", None)
    return inner.get if isinstance(inner, dict) else plan.get


def check_plan(snapshot: Snapshot, plan: Plan, policy_name: str) -> None:
    """Raise PlanError unless every planned job is known, on a known node, in a configuration
    its profile allows, no running non-preemptible job is paused or moved, and no node holds
    more GPUs than it has. Both drivers call this."""
    cluster = snapshot.cluster
    index = cluster.node_positions
    used = [0] * len(cluster.nodes)
    target_of = lookup(plan)
    planned = 0  # plan entries of known jobs
    stopped = None  # a running non-preemptible job the plan pauses or moves
    for view in snapshot.jobs:
        job = view.job
        a = target_of(job.job_id)
        current = view.assignment
        if a is None:
            if current is not None and not job.preemptible and stopped is None:
                stopped = job.job_id
            continue
        planned += 1
        n = index.get(a.node)
        if (a is current or a == current) and n is not None:  # kept as it runs
            used[n] += a.gpus
            continue
        if n is None:
            raise PlanError(f"policy {policy_name!r} planned job {job.job_id!r} on unknown node "
                            f"{a.node!r}")
        if current is not None and not job.preemptible and stops_job(current, a) \
                and stopped is None:
            stopped = job.job_id
        config = (cluster.nodes[n].gpu_type, a.gpus)
        if config not in snapshot.profiles.configs(job.profile):
            raise PlanError(f"policy {policy_name!r} planned job {job.job_id!r} on {config}, "
                            f"which its profile does not allow")
        if a.power_limit_w is not None and not any(
                lv.limit_w == a.power_limit_w for lv in snapshot.profiles.power_levels(
                    job.profile, config)):
            raise PlanError(f"policy {policy_name!r} planned job {job.job_id!r} at a power "
                            f"limit of {a.power_limit_w:g} W, which its profile does not give "
                            f"on {config}")
        used[n] += a.gpus
    if planned != len(plan):
        known = {v.job_id for v in snapshot.jobs}
        unknown = next(job_id for job_id in plan if job_id not in known)
        raise PlanError(f"policy {policy_name!r} planned unknown or finished job {unknown!r}")
    if stopped is not None:
        raise PlanError(f"policy {policy_name!r} paused or moved job {stopped!r}, which is not "
                        f"preemptible (decide through policies.pinning.decide)")
    for n, u in enumerate(used):
        if u > cluster.nodes[n].gpus:
            raise PlanError(f"policy {policy_name!r} over-subscribed node "
                            f"{cluster.nodes[n].name!r}: {u} > {cluster.nodes[n].gpus} GPUs")


class Policy(Protocol):
    """A pure function from a snapshot to a plan. A policy that never pauses, moves or
    resizes a running job may say so with a class attribute `preempts = False` (`preempts`):
    a driver may then ask it about the waiting jobs alone, on the GPUs the running ones leave
    free, and keep every running job as it runs."""

    name: str

    def decide(self, snapshot: Snapshot) -> Plan: ...


def preempts(policy: Policy) -> bool:
    """Whether `policy` may stop a running job (see `Policy`); True unless it says not."""
    return bool(getattr(policy, "preempts", True))
