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

A gang (a configuration over n nodes, docs/gangs.md) has its time share y[j,c,s] in the slot
(what its work, its one configuration at a time and its completion count) and node-shares
x[j,c,n,s] ≤ y on each node, n of them in all (Σ_n x = n·y): each node holds its GPUs and
draws for it, and is powered at least that long. A real gang's n nodes run exactly so; the
relaxation may spread the node-shares thinner over more nodes, which only lowers the bound.

Restart overheads are ignored (they only add cost), so the bound stays valid with them. A GPU
type with an idle draw (nodes that stay powered) is modelled by its draw above idle, plus the
idle draw of every node until the earliest time the last job could finish.

`lp=True` gives a bound that scales to 50-200 jobs (a linear programme, no integer variable):

- the binaries r are dropped; a job's completion is bounded instead by its **mean busy time**:
  a job whose work is done at a rate of at most 1/t_min (its fastest run) and whose work has
  mean date M cannot end before M + t_min/2, and M is at least Σ_s (share of its work in slot
  s) × the slot's start (Goemans' bound for preemptive single-machine scheduling, with the
  job's own fastest rate as the machine);
- the horizon H need not hold the optimal schedule: work done after H goes to an **overflow**
  of unlimited length, priced at the least energy per unit of work of its configurations (the
  convex minorant L of a node's table has L(0) = 0, so it is superadditive and a job's share
  of any node's energy is at least L(its GPUs) × its run time) and dated at H. Any schedule
  maps onto the LP at no greater cost, whatever H; a shorter H makes the slots finer.
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
class NodeUnit:
    """Nodes the relaxation plans as one: `count` nodes of `gpus` GPUs of `gpu_type`."""

    name: str
    gpu_type: str
    gpus: int
    count: int


def node_units(cluster, pooled: bool) -> list[NodeUnit]:
    """Each node on its own (the MILP), or the nodes of one GPU type and size pooled (the LP:
    its columns shrink by the nodes per pool). Pooling relaxes the model, so the bound stays
    valid: a pool's capacity is the sum of its nodes' (fragmentation is not seen), its energy
    at least count x L(busy / count) by Jensen's inequality, and a job runs on one node of it
    at a time, so the nodes' powered time is at least each job's share."""
    if not pooled:
        return [NodeUnit(n.name, n.gpu_type, n.gpus, 1) for n in cluster.nodes]
    pools: dict[tuple[str, int], list[str]] = defaultdict(list)
    for n in cluster.nodes:
        pools[(n.gpu_type, n.gpus)].append(n.name)
    return [NodeUnit(names[0] if len(names) == 1 else f"{t}x{g} ({len(names)} nodes)", t, g,
                     len(names)) for (t, g), names in pools.items()]


@dataclass(frozen=True)
class BoundResult:
    lower_bound: float  # EUR: proven lower bound on any policy's total cost
    solution_cost: float  # EUR: the relaxation's best solution found (equal when optimal)
    optimal: bool
    slot_s: float
    slots: int
    schedule: list[dict]  # the relaxed schedule: slot, job, node, gpus, share of the slot


def job_configs(scenario: Scenario, profile: str) -> list[tuple[str, int, int, float]]:
    """(GPU type, GPUs per node, nodes, seconds per epoch) of every configuration of
    `profile` that the cluster can hold: its one-node ones (nodes 1) and its gangs."""
    profiles = scenario.profiles
    table = {**{(t, g, 1): spe for (t, g), spe in profiles.configs(profile).items()},
             **profiles.gangs.get(profile, {})}
    return [(t, g, n, table[(t, g, n)])
            for t, g, n in feasible_configs(scenario.cluster, list(table))]


def hindsight_bound(scenario: Scenario, *, slots: int = 120, time_limit: float = 120.0,
                    horizon: float | None = None, lp: bool = False) -> BoundResult:
    """The bound: the time-indexed MILP, or with `lp` its linear relaxation with mean busy
    times and an overflow (see the module's docstring), which scales to larger instances."""
    cluster, jobs = scenario.cluster, scenario.jobs
    if cluster.tariff is not None:
        raise AndreasError("the hindsight bound assumes one energy price; this scenario has a "
                           "time-varying energy_price (not supported by `bound` yet)")
    configs = {j.job_id: job_configs(scenario, j.profile) for j in jobs}
    t_min = {j.job_id: min(spe * j.epochs for *_, spe in configs[j.job_id]) for j in jobs}
    if horizon is None and lp:
        # any horizon is valid with the overflow (which dates its work at the horizon, a
        # loose date when much work goes there): one that holds every job run one after
        # another at its fastest after the last arrival
        horizon = max(j.submit_time for j in jobs) + sum(t_min.values())
    if horizon is None:
        # Long enough for every schedule that matters: after the last arrival, idle time costs
        # nothing and gains nothing, so an optimal schedule can be compacted to run its jobs one
        # after another, each at most its slowest run time.
        horizon = max(j.submit_time for j in jobs) + sum(
            max(spe * j.epochs for *_, spe in configs[j.job_id]) for j in jobs)
    delta = horizon / slots
    eur = cluster.eur_per_joule()
    units = node_units(cluster, lp)
    m = Milp()
    x: dict[tuple[str, int, int, int], int] = {}
    share = {}
    # Columns indexed once by job and slot, and by node and slot (in creation order), so that
    # building each row does not scan every column.
    # a job's time share in a slot: its one-node columns x, a gang's y
    job_slot: dict[tuple[str, int], list[int]] = defaultdict(list)
    # (job, GPUs per node, column of node-shares) on each unit in each slot
    node_slot: dict[tuple[int, int], list[tuple[str, int, int]]] = defaultdict(list)
    work: dict[str, list[tuple[int, float]]] = defaultdict(list)  # (column, epochs per share)
    slot_of: dict[int, int] = {}
    for j in jobs:
        first = int(math.floor(j.submit_time / delta))
        for s in range(first, slots):
            avail = min(1.0, ((s + 1) * delta - j.submit_time) / delta)
            share[(j.job_id, s)] = avail
            for c, (t, g, nodes, spe) in enumerate(configs[j.job_id]):
                eligible = [n for n, unit in enumerate(units)
                            if unit.gpu_type == t and unit.gpus >= g]
                if nodes > 1:  # a gang: its time share y, and n node-shares per unit of it
                    y = m.var(0.0, integer=False)
                    job_slot[(j.job_id, s)].append(y)
                    work[j.job_id].append((y, delta / spe))
                    slot_of[y] = s
                    spread = []
                    for n in eligible:
                        col = x[(j.job_id, c, n, s)] = m.var(
                            0.0, upper=float(units[n].count), integer=False)
                        node_slot[(n, s)].append((j.job_id, g, col))
                        spread.append(col)
                        m.row(-1e30, 0.0, [col, y], [1.0, -float(units[n].count)])
                    m.row(0.0, 0.0, spread + [y], [1.0] * len(spread) + [-float(nodes)])
                    continue
                for n in eligible:
                    col = x[(j.job_id, c, n, s)] = m.var(0.0, integer=False)
                    job_slot[(j.job_id, s)].append(col)
                    node_slot[(n, s)].append((j.job_id, g, col))
                    work[j.job_id].append((col, delta / spe))
                    slot_of[col] = s
    # Energy above the idle draw; the idle draw itself is paid by every node at least until the
    # last job can possibly finish (added as a constant below).
    extra = {t: tuple(gt.extra_w(b) for b in range(1, len(gt.node_power_w) + 1))
             for t, gt in cluster.gpu_types.items()}
    pieces = {t: convex_minorant(p) for t, p in extra.items()}
    busy_pieces = {t: convex_minorant(p, through_zero=False) for t, p in extra.items()}
    # lp: work after the horizon, in seconds run on each configuration, at its least energy
    overflow: dict[str, list[tuple[int, float]]] = defaultdict(list)
    if lp:
        for j in jobs:
            for t, g, nodes, spe in configs[j.job_id]:
                watts = nodes * max(slope * g + intercept for slope, intercept in pieces[t])
                col = m.var(eur * watts, upper=1e30, integer=False)
                overflow[j.job_id].append((col, 1.0 / spe))
    # per job: work done, one configuration at a time, completion and tardiness
    for j in jobs:
        jid = j.job_id
        done = work[jid] + overflow[jid]
        m.row(j.epochs, 1e30, [col for col, _ in done], [e for _, e in done])
        completion = m.var(0.0, upper=1e30, integer=False)
        tard = m.var(j.tardiness_weight, upper=1e30, integer=False)
        m.row(j.submit_time + t_min[jid], 1e30, [completion], [1.0])
        m.row(-j.due_date, 1e30, [tard, completion], [1.0, -1.0])  # tard ≥ C − due
        if lp:
            # C ≥ mean busy date + t_min/2, each slot's share of the work dated at its start and
            # the overflow's at the horizon
            over = overflow[jid]
            m.row(t_min[jid] / 2.0, 1e30, [completion] + [col for col, _ in work[jid]]
                  + [col for col, _ in over],
                  [1.0] + [-(slot_of[col] * delta) * e / j.epochs for col, e in work[jid]]
                  + [-horizon * e / j.epochs for _, e in over])
            for s in range(int(math.floor(j.submit_time / delta)), slots):
                cols = job_slot[(jid, s)]
                m.row(-1e30, share[(jid, s)], cols, [1.0] * len(cols))
            continue
        for s in range(int(math.floor(j.submit_time / delta)), slots):
            cols = job_slot[(jid, s)]
            m.row(-1e30, share[(jid, s)], cols, [1.0] * len(cols))
            runs = m.var(0.0)  # r[j,s]: j runs in slot s
            m.row(0.0, 1e30, [runs] + cols, [1.0] + [-1.0] * len(cols))
            # C ≥ s·Δ·r + Δ·Σx: it cannot finish before the slot starts plus its time run in it
            m.row(0.0, 1e30, [completion, runs] + cols,
                  [1.0, -s * delta] + [-delta] * len(cols))
    # per node and slot: capacity and energy
    earliest_end = max(j.submit_time + t_min[j.job_id] for j in jobs)
    idle_floor = sum(cluster.gpu_types[n.gpu_type].idle_w for n in cluster.nodes) \
        * earliest_end * eur
    for n, unit in enumerate(units):
        for s in range(slots):
            entries = node_slot.get((n, s), [])
            cols = [col for _, _, col in entries]
            gpus = [float(g) for _, g, _ in entries]
            if not cols:
                continue
            m.row(-1e30, float(unit.gpus * unit.count), cols, gpus)
            energy = m.var(eur * delta, upper=1e30, integer=False)  # mean node watts
            # the nodes of a unit draw at least count x L(busy / count) (L convex: Jensen)
            for slope, intercept in pieces[unit.gpu_type]:
                m.row(intercept * unit.count, 1e30, [energy] + cols,
                      [1.0] + [-slope * g for g in gpus])
            # share of the slot the unit's nodes are powered, at least (summed over them)
            on = m.var(0.0, upper=float(unit.count), integer=False)
            by_job: dict[str, list[int]] = {}
            for k, _, col in entries:
                by_job.setdefault(k, []).append(col)
            for jcols in by_job.values():
                m.row(0.0, 1e30, [on] + jcols, [1.0] + [-1.0] * len(jcols))
            for slope, intercept in busy_pieces[unit.gpu_type]:
                m.row(0.0, 1e30, [energy, on] + cols,
                      [1.0, -intercept] + [-slope * g for g in gpus])
    result = solve(m, time_limit=time_limit, threads=1, lp_solver="ipm" if lp else None)
    schedule = []
    if result.values is not None:
        for (k, c, n, s), col in x.items():
            v = result.values[col]
            if v > 1e-9:
                t, g, nodes, _ = configs[k][c]
                schedule.append({"slot": s, "start": s * delta, "end": (s + 1) * delta,
                                 "job_id": k, "node": units[n].name, "gpu_type": t,
                                 "gpus": g, "share": v, **({"gang_nodes": nodes}
                                                           if nodes > 1 else {})})
        schedule.sort(key=lambda r: (r["slot"], r["node"], r["job_id"]))
    return BoundResult(idle_floor + (result.bound if not result.optimal else result.objective),
                       idle_floor + result.objective, result.optimal, delta, slots, schedule)
