"""What a policy sees and what it returns: the contract between policies and their drivers.

A policy is a pure function `plan = policy.decide(snapshot)`. The simulator (simulated clock)
and the live service (real clock) both build `Snapshot`s and apply `Plan`s; neither is visible
to the policy.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Callable, Mapping, Protocol

from ..errors import PlanError
from ..model import Cluster, Job, Profiles, config_key


@dataclass(frozen=True)
class Assignment:
    """Run a job on `gpus` GPUs of node `node`, capped at `power_limit_w` watts per GPU (None:
    the default limit). Changing only the limit needs no restart.

    A gang (a job of a profile with `Profiles.gangs`) runs on `gpus` GPUs of each of `node`
    and `more_nodes`, all of one GPU type: `nodes` lists them, rank 0's node first."""

    node: str
    gpus: int
    power_limit_w: float | None = None
    more_nodes: tuple[str, ...] = ()

    def place(self) -> tuple[str, int, tuple[str, ...]]:
        """Where it runs, whatever the power limit: what a restart depends on."""
        return self.node, self.gpus, self.more_nodes

    @property
    def nodes(self) -> tuple[str, ...]:
        """Every node it holds GPUs on (one, unless a gang)."""
        return (self.node, *self.more_nodes) if self.more_nodes else (self.node,)

    @property
    def node_count(self) -> int:
        return 1 + len(self.more_nodes)


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
        nodes = target.node_count
        run_s = view.remaining_epochs * self.profiles.seconds_per_epoch(
            view.job.profile, gpu_type, target.gpus, target.power_limit_w, nodes,
            self.spread(target))
        return run_s + (self.overhead_s(view, gpu_type, target.gpus, nodes)
                        if self.pays_overhead(view) else 0.0)

    def overhead_s(self, view: JobView, gpu_type: str, gpus: int, nodes: int = 1) -> float:
        """How long a restart of `view` on `gpus` GPUs of `gpu_type` (on each of `nodes`
        nodes) takes: its profile's measured start-up there, else the cluster's
        `restart_overhead_s`."""
        return self.profiles.restart_s(view.job.profile, config_key(gpu_type, gpus, nodes),
                                       self.cluster.restart_overhead_s)

    def restart_s(self, view: JobView, target: Assignment, gpu_type: str) -> float:
        """The restart time `view` pays before it runs on `target`, a node of `gpu_type`: what
        is left of its restart where it runs already, else the restart overhead there if it
        pays one."""
        if view.assignment is not None and not stops_job(view.assignment, target):
            return view.restart_remaining_s
        return self.overhead_s(view, gpu_type, target.gpus, target.node_count) \
            if self.pays_overhead(view) else 0.0

    def run_s(self, view: JobView, gpu_type: str, target: Assignment) -> float:
        """How long `view` takes from now on `target` (staying where it runs, or not)."""
        return self.restart_s(view, target, gpu_type) + view.remaining_epochs * \
            self.profiles.seconds_per_epoch(view.job.profile, gpu_type, target.gpus,
                                            target.power_limit_w, target.node_count,
                                            self.spread(target))

    def spread(self, target: Assignment) -> bool:
        """Whether `target`, a gang's nodes, spans more than one node group."""
        return bool(target.more_nodes) and self.cluster.spans_groups(target.nodes)

    def free_gpus(self) -> dict[str, int]:
        free = {n.name: n.gpus for n in self.cluster.nodes}
        for view in self.jobs:
            a = view.assignment
            if a is not None:
                for node in a.nodes:
                    free[node] -= a.gpus
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
            for other in a.more_nodes:
                used[index[other]] += a.gpus
            continue
        if n is None:
            raise PlanError(f"policy {policy_name!r} planned job {job.job_id!r} on unknown node "
                            f"{a.node!r}")
        if current is not None and not job.preemptible and stops_job(current, a) \
                and stopped is None:
            stopped = job.job_id
        if a.more_nodes:
            _check_gang(snapshot, job, a, policy_name, used)
            continue
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


def _check_gang(snapshot: Snapshot, job: Job, a: Assignment, policy_name: str,
                used: list[int]) -> None:
    """Refuse a gang placement that is not whole: unknown or repeated nodes, nodes of two GPU
    types, a node count or GPUs per node its profile does not give, or a power limit (gangs
    run at the default one); count its GPUs on every node it holds."""
    cluster = snapshot.cluster
    index = cluster.node_positions
    positions = []
    for name in a.nodes:
        n = index.get(name)
        if n is None:
            raise PlanError(f"policy {policy_name!r} planned gang {job.job_id!r} on unknown "
                            f"node {name!r}")
        positions.append(n)
    if len(set(positions)) != len(positions):
        raise PlanError(f"policy {policy_name!r} planned gang {job.job_id!r} twice on one "
                        f"node: {', '.join(a.nodes)}")
    types = sorted({cluster.nodes[n].gpu_type for n in positions})
    if len(types) > 1:
        raise PlanError(f"policy {policy_name!r} planned gang {job.job_id!r} over two GPU "
                        f"types ({', '.join(types)}); a gang runs on one")
    config = (types[0], a.gpus, len(positions))
    if config not in snapshot.profiles.gangs.get(job.profile, {}):
        raise PlanError(f"policy {policy_name!r} planned job {job.job_id!r} as a gang of "
                        f"{len(positions)} nodes x {a.gpus} {types[0]} GPUs, which its profile "
                        f"does not allow")
    if a.power_limit_w is not None:
        raise PlanError(f"policy {policy_name!r} planned gang {job.job_id!r} at a power limit; "
                        f"gangs run at the default limit")
    for n in positions:
        used[n] += a.gpus


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


_REDUCED: OrderedDict[tuple[int, tuple[int, ...]], tuple[Cluster, Cluster]] = OrderedDict()
_REDUCED_KEEP = 8
_LOCK = threading.Lock()


def with_capacities(cluster: Cluster, capacities: tuple[int, ...]) -> Cluster:
    """`cluster` with node i holding `capacities[i]` GPUs (left out at 0): what a policy sees
    once pinned jobs or gangs hold some GPUs (pinning.py, gangs.py). The same object while
    the capacities do not change (they change far less often than decisions are made): the
    policy's per-cluster tables (search/cluster_tables.py) are then built once, not at every
    decision. A few are kept; each entry holds its cluster, so an id is
    never reused while kept."""
    key = (id(cluster), capacities)
    with _LOCK:
        kept = _REDUCED.get(key)
        if kept is not None and kept[0] is cluster:
            _REDUCED.move_to_end(key)
            return kept[1]
    nodes = tuple(n if gpus == n.gpus else replace(n, gpus=gpus)
                  for n, gpus in zip(cluster.nodes, capacities) if gpus > 0)
    reduced = replace(cluster, nodes=nodes)
    with _LOCK:
        _REDUCED[key] = (cluster, reduced)
        while len(_REDUCED) > _REDUCED_KEEP:
            _REDUCED.popitem(last=False)
    return reduced
