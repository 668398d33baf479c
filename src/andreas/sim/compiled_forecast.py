"""The forecast of the forward checks and the rollouts, compiled where it can be: the cost of
every job from a snapshot on, a plan applied now, later decisions made by the plain greedy
pass (`policies.greedy.follower`), played by `policies/search/rollout_kernel.py` instead of
the Python simulator (`forecast.forecast`). The same cost to 1e-9
(tests/test_compiled_forecast.py), in a fraction of the time: bench/forecasts.md.

It covers what the zoo's checks mostly play: a flat energy price and no carbon series, jobs
that may be paused, on one node each, at the GPUs' default power limit, with the power
table's draws and the cluster's one restart overhead (no profile's own draw, start-up, power
limits or gangs, no GPU type's restart draw), and the plain follower or its non-preemptive
twin (`greedy.steady_follower`, the restart rollouts'). Anything else is `None` here and
plays in Python, so a check's answer never depends on which path played it.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from ..model import Job
from ..policies.base import Plan, Policy, Snapshot, preempts, revisit_at
from ..policies.greedy import FOLLOWER, RandomizedGreedy, SteadyGreedy
from ..policies.search import orderings, rollout_kernel
from ..policies.search.cluster_tables import tables_for
from ..policies.search.planning import WAITING_PENALTY, restart_overheads
from .events import EPS

LIST_SORT = sys.version_info[:2] in ((3, 10), (3, 11))
"""Whether this Python's list.sort is the one rollout_kernel._list_sort reproduces (for the
orders of queues where some job has no configuration; tests/test_compiled_forecast.py checks
it on 3.11): other versions play such futures in Python."""
RULES = {"adaptive": rollout_kernel.ORDER_ADAPTIVE, "pressure": rollout_kernel.ORDER_PRESSURE,
         "atc": rollout_kernel.ORDER_ATC}


def compiled_cost(snapshot: Snapshot, plan: Plan, policy: Policy,
                  arrivals: tuple[Job, ...] = ()) -> float | None:
    """The summed cost (energy + tardiness, EUR) `forecast(snapshot, plan, policy,
    arrivals=arrivals)` would give, played compiled; None where the forecast is not one this
    path covers (the caller then plays it in Python)."""
    if not covered(snapshot, plan, policy, arrivals):
        return None
    if not snapshot.jobs:
        return 0.0
    now = snapshot.time
    cluster = snapshot.cluster
    tables = tables_for(cluster)
    jobs = [v.job for v in snapshot.jobs] + sorted(arrivals, key=lambda j: j.submit_time)
    pidx, (p_type, p_gpus, p_spe, p_watts, p_n, p_restart) = \
        tables.profile_rows(snapshot.profiles).lookup([job.profile for job in jobs])
    if len(jobs) and int(p_n[pidx].min()) == 0:  # a job with no configuration here
        return None
    known = len(snapshot.jobs)
    home = np.full(known, -1, np.int64)
    home_g = np.zeros(known, np.int64)
    restart = np.zeros(known)
    for i, view in enumerate(snapshot.jobs):
        target = plan.get(view.job_id)
        if target is not None:
            home[i] = tables.node_index[target.node]
            home_g[i] = target.gpus
            restart[i] = snapshot.restart_s(view, target, cluster.nodes[home[i]].gpu_type)
    params = policy.params  # type: ignore[attr-defined]
    s = params.search
    wake = revisit_at(plan)
    total, status = rollout_kernel.play(
        pidx, np.array([0.0] * known + [j.submit_time - now for j in jobs[known:]]),
        np.array([j.due_date - now for j in jobs]),
        np.array([j.tardiness_weight for j in jobs], float),
        np.array([v.remaining_epochs for v in snapshot.jobs] + [j.epochs for j in jobs[known:]],
                 float),
        np.array([v.started for v in snapshot.jobs] + [False] * (len(jobs) - known), np.bool_),
        home, home_g, restart, known, p_type, p_gpus, p_spe, p_watts, p_n,
        restart_overheads(p_restart, cluster.restart_overhead_s, params.choice.plan_restart_s),
        tables.k_node_type, tables.k_node_cap, tables.k_power, tables.k_type_capacity,
        tables.k_type_nodes, tables.k_type_start, tables.k_node_draw,
        float(cluster.eur_per_joule()), float(cluster.restart_overhead_s),
        float(max(cluster.restart_overhead_s, params.choice.plan_restart_s)),
        bool(snapshot.first_start_overhead), math.inf if wake is None else max(0.0, wake - now),
        not preempts(policy), RULES[s.order], s.score == "lookahead",
        s.config_energy != "alone", s.config_energy == "filled", WAITING_PENALTY,
        orderings.ATC_K, orderings.OVERLOAD_SHARE, LIST_SORT, EPS)
    return None if status != rollout_kernel.OK else float(total)


def covered(snapshot: Snapshot, plan: Plan, policy: Policy, arrivals: tuple[Job, ...]) -> bool:
    """Whether `compiled_cost` plays this forecast (the module's docstring says what)."""
    cluster, profiles = snapshot.cluster, snapshot.profiles
    if type(policy) not in (RandomizedGreedy, SteadyGreedy) or \
            getattr(policy, "params", None) != FOLLOWER:
        return False
    if FOLLOWER.search.order not in RULES:
        return False
    if cluster.tariff is not None or cluster.carbon is not None:
        return False
    if profiles.power or profiles.startup or profiles.gangs:
        return False
    if any(kind.restart_w is not None for kind in cluster.gpu_types.values()):
        return False
    if not all(v.job.preemptible for v in snapshot.jobs) or \
            not all(job.preemptible for job in arrivals):
        return False
    names = cluster.node_positions
    return all(a.power_limit_w is None and not a.more_nodes and a.node in names
               for a in plan.values())
