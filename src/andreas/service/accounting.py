"""What the service's jobs have cost so far, from the runs in its store: the busy stretches of
each run (restart, then run) on the cluster's power tables, as the simulator accounts
`segments.csv`, plus the tardiness of completed jobs and the GPUs' own energy where NVML
measured it. The API, the dashboard, the metrics and the validation read it; the scheduler
only records runs.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

from ..cost import tardiness_cost
from ..model import Cluster, Job, Node, config_key
from .db import run_places
from .energy import modelled_costs, run_segments
from .states import JobState
from .store import Store
from .store import jobs as job_rows


class Accounting:
    """Costs so far of the jobs in `store` on the nodes `cluster()` returns, at `clock()`."""

    def __init__(self, store: Store, cluster: Callable[[], Cluster],
                 clock: Callable[[], float] = time.time,
                 own_power: Callable[[Any], Mapping[tuple[str, int], float]] = lambda job: {},
                 own_startup: Callable[[Any], Mapping[tuple[str, int], float]] = lambda job: {}
                 ) -> None:
        """`own_power(job)`: a job's measured draw per GPU by configuration, where the
        operator's profile gives one (`snapshots.operator_values`); its runs are charged that
        while they train. `own_startup(job)`: its start-up by configuration, likewise, which
        its runs begin with instead of the cluster's `restart_overhead_s`."""
        self.store = store
        self.cluster = cluster
        self.clock = clock
        self.own_power = own_power
        self.own_startup = own_startup

    def segments(self, runs: Sequence[Any], now: float,
                 jobs: Sequence[Any] | None = None) -> tuple[Cluster, list]:
        """The cluster for accounting and the busy stretches (restart, then run) of `runs` up
        to `now`: what the modelled energy and the power over time are computed from. A run
        is a RunRow or a row of its columns; `jobs`, rows with the runs' jobs' profiles (read
        from the store when not given), give their own draws."""
        cluster = self.cluster_for(runs)
        if jobs is None:
            with self.store.session() as s:
                jobs = job_rows.profile_rows(s, (r.job_id for r in runs))
        power = {j.id: own for j in jobs if (own := self.own_power(j))}
        startup = {j.id: own for j in jobs if (own := self.own_startup(j))}
        return cluster, [seg for r in runs if (r.ended_at or now) > r.started_at
                         for seg in self._run_segments(cluster, r, now, power, startup)]

    @staticmethod
    def _run_segments(cluster: Cluster, r: Any, now: float, power: Mapping[str, Mapping],
                      startup: Mapping[str, Mapping]) -> list:
        """One run's stretches: on each node it holds (a gang's every node, as the simulator
        charges it), its epochs counted once, on rank 0's node."""
        places = run_places(r)
        config = config_key(r.gpu_type, len(r.gpu_indices), len(places))
        return [seg for rank, (node, indices) in enumerate(places)
                for seg in run_segments(
                    cluster, r.job_id, node, r.gpu_type, len(indices), r.started_at,
                    r.ended_at if r.ended_at is not None else now,
                    (r.epochs_at_end or 0.0) - r.epochs_at_start if rank == 0 else 0.0,
                    power.get(r.job_id, {}).get(config), startup.get(r.job_id, {}).get(config))]

    def measured(self) -> dict:
        """Costs so far from the runs' busy intervals (modelled energy) and completions."""
        now = self.clock()
        with self.store.session() as s:
            jobs, runs = job_rows.cost_rows(s)
        cluster, segments = self.segments(runs, now, jobs)
        job_objs = [Job(j.id, j.submitted_at, j.due_date, j.weight, float(j.epochs), "x")
                    for j in jobs]
        costs = modelled_costs(cluster, job_objs, segments)
        nvml: dict[str, float] = {}
        for r in runs:
            if r.energy_j is not None:
                nvml[r.job_id] = nvml.get(r.job_id, 0.0) + r.energy_j
        out: dict[str, dict[str, Any]] = {}
        grams = costs.job_emissions_g  # with the grid's intensity (cluster.yaml)
        for j in jobs:
            tardiness = (tardiness_cost(j.weight, j.completed_at, j.due_date)
                         if j.state == JobState.COMPLETED and j.completed_at else 0.0)
            energy = costs.job_energy_cost.get(j.id, 0.0)
            out[j.id] = {"energy_cost": energy, "tardiness_cost": tardiness,
                         "total_cost": energy + tardiness,
                         "gpu_energy_j_nvml": nvml.get(j.id)}
            if grams is not None:
                kg = out[j.id]["emissions_kg"] = grams.get(j.id, 0.0) / 1000.0
                if cluster.carbon_price:  # priced: in the job's total, as in the objective
                    out[j.id]["carbon_cost"] = cluster.carbon_price * kg / 1000.0
                    out[j.id]["total_cost"] += out[j.id]["carbon_cost"]
        totals: dict[str, Any] = {"jobs": out, "energy_cost": costs.energy_cost,
                                  "energy_kwh": costs.energy_joules / 3.6e6,
                                  "tardiness_cost": sum(v["tardiness_cost"]
                                                        for v in out.values())}
        if costs.emissions_g is not None:
            totals["emissions_kg"] = costs.emissions_g / 1000.0
            totals["carbon_cost"] = costs.carbon_cost
        return totals

    def cluster_for(self, runs: Sequence[Any]) -> Cluster:
        """The cluster's nodes, plus any node that ran a job and has since left (Ray)."""
        cluster = self.cluster()
        known = {n.name for n in cluster.nodes}
        gone: dict[str, Node] = {}
        for r in runs:
            for node, indices in run_places(r):
                if node not in known:
                    gpus = max(len(indices), gone[node].gpus if node in gone else 1)
                    gone[node] = Node(node, r.gpu_type, gpus)
        return replace(cluster, nodes=tuple(cluster.nodes) + tuple(gone.values()))
