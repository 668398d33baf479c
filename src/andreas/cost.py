"""The cost model, in one place: node energy by busy GPUs, price and PUE, and tardiness.

The simulator's bookkeeping, the policies' estimates and the independent recomputation from
`segments.csv` all call these functions, so they cannot disagree on the formulas.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

import numpy as np

from .model import Cluster, GpuType, Job, Profiles, Segment


def tardiness_cost(weight: float, completion: float, due: float) -> float:
    """EUR owed for finishing after the due date: weight × max(0, completion − due)."""
    return weight * max(0.0, completion - due)


def tardiness_costs(weight: np.ndarray, completion: np.ndarray, due: np.ndarray) -> np.ndarray:
    """`tardiness_cost` elementwise, to the bit (a completion of NaN, unknown, owes 0 as the
    scalar's max(0.0, nan) does)."""
    return weight * np.fmax(0.0, completion - due)


def carbon_cost(cluster: Cluster, grams: float) -> float:
    """EUR the objective charges for emitting `grams` CO2eq: the cluster's carbon price (EUR
    per tonne) x tonnes. Policies meet the same price per kWh as a part of their energy price
    (`Cluster.as_planned`)."""
    return cluster.carbon_price * grams * 1e-6


def node_draw_w(kind: GpuType, busy: int, saved_w: float = 0.0) -> float:
    """What a node of `kind` draws with `busy` busy GPUs (its idle draw with none), less
    `saved_w`, the watts its jobs' power limits and cheaper restarts save. The one node-draw
    rule of the simulator, the accounting from segments and the power figure."""
    return kind.power_w(busy) - saved_w if busy > 0 else kind.idle_w


def job_draw_w(kind: GpuType, busy: int, gpus: int, saved_w: float = 0.0) -> float:
    """A job's share of its node's draw: `gpus` of the node's `busy` GPUs take that share of
    the table's draw, less the watts the job itself saves (`saved_w`)."""
    return kind.power_w(busy) * gpus / busy - saved_w


def own_power_saved_w(kind: GpuType, gpus: int, gpu_power_w: float | None) -> float:
    """Watts a job whose GPUs each draw `gpu_power_w` (its profile's measured draw) draws below
    the table's share on `gpus` GPUs of `kind`: gpus x (the table's draw per busy GPU - its
    own); negative for a job that draws more than the table says. 0 without its own draw (the
    paper's model). The simulator, the policies' estimates and the service's accounting all
    take a job's own draw through this one rule, as a `saved_w` like a power limit's."""
    if gpu_power_w is None:
        return 0.0
    return gpus * (kind.busy_gpu_w - gpu_power_w)


def job_saved_w(cluster: Cluster, profiles: Profiles, profile: str, gpu_type: str, gpus: int,
                limit_w: float | None = None, nodes: int = 1) -> float:
    """Watts a job of `profile` on `gpus` GPUs of `gpu_type` at power limit `limit_w` (None:
    the default) draws below the power table's share while it trains: what its power limit
    saves plus what its own measured draw differs by (`own_power_saved_w`). A gang over
    `nodes` nodes: on each of them (gangs run at the default limit)."""
    if nodes != 1:
        return own_power_saved_w(cluster.gpu_types[gpu_type], gpus,
                                 profiles.gpu_power_w(profile, (gpu_type, gpus, nodes)))
    config = (gpu_type, gpus)
    return (profiles.saved_w(profile, config, limit_w) * gpus
            + own_power_saved_w(cluster.gpu_types[gpu_type], gpus,
                                profiles.gpu_power_w(profile, config)))


def run_energy_cost(cluster: Cluster, gpu_type: str, gpus: int, seconds: float,
                    start: float = 0.0, saved_w: float = 0.0) -> float:
    """EUR for running `seconds` from `start` on `gpus` GPUs of a node of `gpu_type`, alone on
    that node.

    This is the estimate policies use to rank configurations: the job's node draws
    node_power_w[gpus-1] for the whole run, less the idle draw it would pay anyway (0 W by
    default: nodes are off when idle), less what the job itself saves (`job_saved_w`). With a
    tariff, the price over the run is integrated.
    """
    return cluster.energy_eur(cluster.gpu_types[gpu_type].extra_w(gpus) - saved_w, start,
                              start + seconds)


@dataclass(frozen=True)
class CostBreakdown:
    """Costs recomputed from segments: totals and per-job shares (EUR)."""

    energy_cost: float
    tardiness_cost: float
    energy_joules: float
    job_energy_cost: Mapping[str, float]
    job_tardiness_cost: Mapping[str, float]
    completion: Mapping[str, float]
    emissions_g: float | None = None  # with the grid's carbon intensity
    job_emissions_g: Mapping[str, float] | None = None
    carbon_cost: float = 0.0  # the carbon price x the emissions
    window_emissions_g: Mapping[int, float] | None = None  # with a carbon cap: per window k

    def cap_summary(self, cap_kg: float) -> dict[str, float]:
        """The worst window's emissions and the total over `cap_kg` (kg), as a run reports
        them (`carbon_cap_worst_kg`, `carbon_cap_over_kg`)."""
        grams = list((self.window_emissions_g or {}).values())
        return {"carbon_cap_worst_kg": max(grams, default=0.0) / 1000.0,
                "carbon_cap_over_kg": sum(max(0.0, g - cap_kg * 1000.0) for g in grams) / 1000.0}

    @property
    def total_cost(self) -> float:
        return self.energy_cost + self.carbon_cost + self.tardiness_cost


def account_segments(cluster: Cluster, jobs: Iterable[Job],
                     segments: Iterable[Segment]) -> CostBreakdown:
    """Recompute every cost from the segments alone.

    For each node, the busy-GPU count is piecewise constant between segment boundaries; over
    each piece the node draws node_power_w[b-1] and each job on it pays the share gpus/b; a job
    under a GPU power limit draws its segment's `saved_w` less (from its share and the node's).
    A job's completion is the end of its last run segment. A GPU type with an idle draw charges
    it (to the cluster, not to a job) whenever its nodes have no busy GPU between time 0 and the
    last completion.
    """
    by_node: dict[str, list[Segment]] = defaultdict(list)
    completion: dict[str, float] = {}
    for seg in segments:
        by_node[seg.node].append(seg)
        if seg.phase == "run":
            completion[seg.job_id] = max(completion.get(seg.job_id, 0.0), seg.end)
    types = {n.name: cluster.gpu_types[n.gpu_type] for n in cluster.nodes}
    eur_per_j = cluster.eur_per_joule()
    job_joules: dict[str, float] = defaultdict(float)
    job_eur: dict[str, float] = defaultdict(float)  # with a tariff: priced piece by piece
    job_g: dict[str, float] = defaultdict(float)  # with a carbon intensity
    total_joules = total_eur = total_g = 0.0
    priced = cluster.energy_eur if cluster.tariff is not None else None
    emits = cluster.carbon_g if cluster.carbon is not None else None
    emits_total = emits  # the cluster's draw; with a carbon cap, also counted per window
    windows: dict[int, float] | None = None
    if emits is not None and cluster.carbon_cap is not None:
        windows = defaultdict(float)
        emits_total = _windowed(emits, cluster.carbon_cap.window_s, windows)
    end = max(completion.values(), default=0.0)
    for node in cluster.nodes:  # idle draw: the whole span, less the busy time added below
        total_joules += types[node.name].idle_w * end
        if priced:
            total_eur += priced(types[node.name].idle_w, 0.0, end)
        if emits_total:
            total_g += emits_total(types[node.name].idle_w, 0.0, end)
    for node, segs in by_node.items():
        # Sweep line over segment boundaries; ends sort before starts at the same instant.
        events = sorted([(s.start, 1, i) for i, s in enumerate(segs)]
                        + [(s.end, 0, i) for i, s in enumerate(segs)])
        active: dict[int, Segment] = {}
        busy, saved, last = 0, 0.0, None
        for t, is_start, i in events:
            if busy and last is not None and t > last:
                # A job under a power limit draws `saved_w` less than its share of the table.
                watts = node_draw_w(types[node], busy, saved)
                total_joules += (watts - types[node].idle_w) * (t - last)
                for s in active.values():
                    share = job_draw_w(types[node], busy, s.gpus, s.saved_w)
                    job_joules[s.job_id] += share * (t - last)
                    if priced:
                        job_eur[s.job_id] += priced(share, last, t)
                    if emits:
                        job_g[s.job_id] += emits(share, last, t)
                if priced:
                    total_eur += priced(watts - types[node].idle_w, last, t)
                if emits_total:
                    total_g += emits_total(watts - types[node].idle_w, last, t)
            last = t
            if is_start:
                active[i] = segs[i]
                busy += segs[i].gpus
                saved += segs[i].saved_w
            else:
                gone = active.pop(i)
                busy -= gone.gpus
                saved = saved - gone.saved_w if active else 0.0  # no rounding residue
    job_tardiness: dict[str, float] = {}
    for job in jobs:
        if job.job_id in completion:
            job_tardiness[job.job_id] = tardiness_cost(job.tardiness_weight,
                                                       completion[job.job_id], job.due_date)
    return CostBreakdown(
        energy_cost=total_eur if priced else total_joules * eur_per_j,
        tardiness_cost=sum(job_tardiness.values()),
        energy_joules=total_joules,
        job_energy_cost=dict(job_eur) if priced else {j: e * eur_per_j
                                                      for j, e in job_joules.items()},
        job_tardiness_cost=job_tardiness,
        completion=completion,
        emissions_g=total_g if emits else None,
        job_emissions_g=dict(job_g) if emits else None,
        carbon_cost=carbon_cost(cluster, total_g),
        window_emissions_g=None if windows is None else dict(windows),
    )


def _windowed(emits: Callable[[float, float, float], float], window_s: float,
              windows: dict[int, float]) -> Callable[[float, float, float], float]:
    """`emits(watts, t0, t1)` that also adds what it returns to each carbon-cap window
    [k window_s, (k + 1) window_s) the interval falls in (`windows[k]`, grams): for the
    cluster's draw, not the jobs' shares of it."""
    def split(watts: float, t0: float, t1: float) -> float:
        total = 0.0
        k = math.floor(t0 / window_s)
        while True:
            a, b = max(t0, k * window_s), min(t1, (k + 1) * window_s)
            if b > a:
                grams = emits(watts, a, b)
                windows[k] += grams
                total += grams
            if (k + 1) * window_s >= t1:
                return total
            k += 1
    return split
