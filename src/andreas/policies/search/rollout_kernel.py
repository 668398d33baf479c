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
OK, IDLE, UNSUPPORTED = 0, 1, 2  # play's status: played to the end; jobs left waiting with
# nothing to come; an order the compiled loop cannot reproduce (see `ordered`)
SHORT_LIST = 64  # CPython sorts shorter lists by one run and a binary insertion sort


@njit(cache=True)
def _sorted_by(primary, secondary):
    """Indices in the order of (primary, secondary), ties by index: np.lexsort((secondary,
    primary)), and Python's stable sort on that key."""
    first = np.argsort(secondary, kind="mergesort")
    return first[np.argsort(primary[first], kind="mergesort")]


@njit(cache=True)
def _tuple_lt(a, b, key, submit):
    """Python's (key[a], submit[a]) < (key[b], submit[b]): a NaN key is never equal to
    another, and never less."""
    if key[a] == key[b]:
        return submit[a] < submit[b]
    return key[a] < key[b]


@njit(cache=True)
def _list_sort(key, submit):
    """The order CPython's list.sort (3.10-3.12) gives n < SHORT_LIST items keyed (key,
    submit): one run (count_run: ascending, or strictly descending and reversed), then a
    binary insertion sort of the rest (binarysort). Where keys are NaN no order is total, and
    the result is the algorithm's own: this reproduces it step by step."""
    n = key.shape[0]
    idx = np.arange(n)
    if n < 2:
        return idx
    run = 2
    if _tuple_lt(idx[1], idx[0], key, submit):
        while run < n and _tuple_lt(idx[run], idx[run - 1], key, submit):
            run += 1
        idx[:run] = idx[:run][::-1].copy()
    else:
        while run < n and not _tuple_lt(idx[run], idx[run - 1], key, submit):
            run += 1
    for start in range(run, n):
        pivot = idx[start]
        lo, hi = 0, start
        while lo < hi:
            mid = lo + ((hi - lo) >> 1)
            if _tuple_lt(pivot, idx[mid], key, submit):
                hi = mid
            else:
                lo = mid + 1
        for k in range(start, lo, -1):
            idx[k] = idx[k - 1]
        idx[lo] = pivot
    return idx


@njit(cache=True)
def ordered(key, submit, list_sort):
    """Indices by (key, submit), as orderings.py sorts them, and whether that order could be
    reproduced. Without NaN keys the order is total (any stable sort gives it); with every
    key NaN Python's sort leaves the list as it is; with some NaN, the list sort's own order
    (`_list_sort`), where `list_sort` says this Python sorts so, for short lists only."""
    m = key.shape[0]
    nan = 0
    for i in range(m):
        if np.isnan(key[i]):
            nan += 1
    if nan == 0:
        return _sorted_by(key, submit), True
    if nan == m:
        return np.arange(m), True
    if m < SHORT_LIST and list_sort:
        return _list_sort(key, submit), True
    return np.arange(m), False


@njit(cache=True)
def pressure_order(now, tmin, due, weight, submit, list_sort):
    """orderings.pressure: decreasing now + t_min - due, times the weight when positive; ties
    by submission, then position (`ordered`)."""
    m = tmin.shape[0]
    key = np.empty(m)
    for i in range(m):
        x = (now + tmin[i]) - due[i]
        key[i] = -(x * weight[i] if x > 0 else x)
    return ordered(key, submit, list_sort)


@njit(cache=True)
def atc_order(now, tmin, due, weight, submit, atc_k, list_sort):
    """orderings.atc: apparent tardiness cost (w/p) exp(-max(0, d - p - now) / (K p_bar)),
    highest first; ties by submission, then position (`ordered`)."""
    m = tmin.shape[0]
    p_bar = 0.0
    for i in range(m):
        p_bar += tmin[i]
    p_bar /= m
    key = np.empty(m)
    for i in range(m):
        slack = max(0.0, due[i] - tmin[i] - now)
        key[i] = -(weight[i] / tmin[i] * np.exp(-slack / (atc_k * p_bar)))
    return ordered(key, submit, list_sort)


@njit(cache=True)
def resolved_rule(rule, now, tmin, due, overload_share):
    """The order `rule` stands for now: ORDER_PRESSURE or ORDER_ATC (the adaptive rule's
    choice)."""
    if rule != ORDER_ADAPTIVE:
        return rule
    m = tmin.shape[0]
    hopeless = 0
    for i in range(m):
        if now + tmin[i] > due[i]:
            hopeless += 1
    return ORDER_ATC if m > 0 and hopeless >= overload_share * m else ORDER_PRESSURE


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
         k_type_capacity, k_type_nodes, k_type_start, node_draw, eur, restart_s,
         plan_overhead, first_start_overhead, first_revisit, steady, rule, use_lookahead,
         marginal, filled, wait_factor, atc_k, overload_share, list_sort, eps):
    """Every job's cost from now (time 0) on: energy (its share of its node's draw, at `eur`
    per joule) plus tardiness, summed in job order, and the status (OK; IDLE: jobs left
    waiting with nothing to wait for, where the simulator raises; UNSUPPORTED: a decision
    whose order this loop cannot reproduce, `ordered`).

    Jobs are rows, in the simulator's activation order: the first `n_known` are known now
    (`epochs` left, started or not, on `home0` with `home_g0` GPUs, -1: waiting, still to pay
    `restart0` s of restart), the rest arrive at `submit` (ascending). `p_*`: the profiles'
    rows on the whole cluster (cluster_tables.ProfileRows), `p_over` their restart overheads
    as planned; `power[t, b - 1]`: a node of type t's draw above idle with b busy GPUs,
    `k_type_*` the cluster's nodes grouped by type (ClusterTables), and `node_draw[t, b]` a
    node's whole draw. A (re)start pays `restart_s` (a first start too with
    `first_start_overhead`); the decisions plan with `plan_overhead`. `first_revisit`: when
    the plan in place asked to be revisited (inf: never). `steady`: the follower never stops
    a running job, and plans the waiting ones on the GPUs left free (`greedy.SteadyGreedy`,
    the simulator's `_decide_waiting`)."""
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
    status = OK
    if n_active > 0 and _running(node) == 0 and revisit == np.inf:
        status = _decide(now, active, pidx, submit, due, weight, started, node, gpus, spe,
                         restart_end, todo, remaining, busy, p_type, p_gpus, p_spe, p_watts,
                         p_n, p_over, node_type, node_cap, power, k_type_capacity,
                         k_type_nodes, k_type_start, eur, restart_s,
                         plan_overhead, first_start_overhead, steady, rule, use_lookahead,
                         marginal, filled, wait_factor, atc_k, overload_share, list_sort)
    arrived = n_known
    while status == OK and (arrived < J or n_active > 0):
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
            status = _decide(now, active, pidx, submit, due, weight, started, node, gpus, spe,
                             restart_end, todo, remaining, busy, p_type, p_gpus, p_spe,
                             p_watts, p_n, p_over, node_type, node_cap, power,
                             k_type_capacity, k_type_nodes, k_type_start, eur,
                             restart_s, plan_overhead, first_start_overhead, steady, rule,
                             use_lookahead, marginal, filled, wait_factor, atc_k,
                             overload_share, list_sort)
    if status != OK:
        return np.nan, status
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
    """Job j takes g GPUs of node n, its progress starting at `restart`."""
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
def _nodes_of(node_type, node_cap, T):
    """The kernel's arrays of a cluster of these nodes (cluster_tables.ClusterTables): GPUs
    per type, the nodes grouped by type (stable) and where each type's group starts."""
    type_capacity = np.zeros(T, np.int64)
    for n in range(node_type.shape[0]):
        type_capacity[node_type[n]] += node_cap[n]
    type_nodes = np.argsort(node_type, kind="mergesort")
    type_start = np.searchsorted(node_type[type_nodes], np.arange(T + 1)).astype(np.int64)
    return type_capacity, type_nodes, type_start


@njit(cache=True)
def _hostable_rows(p_type, p_gpus, p_spe, p_watts, p_n, p_over, largest):
    """The profile rows a cluster whose largest node of type t has `largest[t]` GPUs can
    host: each row's configurations that fit, in the row's order (ProfileRows)."""
    P, C = p_type.shape
    f_type = np.zeros((P, C), np.int64)
    f_gpus = np.zeros((P, C), np.int64)
    f_spe = np.zeros((P, C))
    f_watts = np.zeros((P, C))
    f_over = np.zeros((P, C))
    f_n = np.zeros(P, np.int64)
    for p in range(P):
        k = 0
        for c in range(p_n[p]):
            if p_gpus[p, c] <= largest[p_type[p, c]]:
                f_type[p, k], f_gpus[p, k], f_spe[p, k] = p_type[p, c], p_gpus[p, c], p_spe[p, c]
                f_watts[p, k], f_over[p, k] = p_watts[p, c], p_over[p, c]
                k += 1
        f_n[p] = k
    return f_type, f_gpus, f_spe, f_watts, f_n, f_over


@njit(cache=True)
def _decide(now, active, pidx, submit, due, weight, started, node, gpus, spe, restart_end,
            todo, remaining, busy, p_type, p_gpus, p_spe, p_watts, p_n, p_over, node_type,
            node_cap, power, k_type_capacity, k_type_nodes, k_type_start, eur, restart_s,
            plan_overhead, first_start_overhead, steady, rule, use_lookahead, marginal, filled,
            wait_factor, atc_k, overload_share, list_sort):
    """One decision of the plain greedy pass (planning.PlanningContext, one deterministic
    pass and its post-processing), applied as the simulator applies a plan: a job kept where
    it runs goes on, a stopped one is closed, then the starts. `steady`: the waiting jobs
    alone, on the nodes with free GPUs, as many as are free. Returns the status."""
    m = 0
    for j in range(active.shape[0]):
        if active[j] and not (steady and node[j] >= 0):
            m += 1
    if m == 0:
        return OK
    rows = np.empty(m, np.int64)
    i = 0
    for j in range(active.shape[0]):
        if active[j] and not (steady and node[j] >= 0):
            rows[i] = j
            i += 1
    T = power.shape[0]
    if steady:  # the cluster of the free GPUs (the simulator's _free_cluster)
        nodes = np.flatnonzero(node_cap - busy > 0)
        if nodes.shape[0] == 0:
            return OK
        c_type = node_type[nodes]
        c_cap = node_cap[nodes] - busy[nodes]
        largest = np.zeros(T, np.int64)
        for n in range(nodes.shape[0]):
            largest[c_type[n]] = max(largest[c_type[n]], c_cap[n])
        r_type, r_gpus, r_spe, r_watts, r_n, r_over = _hostable_rows(
            p_type, p_gpus, p_spe, p_watts, p_n, p_over, largest)
        type_capacity, type_nodes, type_start = _nodes_of(c_type, c_cap, T)
    else:
        nodes = np.arange(node_type.shape[0])
        c_type, c_cap = node_type, node_cap
        r_type, r_gpus, r_spe, r_watts, r_n, r_over = p_type, p_gpus, p_spe, p_watts, p_n, p_over
        type_capacity, type_nodes, type_start = k_type_capacity, k_type_nodes, k_type_start
    a_pidx = pidx[rows]
    a_due = due[rows]
    a_weight = weight[rows]
    a_submit = submit[rows]
    rem = np.empty(m)
    a_started = np.empty(m, np.bool_)
    left = np.zeros(m)
    home = np.full(m, -1, np.int64)  # on the decision's cluster (all nodes unless steady)
    home_g = np.zeros(m, np.int64)
    home_type = np.full(m, -1, np.int64)
    for i in range(m):
        j = rows[i]
        a_started[i] = started[j]
        if node[j] >= 0:  # (never in steady decisions)
            rem[i] = remaining[j] - _epochs_at(j, now, restart_end, todo, spe)
            a_started[i] = True
            x = restart_end[j] - now
            left[i] = x if x > 0.0 else 0.0
            home[i] = node[j]
            home_g[i] = gpus[j]
            home_type[i] = node_type[node[j]]
        else:
            rem[i] = remaining[j]
    ct, cg, times, nc = candidate_times(a_pidx, r_type, r_gpus, r_spe, r_n, rem, a_started,
                                        left, home_type, home_g, r_over)
    energy = flat_energy(a_pidx, r_watts, times, now, eur)
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
        x = (now + tmax[i]) - a_due[i]  # np.fmax(0, x): a job with no candidate owes 0
        wait_penalty[i] = wait_factor * (a_weight[i] * (x if x > 0.0 else 0.0))
    by_pressure, ok = pressure_order(now, tmin, a_due, a_weight, a_submit, list_sort)
    first, ok_first = by_pressure, ok  # the start order, sorted again only if it is ATC
    if resolved_rule(rule, now, tmin, a_due, overload_share) == ORDER_ATC:
        first, ok_first = atc_order(now, tmin, a_due, a_weight, a_submit, atc_k, list_sort)
    if not ok or not ok_first:
        return UNSUPPORTED
    rank = np.empty(m, np.int64)
    for i in range(m):
        rank[by_pressure[i]] = i
    starts = np.empty((1, m), np.int64)
    starts[0] = first
    out = run_iterations(starts, np.empty((0, 3, m)), 0, True, o_ct, o_cg, ctime, cen, cmov,
                         mtime, nc, home, home_g, a_due, a_weight, wait_penalty, rank,
                         c_type, c_cap, power, type_capacity, now, eur, plan_overhead,
                         0.0, 0.0, 0.0, use_lookahead, meets, marginal, filled, type_nodes,
                         type_start, np.zeros((m, 0)))
    to_node = out[2][0]
    to_cand = out[3][0]
    target = np.full(m, -1, np.int64)  # on the whole cluster
    target_g = np.zeros(m, np.int64)
    for i in range(m):  # stops first (pauses, moves, resizes), then starts
        j = rows[i]
        if to_node[i] >= 0:
            target[i] = nodes[to_node[i]]
            target_g[i] = o_cg[i, to_cand[i]]
        if node[j] >= 0:
            if target[i] == node[j] and target_g[i] == gpus[j]:
                target[i] = -1  # kept as it runs
                continue
            remaining[j] -= _epochs_at(j, now, restart_end, todo, spe)
            busy[node[j]] -= gpus[j]
            node[j] = -1
    for i in range(m):
        j = rows[i]
        if target[i] < 0:
            continue
        restart = now
        if started[j] or first_start_overhead:
            restart = now + restart_s
        started[j] = True
        _hold(j, target[i], target_g[i], restart, pidx, node_type, p_type, p_gpus, p_spe,
              p_n, node, gpus, spe, restart_end, todo, remaining, busy)
    return OK
