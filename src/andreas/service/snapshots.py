"""The cluster and the queue as the policy sees them, read from the database and the executor.

`read_snapshot` is pure in the sense that matters here: it reads the store and the executor
and returns what it found (the `Snapshot`, the live runs, the jobs' owners, the drained nodes
and the jobs they keep out), storing nothing anywhere. The scheduler's tick and the API's
what-if forecasts (from request threads) may call it at the same time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from ..catalogue import canonical_gpu
from ..executors import Executor
from ..io import feasible_configs
from ..model import Cluster, Job, Node, Profiles, config_key
from ..policies.base import Assignment, JobView, Snapshot
from .config import ServiceConfig
from .db import RunRow, run_places
from .learning import standard_error
from .store import Store
from .store import queue as queue_rows
from .store import runs as run_rows

DONE_EPS = 1e-6  # epochs: a job this close to its total has done them all


@dataclass(frozen=True)
class SnapshotRead:
    """A snapshot and what it was read with: the live runs by job id, each active job's
    owner, the drained nodes, and the waiting jobs they keep out (job -> the nodes)."""

    snapshot: Snapshot
    running: dict[str, RunRow]
    owners: dict[str, str]
    drained: frozenset[str]
    drained_out: dict[str, str]
    # how much each job's speed may vary (a share): learned, else `forecast_spread`; empty
    # when forecasts carry no range
    spread: dict[str, float] = field(default_factory=dict)
    # the standard error of each learned speed (a share of it), of the jobs whose learned
    # speed the plan rests on: a plan switch must outweigh it (planner.Planner.gain_needed)
    speed_error: dict[str, float] = field(default_factory=dict)


def cluster_of(config: ServiceConfig, executor: Executor, planned: bool = False) -> Cluster:
    """The configured cluster (power tables, prices) over the nodes the executor has now: as
    it costs and emits (the accounts), or, `planned`, as policies see it (a carbon price
    added to the energy price hour by hour: `Cluster.as_planned`)."""
    groups = {n.name: n.group for n in config.cluster.nodes}  # cluster.yaml's, if it names
    nodes = tuple(Node(n.name, n.gpu_type, n.gpus, groups.get(n.name))
                  for n in executor.nodes())
    return replace(config.cluster.as_planned if planned else config.cluster, nodes=nodes)


def _inline_key(row: Mapping[str, Any]) -> Any:
    """The configuration an inline profile row gives: (type, GPUs), or a gang's (type, GPUs
    per node, nodes) (`model.config_key`)."""
    return config_key(canonical_gpu(row["gpu_type"]) or row["gpu_type"], int(row["gpus"]),
                      int(row.get("nodes") or 1))


def job_configs(config: ServiceConfig, job: Any, learned: bool = True
                ) -> dict[tuple[str, int], float]:
    """Seconds per epoch by (GPU type, GPU count) on one node for a job (a JobRow, or a row
    of its columns), scaled by what was learned. Its gangs: `job_gangs`."""
    if job.inline_profile:
        table = {k: float(r["seconds_per_epoch"]) for r in job.inline_profile
                 if len(k := _inline_key(r)) == 2}
    else:
        assert job.profile_name is not None  # a job has a profile name or inline rows
        table = dict(config.profiles.configs(job.profile_name))
    factor = job.speed_factor if learned else 1.0
    return {k: v * factor for k, v in table.items()}


def job_gangs(config: ServiceConfig, job: Any, learned: bool = True
              ) -> dict[tuple[str, int, int], float]:
    """Seconds per epoch by (GPU type, GPUs per node, nodes) of a job's gangs (docs/gangs.md),
    scaled by what was learned; empty for a job that runs on one node."""
    if job.inline_profile:
        table = {k: float(r["seconds_per_epoch"]) for r in job.inline_profile
                 if len(k := _inline_key(r)) == 3}
    else:
        table = dict(config.profiles.gangs.get(job.profile_name or "", {}))
    factor = job.speed_factor if learned else 1.0
    return {k: v * factor for k, v in table.items()}


def job_spread(config: ServiceConfig, job: Any) -> dict[tuple[str, int, int], float]:
    """How much slower each of a job's gangs runs across node groups (`spread_slowdown` of
    its named profile; inline rows give none)."""
    if job.inline_profile or job.profile_name is None:
        return {}
    return dict(config.profiles.spread_slowdown.get(job.profile_name, {}))


def run_config(run: Any) -> Any:
    """The configuration a run (a RunRow, or a row of its columns) ran in, as `Profiles`
    keys it: (type, GPUs), or a gang's (type, GPUs per node, nodes)."""
    return config_key(run.gpu_type, len(run.gpu_indices), 1 + len(run.more_nodes or ()))


def run_assignment(run: RunRow) -> Assignment:
    """A live run as the policy's `Assignment`: its node and GPU count, a gang's other
    nodes."""
    return Assignment(run.node, len(run.gpu_indices),
                      more_nodes=tuple(node for node, _ in run_places(run)[1:]))


def job_power(config: ServiceConfig, job: Any) -> dict[tuple[str, int], float]:
    """Each configuration's measured draw per GPU for a job (a JobRow, or a row of its
    columns) where its profile gives one (`power_w`): its named profile's or its inline rows'.
    Configurations without one draw the power table's."""
    if job.inline_profile:
        return {_inline_key(r): float(r["power_w"]) for r in job.inline_profile
                if r.get("power_w")}
    if job.profile_name is None:
        return {}
    return dict(config.profiles.power.get(job.profile_name, {}))


def operator_values(values: Mapping[str, Mapping[tuple[str, int], float]],
                    job: Any) -> dict[tuple[str, int], float]:
    """`values` (the operator's `profiles.csv` `power_w` or `startup_s`, by profile) for a job
    of a named profile; nothing for inline rows. What the service's measured costs take: a
    number the job's submitter or its reports gave plans and forecasts, but never lowers what
    the job is charged."""
    if job.inline_profile or job.profile_name is None:
        return {}
    return dict(values.get(job.profile_name, {}))


def job_startup(config: ServiceConfig, job: Any) -> dict[tuple[str, int], float]:
    """Each configuration's start-up (s) for a job (a JobRow, or a row of its columns): what
    its runs showed (`learning.startup_s`) on every configuration once one reported, else its
    inline rows' or named profile's `startup_s`. Configurations without one take the
    cluster's `restart_overhead_s`."""
    learned = getattr(job, "startup_s", None)
    rows: dict
    if job.inline_profile:
        rows = {_inline_key(r): r for r in job.inline_profile}
        given = {c: float(r["startup_s"]) for c, r in rows.items()
                 if r.get("startup_s") is not None}
    else:
        rows = ({**config.profiles.configs(job.profile_name),
                 **config.profiles.gangs.get(job.profile_name, {})}
                if job.profile_name else {})
        given = dict(config.profiles.startup.get(job.profile_name, {})) \
            if job.profile_name else {}
    if learned is not None:
        return {c: float(learned) for c in rows}
    return given


def profile_key(job: Any) -> str:
    """The snapshot's profile for `job`: its named profile, shared by every job that runs at
    its nominal speed; its own when it has inline rows or a learned speed. (One table per job
    made a long queue's snapshot slow to build.)"""
    if (job.inline_profile or job.speed_factor != 1.0 or job.profile_name is None
            or getattr(job, "startup_s", None) is not None):
        return f"job:{job.id}"
    return f"profile:{job.profile_name}"


def read_snapshot(store: Store, executor: Executor, config: ServiceConfig,
                  clock: Callable[[], float] = time.time) -> SnapshotRead:
    """The cluster and the active jobs now, as the policy plans them."""
    now = clock()
    cluster = whole = cluster_of(config, executor, planned=True)
    held: dict[str, int] = {}
    views, table, running = [], {}, {}
    gangs: dict[str, dict[tuple[str, int, int], float]] = {}
    slowdowns: dict[str, dict[tuple[str, int, int], float]] = {}
    power: dict[str, dict[tuple[str, int], float]] = {}
    startups: dict[str, dict[tuple[str, int], float]] = {}
    spread: dict[str, float] = {}
    speed_error: dict[str, float] = {}
    known = {n.name for n in cluster.nodes}
    with store.session() as s:  # read, then let go of, before building the views
        jobs = queue_rows.active_jobs(s)
        live = {r.job_id: r for r in run_rows.live_runs(s)}
        drained = frozenset(queue_rows.drained_names(s))
        owners = queue_rows.active_owners(s)
    for job in jobs:
        run = live.get(job.id)
        if run is not None and any(node not in known for node, _ in run_places(run)):
            # its node left the cluster (a Ray node lost) and the run is not yet reconciled
            # as ended: planned once it is, restarted from its checkpoint
            continue
        remaining = float(job.epochs) - job.epochs_done
        if remaining <= DONE_EPS:
            if run is not None:  # finishing: its GPUs stay taken until it exits
                for node, indices in run_places(run):
                    held[node] = held.get(node, 0) + len(indices)
                continue
            # every epoch reported, but no run ended it (killed after its last checkpoint):
            # a run that resumes from the checkpoint ends it; planned as one epoch, it would
            # otherwise never be started again
            remaining = min(1.0, float(job.epochs))
        if config.forecast_spread is not None:
            spread[job.id] = (config.forecast_spread if job.speed_spread is None
                              else job.speed_spread)
        if (error := standard_error(job.speed_spread, job.speed_pairs)) is not None:
            speed_error[job.id] = error
        key = profile_key(job)
        if key not in table:
            table[key] = job_configs(config, job)
            if gang := job_gangs(config, job):
                gangs[key] = gang
                if slowdown := job_spread(config, job):
                    slowdowns[key] = slowdown
            if own := job_power(config, job):
                power[key] = own
            if startup := job_startup(config, job):
                startups[key] = startup
        assignment = None
        if run is not None:
            assignment = run_assignment(run)
            running[job.id] = run
        views.append(JobView(Job(job.id, job.submitted_at, job.due_date, job.weight,
                                 float(job.epochs), key, preemptible=job.preemptible,
                                 start_asap=job.start_asap), remaining, assignment,
                             job.first_started_at is not None))
    for node, gpus in executor.foreign_gpus().items():  # another Slurm user's jobs
        held[node] = held.get(node, 0) + gpus
    if held:
        cluster = replace(cluster, nodes=tuple(
            replace(n, gpus=max(0, n.gpus - held.get(n.name, 0)))
            for n in cluster.nodes))
    views, drained_out = leave_out_drained_out(
        views, {k: {**c, **gangs.get(k, {})} for k, c in table.items()}, whole, drained)
    if drained:  # a drained node offers only the GPUs its running jobs hold
        cluster = _drained_offer_held_gpus(cluster, views, drained)
    # real processes pay the restart overhead on their first start too (the interpreter,
    # loading data): the holds, the plan and the forecast all count it
    snapshot = Snapshot(now, cluster, Profiles(table, power=power, startup=startups,
                                               gangs=gangs, spread_slowdown=slowdowns),
                        tuple(views), first_start_overhead=True)
    return SnapshotRead(snapshot, running, owners, drained, drained_out, spread, speed_error)


def _drained_offer_held_gpus(cluster: Cluster, views: list[JobView],
                             drained: frozenset[str]) -> Cluster:
    running_there: dict[str, int] = {}
    for v in views:
        if v.assignment is not None:
            for node in v.assignment.nodes:
                running_there[node] = running_there.get(node, 0) + v.assignment.gpus
    return replace(cluster, nodes=tuple(
        replace(n, gpus=min(n.gpus, running_there.get(n.name, 0)))
        if n.name in drained else n for n in cluster.nodes
        if n.name not in drained or running_there.get(n.name, 0) > 0))


def leave_out_drained_out(views: list[JobView], table: dict, cluster: Cluster,
                          drained: frozenset[str]) -> tuple[list[JobView], dict[str, str]]:
    """The views less the waiting jobs that no node left undrained can run (every node of
    their GPU types drained), and those jobs with the drained nodes they need: they wait,
    saying so (`drained_out`), and the decision and its forecast plan the rest over the
    remaining nodes. Planned with them, a job that can never start stopped every decision
    until the node was undrained."""
    if not drained:
        return views, {}
    open_nodes = replace(cluster, nodes=tuple(n for n in cluster.nodes
                                              if n.name not in drained))
    kept, out = [], {}
    for view in views:
        if view.assignment is None and not feasible_configs(open_nodes,
                                                            table[view.job.profile]):
            types = {t for t, _ in table[view.job.profile]}
            out[view.job_id] = ", ".join(sorted(
                n.name for n in cluster.nodes if n.name in drained
                and n.gpu_type in types)) or "every node"
            continue
        kept.append(view)
    return kept, out
