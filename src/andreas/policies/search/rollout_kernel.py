"""A forecast played on the kernel's arrays: the event loop of the simulator and the decisions
of the plain greedy pass, in one compiled function (issue 42, point 3).

The forward checks and the rollouts judge a decision by playing the future forward, later
decisions made by the plain greedy pass (`greedy.follower`). In the Python simulator each of
those decisions builds a snapshot, a planning context and the kernel's arrays from model
objects; here the jobs are rows of arrays from the start, and each decision calls the same
compiled functions the policy does (`table_kernel`'s candidate table, `kernel.run_iterations`)
on the rows of the active jobs. What the loop plays is the simulator's rule for every event
(`sim/engine.py`): completions within the clock's tolerance end first, in arrival order, then
arrivals; a decision after each batch; a moved or paused job restarts; a job's share of its
node's draw is its GPUs' share of the table's. `sim/compiled_forecast.py` says which
forecasts it covers (the rest play in Python) and tests/test_compiled_forecast.py holds the
two to 1e-9 on random clusters and queues.

Like kernel.py, this module imports nothing of the policies: the rules' constants (the ATC
factor, the overload share, the waiting penalty, the clock's tolerance) come as arguments.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .kernel import run_iterations
from .table_kernel import candidate_times, flat_energy, ordered_rows

ORDER_ADAPTIVE, ORDER_PRESSURE, ORDER_ATC = 0, 1, 2
OK, IDLE = 0, 1  # play's status: played to the end; jobs left waiting with nothing to come


@njit(cache=True)
def _sorted_by(primary, secondary):
    """Indices in the order of (primary, secondary), ties by index: np.lexsort((secondary,
    primary)), and Python's stable sort on that key."""
    first = np.argsort(secondary, kind="mergesort")
    return first[np.argsort(primary[first], kind="mergesort")]


@njit(cache=True)
def pressure_order(now, tmin, due, weight, submit):
    """orderings.pressure: decreasing now + t_min - due, times the weight when positive; ties
    by submission, then position."""
    m = tmin.shape[0]
    key = np.empty(m)
    for i in range(m):
        x = (now + tmin[i]) - due[i]
        key[i] = -(x * weight[i] if x > 0 else x)
    return _sorted_by(key, submit)


@njit(cache=True)
def atc_order(now, tmin, due, weight, submit, atc_k):
    """orderings.atc: apparent tardiness cost (w/p) exp(-max(0, d - p - now) / (K p_bar)),
    highest first; ties by submission, then position."""
    m = tmin.shape[0]
    p_bar = 0.0
    for i in range(m):
        p_bar += tmin[i]
    p_bar /= m
    key = np.empty(m)
    for i in range(m):
        slack = max(0.0, due[i] - tmin[i] - now)
        key[i] = -(weight[i] / tmin[i] * np.exp(-slack / (atc_k * p_bar)))
    return _sorted_by(key, submit)


@njit(cache=True)
def start_order(rule, now, tmin, due, weight, submit, atc_k, overload_share):
    """The deterministic pass's order (orderings.ordered): pressure, ATC, or adaptive (ATC
    once `overload_share` of the jobs cannot meet their due date on their fastest run)."""
    if rule == ORDER_ADAPTIVE:
        m = tmin.shape[0]
        hopeless = 0
        for i in range(m):
            if now + tmin[i] > due[i]:
                hopeless += 1
        rule = ORDER_ATC if m > 0 and hopeless >= overload_share * m else ORDER_PRESSURE
    if rule == ORDER_ATC:
        return atc_order(now, tmin, due, weight, submit, atc_k)
    return pressure_order(now, tmin, due, weight, submit)


@njit(cache=True)
def _spe(p, t, g, p_type, p_gpus, p_spe, p_n):
    """Seconds per epoch of profile row p on g GPUs of type t."""
    for c in range(p_n[p]):
        if p_type[p, c] == t and p_gpus[p, c] == g:
            return p_spe[p, c]
    return np.nan


@njit(cache=True)
def play(pidx, submit, due, weight, epochs, started0, home0, home_g0, restart0, n_known,
         p_type, p_gpus, p_spe, p_watts, p_n, p_over, node_type, node_cap, power,
         type_capacity, type_nodes, type_start, node_draw, eur, restart_s, plan_overhead,
         first_start_overhead, first_revisit, rule, use_lookahead, marginal, filled,
         wait_factor, atc_k, overload_share, eps):
    """Every job's cost from now (time 0) on: energy (its share of its node's draw, at `eur`
    per joule) plus tardiness, summed in job order, and the status (OK, or IDLE: jobs left
    waiting with nothing to wait for, as the simulator raises).

    Jobs are rows, in the simulator's activation order: the first `n_known` are known now
    (`epochs` left, started or not, on `home0` with `home_g0` GPUs, -1: waiting, still to pay
    `restart0` s of restart), the rest arrive at `submit` (ascending). `p_*`: the profiles'
    rows (cluster_tables.ProfileRows), `p_over` their restart overheads as planned;
    `node_draw[t, b]`: a node of type t's draw with b busy GPUs. A (re)start pays
    `restart_s` (a first start too with `first_start_overhead`); the decisions plan with
    `plan_overhead`. `first_revisit`: when the plan in place asked to be revisited (inf:
    never)."""
    J = pidx.shape[0]
    N = node_type.shape[0]
    node = np.full(J, -1, np.int64)
    gpus = np.zeros(J, np.int64)
    spe = np.ones(J)
    restart_end = np.zeros(J)
    todo = np.zeros(J)
    remaining = epochs.copy()
    started = started0.copy()
    active = np.zeros(J, np.bool_)
    completion = np.zeros(J)
    energy = np.zeros(J)
    busy = np.zeros(N, np.int64)
    n_active = 0
    for j in range(n_known):
        active[j] = True
        n_active += 1
        if home0[j] >= 0:
            started[j] = True
            _hold(j, home0[j], home_g0[j], restart0[j], pidx, node_type, p_type, p_gpus,
                  p_spe, p_n, node, gpus, spe, restart_end, todo, remaining, busy)
    revisit = first_revisit
    now = 0.0
    if n_active > 0 and _running(node) == 0 and revisit == np.inf:
        _decide(now, active, pidx, submit, due, weight, started, node, gpus, spe,
                restart_end, todo, remaining, busy, p_type, p_gpus, p_spe, p_watts, p_n,
                p_over, node_type, node_cap, power, type_capacity, type_nodes, type_start,
                eur, restart_s, plan_overhead, first_start_overhead, rule, use_lookahead,
                marginal, filled, wait_factor, atc_k, overload_share)
    arrived = n_known
    while arrived < J or n_active > 0:
        armed = n_active > 0 and revisit < np.inf  # the revisit timer waits for active jobs
        t = submit[arrived] if arrived < J else np.inf
        for j in range(J):
            if node[j] >= 0:
                t = min(t, restart_end[j] + todo[j] * spe[j])
        if armed and revisit < t:
            t = revisit
        if t == np.inf:
            return np.nan, IDLE
        for j in range(J):  # each job's share of its node's draw since the last event
            if node[j] >= 0:
                b = busy[node[j]]
                energy[j] += node_draw[node_type[node[j]], b] * gpus[j] / b * (t - now)
        now = t
        tolerance = now + eps * max(1.0, now)
        for j in range(J):  # completions first, in arrival order
            if node[j] >= 0 and restart_end[j] + todo[j] * spe[j] <= tolerance:
                remaining[j] -= todo[j]
                busy[node[j]] -= gpus[j]
                node[j] = -1
                completion[j] = now
                active[j] = False
                n_active -= 1
        while arrived < J and submit[arrived] <= now:
            active[arrived] = True
            n_active += 1
            arrived += 1
        if n_active > 0 or (armed and revisit <= now):
            revisit = np.inf  # fired, or asked now: the follower's plans ask for no revisit
        if n_active > 0:
            _decide(now, active, pidx, submit, due, weight, started, node, gpus, spe,
                    restart_end, todo, remaining, busy, p_type, p_gpus, p_spe, p_watts, p_n,
                    p_over, node_type, node_cap, power, type_capacity, type_nodes, type_start,
                    eur, restart_s, plan_overhead, first_start_overhead, rule, use_lookahead,
                    marginal, filled, wait_factor, atc_k, overload_share)
    total = 0.0
    for j in range(J):
        total += energy[j] * eur + weight[j] * max(0.0, completion[j] - due[j])
    return total, OK


@njit(cache=True)
def _running(node):
    count = 0
    for j in range(node.shape[0]):
        if node[j] >= 0:
            count += 1
    return count


@njit(cache=True)
def _hold(j, n, g, restart, pidx, node_type, p_type, p_gpus, p_spe, p_n, node, gpus, spe,
          restart_end, todo, remaining, busy):
    """Job j takes g GPUs of node n now (time 0 of its stretch: the caller passes absolute
    `restart`, when its progress starts)."""
    node[j] = n
    gpus[j] = g
    spe[j] = _spe(pidx[j], node_type[n], g, p_type, p_gpus, p_spe, p_n)
    restart_end[j] = restart
    todo[j] = remaining[j]
    busy[n] += g


@njit(cache=True)
def _epochs_at(j, t, restart_end, todo, spe):
    return min(todo[j], max(0.0, t - restart_end[j]) / spe[j])


@njit(cache=True)
def _decide(now, active, pidx, submit, due, weight, started, node, gpus, spe, restart_end,
            todo, remaining, busy, p_type, p_gpus, p_spe, p_watts, p_n, p_over, node_type,
            node_cap, power, type_capacity, type_nodes, type_start, eur, restart_s,
            plan_overhead, first_start_overhead, rule, use_lookahead, marginal, filled,
            wait_factor, atc_k, overload_share):
    """One decision of the plain greedy pass on the active jobs (planning.PlanningContext,
    one deterministic pass and its post-processing), applied as the simulator applies a
    plan: a job kept where it runs goes on, a stopped one is closed, then the starts."""
    m = 0
    for j in range(active.shape[0]):
        if active[j]:
            m += 1
    rows = np.empty(m, np.int64)
    i = 0
    for j in range(active.shape[0]):
        if active[j]:
            rows[i] = j
            i += 1
    a_pidx = pidx[rows]
    a_due = due[rows]
    a_weight = weight[rows]
    a_submit = submit[rows]
    rem = np.empty(m)
    a_started = np.empty(m, np.bool_)
    left = np.zeros(m)
    home = np.full(m, -1, np.int64)
    home_g = np.zeros(m, np.int64)
    home_type = np.full(m, -1, np.int64)
    for i in range(m):
        j = rows[i]
        a_started[i] = started[j]
        if node[j] >= 0:
            rem[i] = remaining[j] - _epochs_at(j, now, restart_end, todo, spe)
            a_started[i] = True
            x = restart_end[j] - now
            left[i] = x if x > 0.0 else 0.0
            home[i] = node[j]
            home_g[i] = gpus[j]
            home_type[i] = node_type[node[j]]
        else:
            rem[i] = remaining[j]
    ct, cg, times, nc = candidate_times(a_pidx, p_type, p_gpus, p_spe, p_n, rem, a_started,
                                        left, home_type, home_g, p_over)
    energy = flat_energy(a_pidx, p_watts, times, now, eur)
    o_ct, o_cg, ctime, cen, meets, real, tmin, tmax = ordered_rows(ct, cg, times, energy, nc,
                                                                   a_due, now)
    C = o_ct.shape[1]
    cmov = np.zeros((m, C), np.bool_)
    mtime = ctime.copy()
    wait_penalty = np.empty(m)
    for i in range(m):
        for c in range(C):
            if (real[i, c] and plan_overhead > 0 and home_type[i] >= 0
                    and o_cg[i, c] == home_g[i] and o_ct[i, c] == home_type[i]):
                cmov[i, c] = True
                mtime[i, c] = ctime[i, c] - left[i] + plan_overhead
        wait_penalty[i] = wait_factor * (a_weight[i] * max(0.0, (now + tmax[i]) - a_due[i]))
    by_pressure = pressure_order(now, tmin, a_due, a_weight, a_submit)
    rank = np.empty(m, np.int64)
    for i in range(m):
        rank[by_pressure[i]] = i
    starts = np.empty((1, m), np.int64)
    starts[0] = start_order(rule, now, tmin, a_due, a_weight, a_submit, atc_k, overload_share)
    out = run_iterations(starts, np.empty((0, 3, m)), 0, True, o_ct, o_cg, ctime, cen, cmov,
                         mtime, nc, home, home_g, a_due, a_weight, wait_penalty, rank,
                         node_type, node_cap, power, type_capacity, now, eur, plan_overhead,
                         0.0, 0.0, 0.0, use_lookahead, meets, marginal, filled, type_nodes,
                         type_start, np.zeros((m, 0)))
    to_node = out[2][0]
    to_cand = out[3][0]
    target_g = np.zeros(m, np.int64)
    for i in range(m):  # stops first (pauses, moves, resizes), then starts
        j = rows[i]
        if to_node[i] >= 0:
            target_g[i] = o_cg[i, to_cand[i]]
        if node[j] >= 0:
            if to_node[i] == node[j] and target_g[i] == gpus[j]:
                to_node[i] = -2  # kept as it runs
                continue
            remaining[j] -= _epochs_at(j, now, restart_end, todo, spe)
            busy[node[j]] -= gpus[j]
            node[j] = -1
    for i in range(m):
        j = rows[i]
        if to_node[i] < 0:
            continue
        restart = now
        if started[j] or first_start_overhead:
            restart = now + restart_s
        started[j] = True
        _hold(j, to_node[i], target_g[i], restart, pidx, node_type, p_type, p_gpus, p_spe,
              p_n, node, gpus, spe, restart_end, todo, remaining, busy)
