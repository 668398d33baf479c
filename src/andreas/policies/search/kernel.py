"""The greedy pass, its post-processing, the plan scores and the Randomized Greedy's loop:
the one implementation, compiled with numba.

Every policy that places jobs greedily (the baselines, `greedy`, `andreas`, `andreas-paper`)
and every plan score (`scoring.py`) calls these functions; `passes.py` is their Python face.
Each compiled function keeps its interpreted twin as `.py_func` (the `impl="plain"` option runs
the loop that way; `NUMBA_DISABLE_JIT=1` interprets every function, for a debugger). Arrays are
built once per decision by `planning.pack`; this module imports nothing of the
policies.
"""

from __future__ import annotations

import types

import numpy as np
from numba import njit, prange

INF = np.inf


@njit(cache=True)
def _pick_index(u, share, n):
    k = max(1, int(share * n + 0.5))
    return min(int(u * k), k - 1)


@njit(cache=True)
def node_orders(free, node_type, type_nodes, type_start, width):
    """Each GPU type's nodes in the order (free GPUs, index), ascending, kept up to date by
    `take_gpus` as a pass places jobs: order[t, start[t, g]:start[t, width - 1]] are the nodes
    of type t where g GPUs fit, best fit first; pos[n] is node n's place in its type's row.
    Built once per pass (counting sort: free GPU counts take few values, below `width`)."""
    T = type_start.shape[0] - 1
    N = free.shape[0]
    order = np.empty((T, max(N, 1)), np.int64)
    start = np.zeros((T, width), np.int64)
    pos = np.empty(N, np.int64)
    fill = np.empty(width, np.int64)
    for t in range(T):
        fill[:] = 0
        for i in range(type_start[t], type_start[t + 1]):
            fill[free[type_nodes[i]]] += 1
        total = 0
        for f in range(width):  # each free count's first place
            c = fill[f]
            fill[f] = total
            start[t, f] = total
            total += c
        for i in range(type_start[t], type_start[t + 1]):
            n = type_nodes[i]
            pos[n] = fill[free[n]]
            order[t, pos[n]] = n
            fill[free[n]] += 1
    return order, start, pos


@njit(cache=True)
def take_gpus(node, g, free, node_type, order, start, pos):
    """Takes `g` GPUs of `node` from `free` and keeps node_orders' order: the node moves
    down to the place of (its new free count, its index), the nodes between shift up by one
    and the free counts in between start one place later."""
    t = node_type[node]
    was = free[node]
    now = was - g
    free[node] = now
    row = order[t]
    q = start[t, now]  # before the first node of the new count with a larger index
    while q < start[t, now + 1] and row[q] < node:
        q += 1
    for i in range(pos[node], q, -1):
        row[i] = row[i - 1]
        pos[row[i]] = i
    row[q] = node
    pos[node] = q
    for f in range(now + 1, was + 1):
        start[t, f] += 1


@njit(cache=True)
def _fit_key(left, n, h, N):
    """Best-fit rank of node n with `left` GPUs left: fewest first, the job's own node h
    first on a tie, then index (N nodes)."""
    return (left * 2 + (0 if n == h else 1)) * N + n


@njit(cache=True)
def _unheld_fit(typ, g, h, u, use_rand, beta, free, row, first, m, held):
    """With a restart overhead: the best fit among the nodes where `g` GPUs fit without the
    GPUs that running jobs later in the pass hold there (`held`), by those free GPUs (fewest
    first, then index; the job's own node first on a tie), k = 0 or drawn by `u` among the
    max(1, round(beta x such nodes)) first; -1 if there is none. Otherwise a job placed
    before a running one takes the GPUs it runs on (they count as free until it is placed)
    and moves it, a restart for nothing when another node had room."""
    k = 0
    best = -1
    best_key = 0
    for i in range(first, first + m):  # count them, and the best fit (no allocation)
        n = row[i]
        left = free[n] - held[n]
        if left >= g:
            key = _fit_key(left, n, h, row.shape[0])
            if best < 0 or key < best_key:
                best, best_key = n, key
            k += 1
    pick = _pick_index(u, beta, k) if use_rand and k > 1 else 0
    if pick == 0:  # the best fit: every deterministic pass, and any pass with beta 0
        return best
    fit = np.empty(k, np.int64)
    keys = np.empty(k, np.int64)
    k = 0
    for i in range(first, first + m):
        n = row[i]
        left = free[n] - held[n]
        if left >= g:
            fit[k] = n
            keys[k] = _fit_key(left, n, h, row.shape[0])
            k += 1
    return fit[np.argsort(keys)][pick]


@njit(cache=True)
def pick_node(typ, g, h, h_g, overhead_pos, u, use_rand, beta, free, node_type, order, start,
              pos, held):
    """The node where a job (current node h or -1, with h_g GPUs there) places a candidate of
    `g` GPUs of type `typ`, or -1: its own node when staying pays no restart overhead, else
    the k-th fitting node in the order (free, n != h, n) (best fit, the current node first on a
    tie), k = 0 or drawn by `u` among the max(1, round(beta x fitting)) first. With an
    overhead, first among the nodes with room beside the GPUs `held` by running jobs still to
    place (`_unheld_fit`)."""
    if overhead_pos and h >= 0 and h_g == g and node_type[h] == typ and free[h] >= g:
        return h
    first = start[typ, g]
    m = start[typ, start.shape[1] - 1] - first
    if m == 0:
        return -1
    row = order[typ]
    if overhead_pos:
        node = _unheld_fit(typ, g, h, u, use_rand, beta, free, row, first, m, held)
        if node >= 0:
            return node
    p = first + (_pick_index(u, beta, m) if use_rand and m > 1 else 0)
    if h >= 0 and node_type[h] == typ and free[h] >= g:  # h moves to its count's first place
        h_first = start[typ, free[h]]
        if p == h_first:
            return h
        if h_first < p <= pos[h]:
            return row[p - 1]
    return row[p]


@njit(cache=True)
def _tried(tt, first):
    """The candidate tried tt-th when candidate `first` is tried first (the rest in order)."""
    if tt == 0:
        return first
    if tt <= first:
        return tt - 1
    return tt


@njit(cache=True)
def _time_of(P_ctime, P_cmov, P_mtime, home, j, c, node):
    if P_cmov[j, c] and node != home[j]:
        return P_mtime[j, c]
    return P_ctime[j, c]


@njit(cache=True)
def _placed_config(pn, pc, pm, P_ct, P_cg, P_ctime, P_mtime):
    """Per job: GPU type, GPU count and run time of its placed configuration (pn[j] < 0:
    waiting, entries unused), from candidate indices and moved flags."""
    J = pn.shape[0]
    pt = np.zeros(J, np.int64)
    pg = np.zeros(J, np.int64)
    ptime = np.zeros(J)
    for j in range(J):
        if pn[j] >= 0:
            c = pc[j]
            pt[j] = P_ct[j, c]
            pg[j] = P_cg[j, c]
            ptime[j] = P_mtime[j, c] if pm[j] else P_ctime[j, c]
    return pt, pg, ptime


@njit(cache=True)
def proxy_score(pn, pg, ptime, wait_penalty, due, weight, node_type, power, now, eur):
    """The paper's proxy (scoring.py): energy of the plan up to its first predicted completion
    t_ff, the tardiness of scheduled jobs at now + t_ff, and the waiting jobs' penalties. The
    one implementation, for the kernel and (through scoring.proxy) the plain path."""
    J = pn.shape[0]
    N = node_type.shape[0]
    t_ff = INF
    busy = np.zeros(N, np.int64)
    cost = 0.0
    for j in range(J):
        if pn[j] < 0:
            cost += wait_penalty[j]
        else:
            busy[pn[j]] += pg[j]
            if ptime[j] < t_ff:
                t_ff = ptime[j]
    if t_ff == INF:
        return cost
    watts = 0.0
    for n in range(N):
        if busy[n]:
            watts += power[node_type[n], busy[n] - 1]
    cost += watts * t_ff * eur
    end = now + t_ff
    for j in range(J):
        if pn[j] >= 0 and end > due[j]:
            cost += weight[j] * (end - due[j])
    return cost


@njit(cache=True)
def _jobs_by_node(pn, N):
    """The placed jobs of each node, in increasing job index: node n's are
    members[start[n]:start[n + 1]] (one pass, where scanning every job for every node was
    O(nodes x jobs) per score)."""
    J = pn.shape[0]
    start = np.zeros(N + 1, np.int64)
    for j in range(J):
        if pn[j] >= 0:
            start[pn[j] + 1] += 1
    for n in range(N):
        start[n + 1] += start[n]
    fill = start[:N].copy()
    members = np.empty(start[N], np.int64)
    for j in range(J):
        n = pn[j]
        if n >= 0:
            members[fill[n]] = j
            fill[n] += 1
    return start, members


@njit(cache=True)
def _node_energy(n, start, members, pg, ptime, node_type, power, eur, acc, t, g):
    """`acc` plus node n's energy term of the look-ahead: its jobs' GPUs (`pg`) drawn until
    each ends (`ptime`), shortest first. (Added to `acc` term by term, so the look-ahead's sum
    is the same to the bit whichever caller adds it up.) `t` and `g`: scratch arrays of at
    least the node's job count, the caller's (one allocation per score, not per node)."""
    m = start[n + 1] - start[n]
    busy = 0
    for a in range(m):
        j = members[start[n] + a]
        t[a] = ptime[j]
        g[a] = pg[j]
        busy += g[a]
    for a in range(1, m):  # sort (time, gpus) ascending
        xt = t[a]
        xg = g[a]
        b = a - 1
        while b >= 0 and (t[b] > xt or (t[b] == xt and g[b] > xg)):
            t[b + 1] = t[b]
            g[b + 1] = g[b]
            b -= 1
        t[b + 1] = xt
        g[b + 1] = xg
    prev = 0.0
    typ = node_type[n]
    for a in range(m):
        acc += power[typ, busy - 1] * (t[a] - prev) * eur
        busy -= g[a]
        prev = t[a]
    return acc


@njit(cache=True)
def _late_cost(j, ptime, due, weight, now):
    """Job j's tardiness term of the look-ahead, ending `ptime[j]` from now."""
    late = now + ptime[j] - due[j]
    return weight[j] * late if late > 0 else 0.0


@njit(cache=True)
def lookahead_score(pn, pt, pg, ptime, P_ct, P_cg, P_wtime, P_cen, nc, due, weight,
                    pressure_rank, node_type, power, type_capacity, now, eur):
    """The look-ahead (scoring.py): exact node energy and tardiness of the scheduled jobs, and a
    list-scheduling forecast for the waiting ones: run times `P_wtime` (_score passes the moved
    times: a paused job resumes with a whole restart) and energies `P_cen` (which leave that
    restart's energy out). The one implementation, for the kernel and
    (through scoring.lookahead) the plain path."""
    J = pn.shape[0]
    N = node_type.shape[0]
    cost = 0.0
    free = type_capacity.copy()
    rel_t = np.empty(2 * J + 1)
    rel_type = np.empty(2 * J + 1, np.int64)
    rel_g = np.empty(2 * J + 1, np.int64)
    alive = np.zeros(2 * J + 1, np.bool_)
    nrel = 0
    first_j = np.full(N, J, np.int64)
    nwait = 0
    waiting = np.empty(J, np.int64)
    for j in range(J):
        if pn[j] < 0:
            waiting[nwait] = j
            nwait += 1
            continue
        t = ptime[j]
        g = pg[j]
        free[pt[j]] -= g
        rel_t[nrel] = t
        rel_type[nrel] = pt[j]
        rel_g[nrel] = g
        alive[nrel] = True
        nrel += 1
        if first_j[pn[j]] == J:
            first_j[pn[j]] = j
        cost += _late_cost(j, ptime, due, weight, now)
    # nodes in order of their first job
    order = np.argsort(first_j, kind="mergesort")
    start, members = _jobs_by_node(pn, N)
    scratch_t = np.empty(J)
    scratch_g = np.empty(J, np.int64)
    for oi in range(N):
        node = order[oi]
        if first_j[node] == J:
            break
        cost = _node_energy(node, start, members, pg, ptime, node_type, power, eur, cost,
                            scratch_t, scratch_g)
    if nwait == 0:
        return cost
    # waiting jobs by pressure rank
    w = waiting[:nwait].copy()
    ranks = np.empty(nwait, np.int64)
    for a in range(nwait):
        ranks[a] = pressure_rank[w[a]]
    w = w[np.argsort(ranks, kind="mergesort")]
    done = np.zeros(nwait, np.bool_)
    left = nwait
    t = 0.0
    while left > 0:
        for a in range(nwait):
            if done[a]:
                continue
            j = w[a]
            for c in range(nc[j]):
                typ = P_ct[j, c]
                g = P_cg[j, c]
                if free[typ] >= g:
                    free[typ] -= g
                    end = t + P_wtime[j, c]
                    rel_t[nrel] = end
                    rel_type[nrel] = typ
                    rel_g[nrel] = g
                    alive[nrel] = True
                    nrel += 1
                    cost += max(P_cen[j, c], 0.0)  # waiting earns nothing at a negative price
                    late = now + end - due[j]
                    if late > 0:
                        cost += weight[j] * late
                    done[a] = True
                    left -= 1
                    break
        if left == 0:
            break
        # pop the earliest release, then every release not later than it
        best = -1
        for r in range(nrel):
            if alive[r] and (best < 0 or rel_t[r] < rel_t[best]):
                best = r
        if best < 0:
            break
        t = rel_t[best]
        for r in range(nrel):
            if alive[r] and rel_t[r] <= t:
                alive[r] = False
                free[rel_type[r]] += rel_g[r]
    return cost


@njit(cache=True)
def _score(use_lookahead, pn, pc, pm, P_ct, P_cg, P_ctime, P_mtime, P_cen, nc, wait_penalty,
           due, weight, pressure_rank, node_type, power, type_capacity, now, eur, P_cw):
    pt, pg, ptime = _placed_config(pn, pc, pm, P_ct, P_cg, P_ctime, P_mtime)
    if use_lookahead:  # the moved times: equal to the plain ones for a job that never ran
        cost = lookahead_score(pn, pt, pg, ptime, P_ct, P_cg, P_mtime, P_cen, nc, due, weight,
                               pressure_rank, node_type, power, type_capacity, now, eur)
    else:
        cost = proxy_score(pn, pg, ptime, wait_penalty, due, weight, node_type, power, now, eur)
    return cost + _own_energy(use_lookahead, pn, pc, ptime, P_cw, eur)


@njit(cache=True)
def _own_energy(use_lookahead, pn, pc, ptime, P_cw, eur):
    """What the placed jobs whose profiles give their own draw add to the table's energy
    (`P_cw`: watts above the table's share, per candidate; 0 for most, and no column at all
    when no job has its own draw): over each one's run with the look-ahead, up to the first
    completion with the proxy (its horizon)."""
    if P_cw.shape[1] == 0:
        return 0.0
    J = pn.shape[0]
    t_ff = INF
    for j in range(J):
        if pn[j] >= 0 and ptime[j] < t_ff:
            t_ff = ptime[j]
    extra = 0.0
    for j in range(J):
        if pn[j] >= 0:
            w = P_cw[j, pc[j]]
            if w != 0.0:
                extra += w * (ptime[j] if use_lookahead else t_ff) * eur
    return extra


@njit(cache=True)
def added_energy(power, typ, cap, free, g, time_s, joining):
    """Joules `g` more busy GPUs add to a node of GPU type `typ` (`cap` GPUs, `free` of them
    free) over `time_s`. With `joining` jobs still to place that could join the node (the
    "filled" price), as if up to that many more of its GPUs were busy: a share of a node the
    queue fills costs its last GPUs' draw, not its first's."""
    busy = min(cap - g, cap - free + joining)
    before = power[typ, busy - 1] if busy > 0 else 0.0
    return (power[typ, busy + g - 1] - before) * time_s


@njit(cache=True)
def restart_energy(power, typ, cap, taken, overhead):
    """Joules the running jobs restart on when a candidate takes `taken` of the GPUs they hold
    (none if `taken` <= 0): each GPU at a full node's mean draw per GPU for `overhead` s."""
    if taken <= 0:
        return 0.0
    return taken * power[typ, cap - 1] / cap * overhead


@njit(cache=True)
def greedy_pass(order, use_rand, u_config, u_node, free, pn, pc, pm, ct, cg, ctime, cmov,
                mtime, nc, home, home_g, node_type, node_cap, power, overhead, alpha, beta,
                meets, marginal, filled, type_nodes, type_start, cw):
    """One greedy pass: each job of `order` in turn gets its preferred candidate that fits
    (rows of the candidate table are in preference order), placed best fit; GPUs are taken
    from `free` and the placement written to pn (node, -1: waiting), pc (candidate) and pm
    (moved: pays the restart overhead). With `use_rand`, the first candidate tried is drawn
    by u_config[j] among the first max(1, round(alpha x candidates)) and the node by
    u_node[j] among the max(1, round(beta x fitting)) best fits.

    `marginal`: among the on-time candidates that fit, the one adding least energy to its node
    (`added_energy`; the first tried on a tie): on a node already drawing its fixed power, one
    GPU for longer often costs less than two for a shorter time. `filled`: priced as if the
    jobs of `order` still to place that could join the node (the waiting ones and its own)
    did. With a restart `overhead` (s), a candidate that takes GPUs running jobs still to place
    hold also pays their restart (`restart_energy`): the job it displaces pays it when placed,
    too late to weigh in this choice."""
    overhead_pos = overhead > 0
    N = node_type.shape[0]
    width = (node_cap.max() if N > 0 else 0) + 2
    nodes, start, pos = node_orders(free, node_type, type_nodes, type_start, width)
    waiting_left = 0  # the jobs still to place: waiting, and running on each node
    here_left = np.zeros(N, np.int64)
    if filled:
        for oi in range(order.shape[0]):
            if home[order[oi]] >= 0:
                here_left[home[order[oi]]] += 1
            else:
                waiting_left += 1
    held = np.zeros(N, np.int64)  # GPUs of running jobs still to place, per node
    if overhead_pos:
        for oi in range(order.shape[0]):
            if home[order[oi]] >= 0:
                held[home[order[oi]]] += home_g[order[oi]]
    for oi in range(order.shape[0]):
        j = order[oi]
        n_c = nc[j]
        h = home[j]
        if overhead_pos and h >= 0:
            held[h] -= home_g[j]
        if filled:
            if h >= 0:
                here_left[h] -= 1
            else:
                waiting_left -= 1
        first = _pick_index(u_config[j], alpha, n_c) if use_rand else 0
        u = u_node[j] if use_rand else 0.0
        best_c = -1
        best_node = -1
        if marginal:  # the on-time candidate adding least energy to its node
            best_added = 0.0
            for tt in range(n_c):
                c = _tried(tt, first)
                if not meets[j, c]:
                    continue
                node = pick_node(ct[j, c], cg[j, c], h, home_g[j], overhead_pos, u, use_rand,
                                 beta, free, node_type, nodes, start, pos, held)
                if node < 0:
                    continue
                joining = waiting_left + here_left[node] if filled else 0
                run_s = _time_of(ctime, cmov, mtime, home, j, c, node)
                added = added_energy(power, ct[j, c], node_cap[node], free[node], cg[j, c],
                                     run_s, joining)
                if cw.shape[1] and cw[j, c] != 0.0:  # its own draw, above or below the table's
                    added += cw[j, c] * run_s
                if overhead_pos:
                    added += restart_energy(power, ct[j, c], node_cap[node],
                                            cg[j, c] - (free[node] - held[node]), overhead)
                if best_c < 0 or added < best_added:
                    best_c = c
                    best_node = node
                    best_added = added
        for tt in range(n_c):  # else the first candidate tried that fits
            if best_c >= 0:
                break
            c = _tried(tt, first)
            best_node = pick_node(ct[j, c], cg[j, c], h, home_g[j], overhead_pos, u, use_rand,
                                  beta, free, node_type, nodes, start, pos, held)
            if best_node >= 0:
                best_c = c
        if best_c >= 0:
            take_gpus(best_node, cg[j, best_c], free, node_type, nodes, start, pos)
            pn[j] = best_node
            pc[j] = best_c
            pm[j] = cmov[j, best_c] and best_node != h


@njit(cache=True)
def post_process(pn, pc, pm, free, ct, cg, ctime, cmov, mtime, cen, nc, home, use_lookahead,
                 wait_penalty, due, weight, pressure_rank, node_type, power, type_capacity,
                 now, eur, cw, bound=True):
    """Hand idle GPUs of used nodes (nodes in the order of the first job placed there) to the
    job there whose run time drops most, only when that lowers the plan's score (more busy
    GPUs draw more power than a shorter run may save). Updates pc, pm and `free`; returns
    the final score. `bound=False` scores every trial whole (the reference for the bound
    below)."""
    J = pn.shape[0]
    N = node_type.shape[0]
    start, members = _jobs_by_node(pn, N)  # pn does not change here
    # With the look-ahead and no job waiting, a plan's score is a sum of node energies and job
    # tardiness, and a trial that changes one job on one node changes two of its terms: their
    # difference decides the trial, except where it is within rounding of zero (then the whole
    # scores decide, as they would for every trial). Same decisions, same final score.
    bounded = use_lookahead and bound
    for j in range(J):
        if pn[j] < 0:
            bounded = False
        if cw.shape[1]:  # own draws are not in the node terms: every trial whole
            bounded = False
    node_e = np.zeros(N)
    scratch_t = np.empty(J)  # _node_energy's
    scratch_g = np.empty(J, np.int64)
    scale = 1.0  # sum of the terms' magnitudes: bounds the rounding of either sum
    cost = 0.0
    _, pg, ptime = _placed_config(pn, pc, pm, ct, cg, ctime, mtime)  # kept up to date
    if bounded:
        for n in range(N):
            if start[n + 1] > start[n]:
                node_e[n] = _node_energy(n, start, members, pg, ptime, node_type, power, eur,
                                         0.0, scratch_t, scratch_g)
                scale += abs(node_e[n])
        for j in range(J):
            scale += _late_cost(j, ptime, due, weight, now)
    else:
        cost = _score(use_lookahead, pn, pc, pm, ct, cg, ctime, mtime, cen, nc, wait_penalty,
                      due, weight, pressure_rank, node_type, power, type_capacity, now, eur,
                      cw)
    first_j = np.full(N, J, np.int64)
    for j in range(J):
        if pn[j] >= 0 and first_j[pn[j]] == J:
            first_j[pn[j]] = j
    node_order = np.argsort(first_j, kind="mergesort")
    size = J * max(ct.shape[1], 1) + 1  # at most one option per candidate
    opt_drop = np.empty(size)
    opt_j = np.empty(size, np.int64)
    opt_c = np.empty(size, np.int64)
    for oi in range(N):
        n = node_order[oi]
        if first_j[n] == J:
            break
        while free[n] > 0:
            m = 0
            for q in range(start[n], start[n + 1]):
                j = members[q]
                cur_c = pc[j]
                cur_t = mtime[j, cur_c] if pm[j] else ctime[j, cur_c]
                cur_g = cg[j, cur_c]
                for c in range(nc[j]):
                    if (ct[j, c] == ct[j, cur_c] and cur_g < cg[j, c] <= cur_g + free[n]
                            and ctime[j, c] < cur_t):
                        opt_drop[m] = cur_t - ctime[j, c]
                        opt_j[m] = j
                        opt_c[m] = c
                        m += 1
            if m == 0:
                break
            # stable sort by (drop, -j) descending
            idx = np.arange(m)
            for a in range(1, m):
                x = idx[a]
                b = a - 1
                while b >= 0:
                    y = idx[b]
                    if opt_drop[y] < opt_drop[x] or (opt_drop[y] == opt_drop[x]
                                                     and -opt_j[y] < -opt_j[x]):
                        idx[b + 1] = y
                        b -= 1
                    else:
                        break
                idx[b + 1] = x
            accepted = False
            for a in range(m):
                k = idx[a]
                j = opt_j[k]
                c = opt_c[k]
                old_c = pc[j]
                old_m = pm[j]
                old_g = pg[j]
                old_t = ptime[j]
                old_late = _late_cost(j, ptime, due, weight, now)
                pc[j] = c
                pm[j] = cmov[j, c] and n != home[j]
                pg[j] = cg[j, c]
                ptime[j] = mtime[j, c] if pm[j] else ctime[j, c]
                if bounded:
                    e = _node_energy(n, start, members, pg, ptime, node_type, power, eur, 0.0,
                                     scratch_t, scratch_g)
                    new_late = _late_cost(j, ptime, due, weight, now)
                    rise = e - node_e[n] + new_late - old_late
                    if abs(rise) <= 1e-9 * scale:  # a close call: the whole scores decide
                        trial = _score(use_lookahead, pn, pc, pm, ct, cg, ctime, mtime, cen,
                                       nc, wait_penalty, due, weight, pressure_rank, node_type,
                                       power, type_capacity, now, eur, cw)
                        pc[j] = old_c
                        pm[j] = old_m
                        here = _score(use_lookahead, pn, pc, pm, ct, cg, ctime, mtime, cen, nc,
                                      wait_penalty, due, weight, pressure_rank, node_type,
                                      power, type_capacity, now, eur, cw)
                        pc[j] = c
                        pm[j] = cmov[j, c] and n != home[j]
                        lower = trial < here - 1e-12
                    else:
                        lower = rise < 0
                    if lower:
                        free[n] -= cg[j, c] - cg[j, old_c]
                        scale += abs(e) + new_late
                        node_e[n] = e
                        accepted = True
                        break
                else:
                    trial = _score(use_lookahead, pn, pc, pm, ct, cg, ctime, mtime, cen, nc,
                                   wait_penalty, due, weight, pressure_rank, node_type, power,
                                   type_capacity, now, eur, cw)
                    if trial < cost - 1e-12:
                        free[n] -= cg[j, c] - cg[j, old_c]
                        cost = trial
                        accepted = True
                        break
                pc[j] = old_c
                pm[j] = old_m
                pg[j] = old_g
                ptime[j] = old_t
            if not accepted:
                break
    if bounded:
        return _score(use_lookahead, pn, pc, pm, ct, cg, ctime, mtime, cen, nc, wait_penalty,
                      due, weight, pressure_rank, node_type, power, type_capacity, now, eur,
                      cw)
    return cost


def _run_iterations(starts, U, r0, run_starts, ct, cg, ctime, cen, cmov, mtime, nc, home,
                    home_g, due, weight, wait_penalty, pressure_rank, node_type, node_cap, power,
                    type_capacity, now, eur, overhead, pi, alpha, beta, use_lookahead,
                    meets, marginal, filled, type_nodes, type_start, cw):
    """Passes of one decision: the deterministic passes from `starts` (if `run_starts`), then
    one randomised pass per row of the uniforms U (neighbour swaps of a start's order by
    weight with probability 0.5 +- pi, configuration and node draws), each post-processed.
    U's rows are randomised passes r0, r0 + 1, ... of the decision (pass r starts from
    starts[r % len(starts)]), so a decision may run in slices. Returns the placements before
    post-processing (for de-duplication), after it, and each pass's score.

    In three phases: every pass, then which passes repeat an earlier one's placement, then
    the post-processing of the others. The passes of a phase are independent (`prange`):
    `run_iterations_parallel` spreads them over numba's threads, `run_iterations` runs them
    in turn, with the same results."""
    S0, J = starts.shape
    S = S0 if run_starts else 0
    R = U.shape[0]
    I = S + R
    N = node_cap.shape[0]
    pre_node = np.full((I, J), -1, np.int64)
    pre_cand = np.full((I, J), -1, np.int64)
    post_node = np.full((I, J), -1, np.int64)
    post_cand = np.full((I, J), -1, np.int64)
    post_moved = np.zeros((I, J), np.bool_)
    free_after = np.empty((I, N), np.int64)  # each pass's free GPUs per node
    scores = np.empty(I)
    keys = np.empty(I, np.int64)
    no_draws = np.zeros(J)
    hi = 0.5 + pi
    lo = 0.5 - pi
    for it in prange(I):
        order = np.empty(J, np.int64)
        use_rand = it >= S
        if not use_rand:
            order[:] = starts[it]
            u_config = no_draws
            u_node = no_draws
        else:
            order[:] = starts[(r0 + it - S) % S0]
            u = U[it - S, 0]
            for i in range(J - 1):
                a = order[i]
                b = order[i + 1]
                p = hi if weight[a] > weight[b] else lo
                if u[i] < p:
                    order[i] = b
                    order[i + 1] = a
            u_config = U[it - S, 1]
            u_node = U[it - S, 2]
        free = node_cap.copy()
        greedy_pass(order, use_rand, u_config, u_node, free, post_node[it], post_cand[it],
                    post_moved[it], ct, cg, ctime, cmov, mtime, nc, home, home_g, node_type,
                    node_cap, power, overhead, alpha, beta, meets, marginal, filled,
                    type_nodes, type_start, cw)
        pre_node[it] = post_node[it]
        pre_cand[it] = post_cand[it]
        free_after[it] = free
        keys[it] = _placement_key(post_node[it], post_cand[it])
    same = np.empty(I, np.int64)
    for it in range(I):
        same[it] = _same_placement(it, keys, pre_node, pre_cand)
    for it in prange(I):
        if same[it] < 0:
            scores[it] = post_process(post_node[it], post_cand[it], post_moved[it],
                                      free_after[it], ct, cg, ctime, cmov, mtime, cen, nc,
                                      home, use_lookahead, wait_penalty, due, weight,
                                      pressure_rank, node_type, power, type_capacity, now, eur,
                                      cw)
    for it in range(I):  # post-processing is a function of the placement: reuse its result
        k = same[it]
        if k >= 0:
            post_node[it] = post_node[k]
            post_cand[it] = post_cand[k]
            post_moved[it] = post_moved[k]
            scores[it] = scores[k]
    return pre_node, pre_cand, post_node, post_cand, post_moved, scores


def _named(fn, name):
    """`fn` under another name: numba caches a compiled function by its name, and the two
    compilations of one source below must not share a cache entry."""
    twin = types.FunctionType(fn.__code__, fn.__globals__, name, fn.__defaults__,
                              fn.__closure__)
    twin.__qualname__ = name
    twin.__doc__ = fn.__doc__
    return twin


run_iterations = njit(cache=True)(_run_iterations)
run_iterations_parallel = njit(cache=True, parallel=True)(
    _named(_run_iterations, "_run_iterations_parallel"))


@njit(cache=True)
def _placement_key(pn, pc):
    """A hash of a placement (node and candidate of every job), to find repeats quickly (a
    collision costs only a full comparison). Below 2**31 at every step: no overflow, compiled
    or interpreted."""
    h = 0
    for j in range(pn.shape[0]):
        h = (h * 1000003 + (pn[j] + 1) * 4099 + pc[j] + 1) % 2147483647
    return h


@njit(cache=True)
def _same_placement(it, keys, pre_node, pre_cand):
    """An earlier pass that placed every job exactly as pass `it` did, or -1. Randomised
    passes often repeat one another (at low load nearly half do); the moved flags and free
    GPUs follow from the placement, so its post-processing would be the same too."""
    for k in range(it):
        if keys[k] == keys[it] and np.array_equal(pre_node[k], pre_node[it]) and \
                np.array_equal(pre_cand[k], pre_cand[it]):
            return k
    return -1
