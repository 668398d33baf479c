"""The hindsight lower bound: a time-indexed MILP of the whole offline problem.

With every arrival known in advance and preemption allowed at any instant, no online policy can
cost less than the optimum of this relaxation (so it is a lower bound on every policy's total
cost on the scenario):

- time is cut into slots of length Δ; x[j,c,n,s] ∈ [0,1] is the share of slot s during which job
  j runs configuration c on node n (a job may time-share, so finishing mid-slot is allowed);
- a job runs at most one configuration at a time (Σ x over c, n ≤ 1 per slot), never before it
  is submitted (in its submission slot only for the time left after it), and its work is done:
  Σ x·Δ / seconds_per_epoch ≥ epochs;
- a node's average busy GPUs over a slot, u = Σ g·x, is at most its GPU count; its energy over
  the slot is at least Δ·L(u), where L is the convex minorant of its power table with L(0) = 0
  (Jensen's inequality makes this a valid lower bound for any schedule inside the slot), and at
  least Δ·(A·on + B·u) for every line A + B·b below the power table at b = 1..k, where `on` ≥
  each job's share of the slot on the node (the node is powered at least that long);
- r[j,s] ∈ {0,1} marks slots in which j runs; its completion is at least the start of each such
  slot and at least submit + its fastest run time; tardiness ω·max(0, completion − due).

Restart overheads are ignored (they only add cost), so the bound stays valid with them. A GPU
type with an idle draw (nodes that stay powered) is modelled by its draw above idle, plus the
idle draw of every node until the earliest time the last job could finish.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from ..errors import AndreasError
from ..io import feasible_configs
from ..model import Scenario
from .highs import Milp, solve


def convex_minorant(power: tuple[float, ...], *, through_zero: bool = True
                    ) -> list[tuple[float, float]]:
    """Pieces (slope, intercept) of the largest convex function below the points
    (0, 0), (1, P1), ..., (k, Pk) (or only (1, P1)...(k, Pk) when `through_zero` is False)."""
    pts = ([(0.0, 0.0)] if through_zero else []) + [(float(b), float(p))
                                                   for b, p in enumerate(power, start=1)]
    if len(pts) == 1:
        return [(0.0, pts[0][1])]
    hull: list[tuple[float, float]] = []
    for p in pts:  # lower hull (Andrew's monotone chain)
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            if (x2 - x1) * (p[1] - y1) - (y2 - y1) * (p[0] - x1) <= 0:
                hull.pop()
            else:
                break
        hull.append(p)
    pieces = []
    for (x1, y1), (x2, y2) in zip(hull, hull[1:]):
        slope = (y2 - y1) / (x2 - x1)
        pieces.append((slope, y1 - slope * x1))
    return pieces


@dataclass(frozen=True)
class BoundResult:
    lower_bound: float  # EUR: proven lower bound on any policy's total cost
    solution_cost: float  # EUR: the relaxation's best solution found (equal when optimal)
    optimal: bool
    slot_s: float
    slots: int
    schedule: list[dict]  # the relaxed schedule: slot, job, node, gpus, share of the slot


def hindsight_bound(scenario: Scenario, *, slots: int = 120, time_limit: float = 120.0,
                    horizon: float | None = None) -> BoundResult:
    cluster, profiles, jobs = scenario.cluster, scenario.profiles, scenario.jobs
    if cluster.tariff is not None:
        raise AndreasError("the hindsight bound assumes one energy price; this scenario has a "
                           "time-varying energy_price (not supported by `bound` yet)")
    configs = {j.job_id: [(t, g, profiles.configs(j.profile)[(t, g)]) for t, g in
                          feasible_configs(cluster, profiles.configs(j.profile))] for j in jobs}
    t_min = {j.job_id: min(spe * j.epochs for _, _, spe in configs[j.job_id]) for j in jobs}
    if horizon is None:
        # Long enough for every schedule that matters: after the last arrival, idle time costs
        # nothing and gains nothing, so an optimal schedule can be compacted to run its jobs one
        # after another, each at most its slowest run time.
        horizon = max(j.submit_time for j in jobs) + sum(
            max(spe * j.epochs for _, _, spe in configs[j.job_id]) for j in jobs)
    delta = horizon / slots
    eur = cluster.eur_per_joule()
    m = Milp()
    x: dict[tuple[str, int, int, int], int] = {}
    share = {}
    # Columns indexed once by job and slot, and by node and slot (in creation order), so that
    # building each row does not scan every column.
    job_slot: dict[tuple[str, int], list[int]] = defaultdict(list)
    node_slot: dict[tuple[int, int], list[tuple[str, int, int]]] = defaultdict(list)
    work: dict[str, list[tuple[int, float]]] = defaultdict(list)  # (column, epochs per share)
    for j in jobs:
        first = int(math.floor(j.submit_time / delta))
        for s in range(first, slots):
            avail = min(1.0, ((s + 1) * delta - j.submit_time) / delta)
            share[(j.job_id, s)] = avail
            for c, (t, g, spe) in enumerate(configs[j.job_id]):
                for n, node in enumerate(cluster.nodes):
                    if node.gpu_type == t and node.gpus >= g:
                        col = x[(j.job_id, c, n, s)] = m.var(0.0, integer=False)
                        job_slot[(j.job_id, s)].append(col)
                        node_slot[(n, s)].append((j.job_id, c, col))
                        work[j.job_id].append((col, delta / spe))
    # per job: work done, one configuration at a time, completion and tardiness
    for j in jobs:
        jid = j.job_id
        m.row(j.epochs, 1e30, [col for col, _ in work[jid]], [e for _, e in work[jid]])
        completion = m.var(0.0, upper=1e30, integer=False)
        tard = m.var(j.tardiness_weight, upper=1e30, integer=False)
        m.row(j.submit_time + t_min[jid], 1e30, [completion], [1.0])
        m.row(-j.due_date, 1e30, [tard, completion], [1.0, -1.0])  # tard ≥ C − due
        for s in range(int(math.floor(j.submit_time / delta)), slots):
            cols = job_slot[(jid, s)]
            m.row(-1e30, share[(jid, s)], cols, [1.0] * len(cols))
            runs = m.var(0.0)  # r[j,s]: j runs in slot s
            m.row(0.0, 1e30, [runs] + cols, [1.0] + [-1.0] * len(cols))
            # C ≥ s·Δ·r + Δ·Σx: it cannot finish before the slot starts plus its time run in it
            m.row(0.0, 1e30, [completion, runs] + cols,
                  [1.0, -s * delta] + [-delta] * len(cols))
    # per node and slot: capacity and energy
    # Energy above the idle draw; the idle draw itself is paid by every node at least until the
    # last job can possibly finish (added as a constant below).
    extra = {t: tuple(gt.extra_w(b) for b in range(1, len(gt.node_power_w) + 1))
             for t, gt in cluster.gpu_types.items()}
    pieces = {t: convex_minorant(p) for t, p in extra.items()}
    busy_pieces = {t: convex_minorant(p, through_zero=False) for t, p in extra.items()}
    earliest_end = max(j.submit_time + t_min[j.job_id] for j in jobs)
    idle_floor = sum(cluster.gpu_types[n.gpu_type].idle_w for n in cluster.nodes) \
        * earliest_end * eur
    for n, node in enumerate(cluster.nodes):
        for s in range(slots):
            entries = node_slot.get((n, s), [])
            cols = [col for _, _, col in entries]
            gpus = [float(configs[k][c][1]) for k, c, _ in entries]
            if not cols:
                continue
            m.row(-1e30, float(node.gpus), cols, gpus)
            energy = m.var(eur * delta, upper=1e30, integer=False)  # mean node watts
            for slope, intercept in pieces[node.gpu_type]:
                m.row(intercept, 1e30, [energy] + cols, [1.0] + [-slope * g for g in gpus])
            on = m.var(0.0, integer=False)  # share of the slot the node is powered, at least
            by_job: dict[str, list[int]] = {}
            for k, _, col in entries:
                by_job.setdefault(k, []).append(col)
            for jcols in by_job.values():
                m.row(0.0, 1e30, [on] + jcols, [1.0] + [-1.0] * len(jcols))
            for slope, intercept in busy_pieces[node.gpu_type]:
                m.row(0.0, 1e30, [energy, on] + cols,
                      [1.0, -intercept] + [-slope * g for g in gpus])
    result = solve(m, time_limit=time_limit, threads=1)
    schedule = []
    if result.values is not None:
        for (k, c, n, s), col in x.items():
            v = result.values[col]
            if v > 1e-9:
                t, g, _ = configs[k][c]
                schedule.append({"slot": s, "start": s * delta, "end": (s + 1) * delta,
                                 "job_id": k, "node": cluster.nodes[n].name, "gpu_type": t,
                                 "gpus": g, "share": v})
        schedule.sort(key=lambda r: (r["slot"], r["node"], r["job_id"]))
    return BoundResult(idle_floor + (result.bound if not result.optimal else result.objective),
                       idle_floor + result.objective, result.optimal, delta, slots, schedule)
