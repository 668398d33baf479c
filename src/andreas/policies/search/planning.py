"""Per-snapshot planning tables shared by every policy: candidate configurations and their
run-time and energy estimates, and the cluster as indexable lists (the greedy pass that places
jobs on them is kernel.py's, called through passes.py).

Built once per decision as flat lists and arrays indexed by job and node, so the greedy's inner
loop does no dictionary look-ups of model objects. What depends on the cluster and the profiles
alone (node lists, power table, hostable configurations) is cluster_tables.py's, built once per
cluster and shared read-only by its decisions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from operator import attrgetter

import numpy as np

from ...cost import own_power_saved_w, run_energy_cost, tardiness_costs
from ..base import Snapshot
from . import table_kernel
from .cluster_tables import ProfileRows, tables_for

_JOB, _ASSIGNMENT, _REMAINING = attrgetter("job"), attrgetter("assignment"), \
    attrgetter("remaining_epochs")
_STARTED, _RESTART_LEFT = attrgetter("started"), attrgetter("restart_remaining_s")
_JOB_ID, _DUE, _WEIGHT = attrgetter("job_id"), attrgetter("due_date"), \
    attrgetter("tardiness_weight")
_PROFILE = attrgetter("job.profile")

WAITING_PENALTY = 100.0
"""Proxy cost factor on a waiting job's lateness if it ran on its slowest configuration."""


def move_pays_overhead(overhead, home_type, home_gpus, gpu_type, gpus):
    """Whether a job running on a node of `home_type` with `home_gpus` GPUs (home_type -1: it
    waits) pays the restart overhead again when its candidate (`gpu_type`, `gpus`) runs on
    another node: only when its configuration is unchanged, since the candidates of other
    configurations include the overhead already (stops_job: any move restarts). Elementwise on
    numpy arrays too (pack)."""
    return (overhead > 0) & (home_type >= 0) & (gpus == home_gpus) & (gpu_type == home_type)


def moved_time(time_s, restart_left_s, overhead):
    """Run time of a candidate (`time_s`, counting `restart_left_s` of an unfinished restart
    on its node) when moved: a whole restart instead. Elementwise on numpy arrays too."""
    return time_s - restart_left_s + overhead


class CandidateTable:
    """Every job's candidates as [jobs, candidates] arrays, each row in the order policies try
    them: the cheapest that meets the due date first, then the rest fastest first.

    Built for all jobs at once by compiled loops (table_kernel.py; with a tariff, each energy
    is the price integrated over the candidate's own run). A plan names a job's candidate by
    its column in the job's row (placement.Placement).
    """

    def __init__(self, ct, cg, ctime, cen, meets, real, tmin, tmax, nc, cw, cover) -> None:
        self.ct, self.cg, self.ctime, self.cen, self.meets, self.nc = ct, cg, ctime, cen, meets, nc
        # [J, C]: watts each candidate draws above the table's share (its profile's own draw);
        # [J, 0] when no job has one (the kernel then skips the term)
        self.cw = cw
        # [J, C]: each candidate's restart overhead where a job's profile gives its own
        # start-up; None when none does (the context's one overhead for all)
        self.cover = cover
        self.real = real  # [J, C]: the entries that are candidates (each row's first nc)
        self.tmin, self.tmax = tmin, tmax  # [J]: fastest and slowest run, NaN with none

    @classmethod
    def build(cls, ctx: "PlanningContext", rows: "ProfileRows") -> "CandidateTable":
        """All jobs at once: each job's row gathers its profile's hostable configurations
        (`rows`: the cluster's table of them, cluster_tables.ProfileRows)."""
        views, now = ctx.views, ctx.now
        J = len(views)
        pidx, (p_type, p_gpus, p_spe, p_watts, p_n, p_restart) = rows.lookup(
            list(map(_PROFILE, views)))
        # at least one column (ProfileRows): with none (no job has a configuration the
        # cluster can host, e.g. non-preemptible jobs hold the GPUs it needs) every row is
        # padding, and the passes' indexing by candidate column still has a column to read.
        # Restart overhead on a new start: only for jobs that have run. The table orders and
        # scores jobs against each other; charging a waiting job's first start here (as the
        # holds and the forecast do, Snapshot.first_start_overhead) made it look more urgent
        # than an identical job just started, which the plan then paused for it: a wasted
        # restart (the live service, under load). A first start's overhead is the same for
        # each of the job's candidates, so it does not change which one a job gets.
        rem = np.fromiter(map(_REMAINING, views), float, J)
        started = np.fromiter(map(_STARTED, views), np.bool_, J)
        ct, cg, times, nc = table_kernel.candidate_times(
            pidx, p_type, p_gpus, p_spe, p_n, rem, started, ctx.restart_left, ctx.home_type,
            ctx.home_g, restart_overheads(p_restart, ctx.cluster.restart_overhead_s,
                                          ctx.plan_restart_s))
        if ctx.cluster.tariff is None:
            energy = table_kernel.flat_energy(pidx, p_watts, times, float(now),
                                              float(ctx.cluster.eur_per_joule()))
        else:  # the price integrated over each candidate's own run
            energy = np.zeros(times.shape)
            names = ctx.type_names
            profiles = ctx.profiles
            for j, n in enumerate(nc.tolist()):
                profile = views[j].job.profile
                for c in range(n):
                    gpus = int(cg[j, c])
                    saved = own_power_saved_w(ctx.cluster.gpu_types[names[ct[j, c]]], gpus,
                                              profiles.gpu_power_w(profile,
                                                                   (names[ct[j, c]], gpus)))
                    energy[j, c] = run_energy_cost(ctx.cluster, names[ct[j, c]], gpus,
                                                   float(times[j, c]), now, saved)
        # (0, energy, time) when on time, else (1, time, energy), padding last (kernel)
        o_ct, o_cg, ctime, cen, meets, real, tmin, tmax = table_kernel.ordered_rows(
            ct, cg, times, energy, nc, np.array(ctx.due, float), float(now))
        return cls(o_ct, o_cg, ctime, cen, meets, real, tmin, tmax, nc,
                   own_watts(ctx, o_ct, o_cg, nc), own_overheads(ctx, o_ct, o_cg, nc))


def per_candidate(ctx: "PlanningContext", given: Mapping[str, Mapping[tuple[str, int], float]],
                  ct: np.ndarray, cg: np.ndarray, nc: np.ndarray, fill: float,
                  value: Callable[[tuple[str, int], float], float]) -> np.ndarray | None:
    """[J, C]: `value(config, x)` for each candidate whose job's profile gives `x` for its
    configuration in `given` (profile -> configuration -> x), `fill` for the others; None
    when no job's profile is in `given` (the common case, at no cost)."""
    if not given or not any(v.job.profile in given for v in ctx.views):
        return None
    out = np.full(ct.shape, fill)
    names = ctx.type_names
    for j, view in enumerate(ctx.views):
        own = given.get(view.job.profile)
        if not own:
            continue
        for c in range(int(nc[j])):
            config = (names[ct[j, c]], int(cg[j, c]))
            if config in own:
                out[j, c] = value(config, own[config])
    return out


def own_watts(ctx: "PlanningContext", ct: np.ndarray, cg: np.ndarray,
              nc: np.ndarray) -> np.ndarray:
    """[J, C]: the watts each candidate draws above the power table's share, where the job's
    profile gives its own draw (`cost.own_power_saved_w`); [J, 0] when no job's does."""
    kinds = ctx.cluster.gpu_types
    cw = per_candidate(ctx, ctx.profiles.power, ct, cg, nc, 0.0, lambda config, watts:
                       -own_power_saved_w(kinds[config[0]], config[1], watts))
    return np.zeros((len(ctx.views), 0)) if cw is None else cw


def restart_overheads(p_restart: np.ndarray, cluster_s: float, plan_restart_s: float
                      ) -> np.ndarray:
    """[P, C]: the restart overhead of each profile row's configuration: its own start-up
    where it gives one, else the cluster's; at least `plan_restart_s` (the planning penalty)."""
    return np.where(np.isnan(p_restart), max(cluster_s, plan_restart_s),
                    np.maximum(p_restart, plan_restart_s))


def own_overheads(ctx: "PlanningContext", ct: np.ndarray, cg: np.ndarray,
                  nc: np.ndarray) -> np.ndarray | None:
    """[J, C]: each candidate's restart overhead (`restart_overheads`), in the table's order;
    None when no job's profile gives its own start-up (then `ctx.overhead` holds for all)."""
    return per_candidate(ctx, ctx.profiles.startup, ct, cg, nc, ctx.overhead,
                         lambda config, seconds: max(seconds, ctx.plan_restart_s))


class PlanningContext:
    """Everything a policy needs about one snapshot, as indexable lists."""

    def __init__(self, snapshot: Snapshot, plan_restart_s: float = 0.0) -> None:
        """`plan_restart_s`: plan as if every restart lost at least this long (the cluster's
        own restart_overhead_s if larger). With free restarts a re-planning policy moves and
        resizes jobs at almost every event; a planning penalty trades a little cost for far
        fewer restarts, which real jobs (checkpoint, reload, warm-up) appreciate."""
        cluster = snapshot.cluster
        self.now = snapshot.time
        # the cluster's own tables, shared by every decision on it (read-only)
        tables = self.tables = tables_for(cluster)
        self.type_names = tables.type_names
        self.power = tables.power
        self.eur_per_joule = cluster.eur_per_joule()
        self.node_names = tables.node_names
        self.node_type = tables.node_type
        self.node_cap = tables.node_cap
        self.nodes_of_type = tables.nodes_of_type
        node_index = tables.node_index

        # per job, as lists (and as arrays for the tables): one C-level pass per field
        views = self.views = snapshot.jobs
        jobs = list(map(_JOB, views))
        self.job_ids = list(map(_JOB_ID, jobs))
        self.due = list(map(_DUE, jobs))
        self.weight = list(map(_WEIGHT, jobs))
        current = [
            None if a is None else (node_index[a.node], a.gpus)
            for a in map(_ASSIGNMENT, views)]
        J = len(views)
        # where each job runs (node, -1: waiting; its GPU count there, 0) and what is left of
        # its restart there, as arrays: the candidate table and the kernel read them
        self.home = np.array([-1 if c is None else c[0] for c in current], np.int64)
        self.home_g = np.array([0 if c is None else c[1] for c in current], np.int64)
        self.home_type = np.where(self.home >= 0, tables.k_node_type[np.maximum(self.home, 0)],
                                  -1)  # the GPU type it runs on, -1 waiting
        self.restart_left = np.fromiter(map(_RESTART_LEFT, views), float, J)
        self.overhead = max(cluster.restart_overhead_s, plan_restart_s)
        self.plan_restart_s = plan_restart_s
        self.cluster = cluster
        self.profiles = snapshot.profiles
        self._orders: dict[str, list[int]] = {}  # orderings.ordered's, per order
        self._pressure_ranks: np.ndarray | None = None  # orderings.pressure_ranks'
        self.table = CandidateTable.build(self, tables.profile_rows(snapshot.profiles))
        self.tmin = self.table.tmin.tolist()
        if cluster.tariff is not None:  # plan scores price energy at the mean over the horizon
            # (jobs with no configuration here, NaN, left out: a baseline's free GPUs may
            # host none of a waiting job's)
            horizon = max((t for t in self.table.tmax.tolist() if t == t), default=0.0)
            self.eur_per_joule = cluster.eur_per_joule(self.now, self.now + horizon)
        self.type_capacity = tables.type_capacity
        self.wait_penalties = WAITING_PENALTY * tardiness_costs(
            np.array(self.weight), self.now + self.table.tmax, np.array(self.due))
        self.wait_penalty = self.wait_penalties.tolist()

    @cached_property
    def kernel_overhead(self) -> float:
        """The one restart overhead the greedy pass weighs displacing running jobs with: the
        context's, or the longest of the candidates' own start-ups where profiles give them."""
        cover = self.table.cover
        return self.overhead if cover is None else max(self.overhead, float(cover.max()))

    @cached_property
    def packed(self):
        """This context as the compiled kernel's arrays (`pack`), built once: the
        Randomized Greedy's passes and the plan scores of the plain path share them."""
        return pack(self)

    @cached_property
    def rows(self) -> tuple[list[list[int]], list[list[int]], list[list[bool]]]:
        """Each job's candidates' GPU types, GPU counts and on-time flags (the table's real
        entries, in its order) as plain lists, made once: the moves of resizing and the local
        searches filter rows entry by entry, and reading a numpy array one entry at a time
        costs several times a list's."""
        t = self.table
        nc = t.nc.tolist()
        return tuple([row[:n] for row, n in zip(a.tolist(), nc)]  # type: ignore[return-value]
                     for a in (t.ct, t.cg, t.meets))


@dataclass
class Packed:
    ct: np.ndarray  # [J, C] candidate GPU type
    cg: np.ndarray  # [J, C] candidate GPU count
    ctime: np.ndarray  # [J, C] run time
    cen: np.ndarray  # [J, C] energy cost
    cmov: np.ndarray  # [J, C] moving to another node pays the restart overhead
    mtime: np.ndarray  # [J, C] run time when moved
    nc: np.ndarray  # [J] number of candidates
    meets: np.ndarray  # [J, C] meets the due date
    home: np.ndarray  # [J] current node or -1
    home_g: np.ndarray  # [J] current GPU count or 0
    due: np.ndarray
    weight: np.ndarray
    wait_penalty: np.ndarray
    node_type: np.ndarray
    node_cap: np.ndarray
    power: np.ndarray  # [T, G] node power with 1..G busy GPUs
    type_capacity: np.ndarray
    type_nodes: np.ndarray  # node indices grouped by GPU type, ascending within a type
    type_start: np.ndarray  # [T + 1] where each type's nodes begin in type_nodes
    cw: np.ndarray  # [J, C] watts above the table's share (own draws); [J, 0] with none
    # (no reference back to the context: the context caches its Packed, and a cycle between
    # them would leave every decision's objects to the garbage collector, not to refcounting)


def pack(ctx: PlanningContext) -> Packed:
    """The context's arrays for the compiled kernel (kernel.py): the candidate table's, the
    jobs' homes, and the cluster's own (cluster_tables, shared and read-only)."""
    table, tables = ctx.table, ctx.tables
    J = len(ctx.job_ids)
    home, home_g = ctx.home, ctx.home_g
    # Moving a running job to another node of its own configuration pays the restart overhead
    # (for every candidate at once; Placement.moved_to sets the flag of a placed job).
    # (each candidate's own overhead where profiles give start-ups)
    overhead = ctx.overhead if table.cover is None else table.cover
    cmov = table.real & move_pays_overhead(overhead, ctx.home_type[:, None], home_g[:, None],
                                           table.ct, table.cg)
    restart_left = ctx.restart_left.reshape(J, 1)
    mtime = np.where(cmov, moved_time(table.ctime, restart_left, overhead), table.ctime)
    return Packed(table.ct, table.cg, table.ctime, table.cen, cmov, mtime, table.nc, table.meets,
                  home, home_g, np.array(ctx.due, float), np.array(ctx.weight, float),
                  ctx.wait_penalties, tables.k_node_type, tables.k_node_cap,
                  tables.k_power, tables.k_type_capacity, tables.k_type_nodes,
                  tables.k_type_start, table.cw)
