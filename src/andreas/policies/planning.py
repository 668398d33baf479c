"""Per-snapshot planning tables shared by every policy: candidate configurations and their
run-time and energy estimates, and the cluster as indexable lists (the greedy pass that places
jobs on them is kernel.py's, called through passes.py).

Built once per decision as flat lists and arrays indexed by job and node, so the greedy's inner
loop does no dictionary look-ups of model objects. What depends on the cluster and the profiles
alone (node lists, power table, hostable configurations) is cluster_tables.py's, built once per
cluster and shared read-only by its decisions.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property, partial
from operator import attrgetter
from typing import NamedTuple

import numpy as np

from ..cost import run_energy_cost, tardiness_costs
from .base import Plan, Snapshot
from .cluster_tables import ProfileRows, tables_for

_JOB, _ASSIGNMENT, _REMAINING = attrgetter("job"), attrgetter("assignment"), \
    attrgetter("remaining_epochs")
_STARTED, _RESTART_LEFT = attrgetter("started"), attrgetter("restart_remaining_s")
_JOB_ID, _DUE, _WEIGHT = attrgetter("job_id"), attrgetter("due_date"), \
    attrgetter("tardiness_weight")
_PROFILE = attrgetter("job.profile")

WAITING_PENALTY = 100.0
"""Proxy cost factor on a waiting job's lateness if it ran on its slowest configuration."""


class Candidate(NamedTuple):
    """One allowed configuration of one job, with the policy's estimates for it. A named
    tuple: a decision on a long queue makes millions, and a frozen dataclass took ten times
    as long to construct."""

    gpu_type: int  # index into PlanningContext.type_names
    gpus: int
    time_s: float  # remaining run time on it, restart overhead included
    energy_eur: float  # energy cost of that whole remaining run (node alone)
    meets_due: bool


def candidates(ct: list, cg: list, ctime: list, cen: list, meets: list) -> list[Candidate]:
    """Candidates from parallel lists of their fields, built in C (`tuple.__new__` on each
    zipped row): a namedtuple's own constructor is a Python function, and a replay makes
    hundreds of thousands of candidates per minute."""
    return list(map(partial(tuple.__new__, Candidate), zip(ct, cg, ctime, cen, meets)))


def move_pays_overhead(overhead, home_type, home_gpus, gpu_type, gpus):
    """Whether a job running on a node of `home_type` with `home_gpus` GPUs (home_type -1: it
    waits) pays the restart overhead again when its candidate (`gpu_type`, `gpus`) runs on
    another node: only when its configuration is unchanged, since the candidates of other
    configurations include the overhead already (stops_job: any move restarts). Elementwise on
    numpy arrays too (kernel.pack)."""
    return (overhead > 0) & (home_type >= 0) & (gpus == home_gpus) & (gpu_type == home_type)


def moved_time(time_s, restart_left_s, overhead):
    """Run time of a candidate (`time_s`, counting `restart_left_s` of an unfinished restart
    on its node) when moved: a whole restart instead. Elementwise on numpy arrays too."""
    return time_s - restart_left_s + overhead


class CandidateTable:
    """Every job's candidates as [jobs, candidates] arrays, each row in the order policies try
    them: the cheapest that meets the due date first, then the rest fastest first.

    Built with numpy for all jobs at once (the same arithmetic as a per-candidate loop; with a
    tariff, each energy is the price integrated over the candidate's own run). `Candidate`
    objects are made only for the rows a policy looks at, so the baselines and the compiled
    kernel never pay for them.
    """

    def __init__(self, ct, cg, ctime, cen, meets, nc) -> None:
        self.ct, self.cg, self.ctime, self.cen, self.meets, self.nc = ct, cg, ctime, cen, meets, nc
        self._shapes: dict[int, tuple[list[int], list[int]]] = {}
        self.real = np.arange(ct.shape[1])[None, :] < nc[:, None]  # entries that are candidates
        if len(nc) and ct.shape[1]:  # NaN for a job with no candidate (no warning)
            none = ~self.real.any(axis=1)
            self.tmin = np.where(none, np.nan, np.where(self.real, ctime, np.inf).min(axis=1))
            self.tmax = np.where(none, np.nan, np.where(self.real, ctime, -np.inf).max(axis=1))
        else:  # no job, or no job with a configuration this cluster hosts
            self.tmin = self.tmax = np.full(len(nc), np.nan)

    @classmethod
    def build(cls, ctx: "PlanningContext", rows: "ProfileRows") -> "CandidateTable":
        """All jobs at once: each job's row gathers its profile's hostable configurations
        (`rows`: the cluster's table of them, cluster_tables.ProfileRows)."""
        views, now = ctx.views, ctx.now
        J = len(views)
        pidx, (p_type, p_gpus, p_spe, p_watts, p_n) = rows.lookup(
            list(map(_PROFILE, views)))
        # at least one column (ProfileRows): with none (no job has a configuration the
        # cluster can host, e.g. non-preemptible jobs hold the GPUs it needs) every row is
        # padding, and the passes' indexing by candidate column still has a column to read
        C = p_type.shape[1]
        rem = np.fromiter(map(_REMAINING, views), float, J)
        # Restart overhead on a new start: only for jobs that have run. The table orders and
        # scores jobs against each other; charging a waiting job's first start here (as the
        # holds and the forecast do, Snapshot.first_start_overhead) made it look more urgent
        # than an identical job just started, which the plan then paused for it: a wasted
        # restart (the live service, under load). A first start's overhead is the same for
        # each of the job's candidates, so it does not change which one a job gets.
        started = np.fromiter(map(_STARTED, views), np.bool_, J)
        restart_left = ctx.restart_left
        due = np.array(ctx.due, float)
        cur_type, cur_gpus = ctx.home_type, ctx.home_g
        ct, cg, nc = p_type[pidx], p_gpus[pidx], p_n[pidx]
        real = np.arange(C)[None, :] < nc[:, None]
        # run time: epochs × s/epoch, + the restart overhead of a started job, or what is left
        # of it on its current configuration (the per-candidate loop's arithmetic, elementwise)
        run = rem[:, None] * p_spe[pidx]
        times = np.where(started[:, None], run + ctx.overhead, run)
        on_current = (ct == cur_type[:, None]) & (cg == cur_gpus[:, None])
        times = np.where(on_current, run + restart_left[:, None], times)
        if ctx.cluster.tariff is None:
            energy = p_watts[pidx] * ((now + times) - now) * ctx.cluster.eur_per_joule()
        else:  # the price integrated over each candidate's own run
            energy = np.zeros((J, C))
            names = ctx.type_names
            for j, c in zip(*np.nonzero(real)):
                energy[j, c] = run_energy_cost(ctx.cluster, names[ct[j, c]], int(cg[j, c]),
                                               float(times[j, c]), now)
        ok = (now + times <= due[:, None]) & real
        # (0, energy, time) when on time, else (1, time, energy), padding last; stable, as the
        # list sort it replaces
        miss = np.where(real, (~ok).astype(np.int64), 2)
        order = np.lexsort((np.where(ok, times, energy), np.where(ok, energy, times), miss),
                           axis=-1)
        # each row's entries in its order (np.take_along_axis, on one flat index)
        flat = (order + (np.arange(J) * C)[:, None]).ravel()

        def take(a: np.ndarray) -> np.ndarray:
            return a.ravel()[flat].reshape(J, C)

        zero = ~take(real)
        ctime = np.where(zero, 0.0, take(times))
        cen = np.where(zero, 0.0, take(energy))
        return cls(np.where(zero, 0, take(ct)), np.where(zero, 0, take(cg)), ctime, cen,
                   take(ok), nc)

    def shape(self, j: int) -> tuple[list[int], list[int]]:
        """Job j's candidates' GPU types and counts as plain lists, made once: a step that
        filters rows by them (resizing) makes a Candidate only of what it keeps
        (`candidate`), not of the whole row."""
        shape = self._shapes.get(j)
        if shape is None:
            n = int(self.nc[j])
            shape = self._shapes[j] = (self.ct[j, :n].tolist(), self.cg[j, :n].tolist())
        return shape

    def candidate(self, j: int, c: int) -> Candidate:
        """Job j's candidate in column c, as `row` would give it."""
        return Candidate(int(self.ct[j, c]), int(self.cg[j, c]), float(self.ctime[j, c]),
                         float(self.cen[j, c]), bool(self.meets[j, c]))

    def row(self, j: int) -> list[Candidate]:
        """Job j's candidates, as Candidate objects."""
        n = int(self.nc[j])
        return candidates(self.ct[j, :n].tolist(), self.cg[j, :n].tolist(),
                          self.ctime[j, :n].tolist(), self.cen[j, :n].tolist(),
                          self.meets[j, :n].tolist())


class _LazyRows(Sequence):
    """ctx.cands for a table: row j becomes a list of Candidate objects when first read."""

    def __init__(self, table: CandidateTable) -> None:
        self.table = table
        self.rows: list[list[Candidate] | None] = [None] * len(table.nc)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, j):
        row = self.rows[j]
        if row is None:
            row = self.rows[j] = self.table.row(j)
        return row


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
        self.current: list[tuple[int, int] | None] = [
            None if a is None else (node_index[a.node], a.gpus)
            for a in map(_ASSIGNMENT, views)]
        J = len(views)
        # where each job runs (node, -1: waiting; its GPU count there, 0) and what is left of
        # its restart there, as arrays: the candidate table and the kernel read them
        self.home = np.array([-1 if c is None else c[0] for c in self.current], np.int64)
        self.home_g = np.array([0 if c is None else c[1] for c in self.current], np.int64)
        self.home_type = np.where(self.home >= 0, tables.k_node_type[np.maximum(self.home, 0)],
                                  -1)  # the GPU type it runs on, -1 waiting
        self.restart_left = np.fromiter(map(_RESTART_LEFT, views), float, J)
        self.overhead = max(cluster.restart_overhead_s, plan_restart_s)
        self.cluster = cluster
        self._orders: dict[str, list[int]] = {}  # `ordered`
        self.table = CandidateTable.build(self, tables.profile_rows(snapshot.profiles))
        self.cands: Sequence[list[Candidate]] = _LazyRows(self.table)
        self.tmin = self.table.tmin.tolist()
        self.tmax = self.table.tmax.tolist()
        if cluster.tariff is not None:  # plan scores price energy at the mean over the horizon
            # (jobs with no configuration here, NaN, left out: a baseline's free GPUs may
            # host none of a waiting job's)
            horizon = max((t for t in self.tmax if t == t), default=0.0)
            self.eur_per_joule = cluster.eur_per_joule(self.now, self.now + horizon)
        self.type_capacity = tables.type_capacity
        self.wait_penalties = WAITING_PENALTY * tardiness_costs(
            np.array(self.weight), self.now + self.table.tmax, np.array(self.due))
        self.wait_penalty = self.wait_penalties.tolist()

    @cached_property
    def packed(self):
        """This context as the compiled kernel's arrays (`kernel.pack`), built once: the
        Randomized Greedy's passes and the plan scores of the plain path share them."""
        from .kernel import pack

        return pack(self)

    @cached_property
    def pressure_rank(self) -> list[int]:
        """Every job's rank in the pressure order (look-ahead scoring and local search only,
        so the baselines do not pay for the sort)."""
        rank = [0] * len(self.views)
        for r, j in enumerate(self.ordered("pressure")):
            rank[j] = r
        return rank

    @cached_property
    def pressure_ranks(self) -> np.ndarray:
        """`pressure_rank` as the kernel's array (the look-ahead score's)."""
        return np.array(self.pressure_rank, np.int64)

    def ordered(self, order: str) -> list[int]:
        """Every job in the named order (orderings.ORDERINGS), sorted once per context: the
        passes' starting order and the look-ahead's pressure ranks are often the same sort.
        A new list each call (callers may reorder it)."""
        from .orderings import ORDERINGS, adaptive_choice

        if order == "adaptive":
            order = adaptive_choice(self, list(range(len(self.views))))
        cached = self._orders.get(order)
        if cached is None:
            cached = self._orders[order] = ORDERINGS[order](self, list(range(len(self.views))))
        return list(cached)

    def busy_after(self, placed: list[tuple[int, Candidate] | None]) -> list[int]:
        """Busy GPUs per node once every placed job holds its GPUs."""
        busy = [0] * len(self.node_cap)
        for e in placed:
            if e is not None:
                busy[e[0]] += e[1].gpus
        return busy

    def free_after(self, placed: list[tuple[int, Candidate] | None]) -> list[int]:
        """Free GPUs per node once every placed job holds its GPUs."""
        return [cap - b for cap, b in zip(self.node_cap, self.busy_after(placed))]

    # ------------------------------------------------------------------ placement
    def as_placed(self, j: int, node: int, cand: Candidate) -> Candidate:
        """The candidate as run on `node`: moving a running job to another node with the same
        configuration also pays the restart overhead, in time and energy."""
        current = self.current[j]
        if current is None or current[0] == node or not self.move_pays_overhead(j, cand):
            return cand
        time_s = self.moved_time(j, cand)
        return Candidate(cand.gpu_type, cand.gpus, time_s,
                         run_energy_cost(self.cluster, self.type_names[cand.gpu_type],
                                         cand.gpus, time_s, self.now),
                         self.now + time_s <= self.due[j])

    def move_pays_overhead(self, j: int, cand: Candidate) -> bool:
        """Would running `cand` on a node other than the job's own add a restart?"""
        current = self.current[j]
        home_type = -1 if current is None else self.node_type[current[0]]
        return bool(move_pays_overhead(self.overhead, home_type,
                                       0 if current is None else current[1], cand.gpu_type,
                                       cand.gpus))

    def moved_time(self, j: int, cand: Candidate) -> float:
        return moved_time(cand.time_s, self.views[j].restart_remaining_s, self.overhead)

    def to_plan(self, placed: list[tuple[int, Candidate] | None]) -> Plan:
        """`placed` as a plan (each place's Assignment made once per cluster)."""
        assignment = self.tables.assignment
        return {self.job_ids[j]: assignment(e[0], e[1].gpus)
                for j, e in enumerate(placed) if e is not None}
