"""The candidate table's arithmetic for one decision, compiled with numba (planning.py's
`CandidateTable.build` calls it).

A forward check replays thousands of small decisions (a few jobs, a few configurations each);
built from numpy calls on small arrays, each table cost some forty calls of a few microseconds.
One compiled loop does the same arithmetic, in the same order, as those calls did: the tables
are equal to the bit (tests/test_planning_tables.py compares them with the numpy twin kept
beside it). Like kernel.py, this module imports nothing of the policies.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def candidate_times(pidx, p_type, p_gpus, p_spe, p_n, rem, started, restart_left, cur_type,
                    cur_gpus, overhead):
    """Each job's candidates in its profile's order: GPU type, GPU count, and run time
    (epochs x s/epoch, + the restart overhead of a started job, or what is left of it on the
    configuration it runs on). `overhead[p, c]`: the restart overhead of profile row p's
    configuration c. [J, C] arrays (C: the profile table's width; padding 0), and the number
    of candidates per job."""
    J = pidx.shape[0]
    C = p_type.shape[1]
    ct = np.zeros((J, C), np.int64)
    cg = np.zeros((J, C), np.int64)
    times = np.zeros((J, C))
    nc = np.empty(J, np.int64)
    for j in range(J):
        p = pidx[j]
        nc[j] = p_n[p]
        for c in range(C):
            t, g = p_type[p, c], p_gpus[p, c]
            run = rem[j] * p_spe[p, c]
            ct[j, c], cg[j, c] = t, g
            if t == cur_type[j] and g == cur_gpus[j]:
                times[j, c] = run + restart_left[j]
            elif started[j]:
                times[j, c] = run + overhead[p, c]
            else:
                times[j, c] = run
    return ct, cg, times, nc


@njit(cache=True)
def flat_energy(pidx, p_watts, times, now, eur_per_joule):
    """Energy cost of every candidate at one price: the node draw above idle x the run
    (measured as (now + time) - now, the rounding the tariff's integral sees)."""
    J, C = times.shape
    energy = np.zeros((J, C))
    for j in range(J):
        for c in range(C):
            energy[j, c] = p_watts[pidx[j], c] * ((now + times[j, c]) - now) * eur_per_joule
    return energy


@njit(cache=True)
def _before(miss_a, k1a, k2a, a, miss_b, k1b, k2b, b):
    """Whether entry a sorts before entry b: by (miss, k1, k2), ties by column (stable)."""
    if miss_a != miss_b:
        return miss_a < miss_b
    if k1a != k1b:
        return k1a < k1b
    if k2a != k2b:
        return k2a < k2b
    return a < b


@njit(cache=True)
def ordered_rows(ct, cg, times, energy, nc, due, now):
    """Each row's entries in the order policies try them: those that meet the due date
    first, cheapest first (then fastest), then the others fastest first (then cheapest),
    padding last; stable. Returns ct, cg, run times, energies (padding 0) and the on-time
    flags, reordered; which entries are real; and each job's fastest and slowest run time
    (NaN for a job with no candidate)."""
    J, C = times.shape
    o_ct = np.zeros((J, C), np.int64)
    o_cg = np.zeros((J, C), np.int64)
    o_time = np.zeros((J, C))
    o_en = np.zeros((J, C))
    o_ok = np.zeros((J, C), np.bool_)
    o_real = np.zeros((J, C), np.bool_)
    tmin = np.full(J, np.nan)
    tmax = np.full(J, np.nan)
    miss = np.empty(C, np.int64)
    k1 = np.empty(C)
    k2 = np.empty(C)
    ok = np.empty(C, np.bool_)
    idx = np.empty(C, np.int64)
    for j in range(J):
        n = nc[j]
        for c in range(C):
            real = c < n
            ok[c] = real and now + times[j, c] <= due[j]
            miss[c] = (0 if ok[c] else 1) if real else 2
            k1[c] = energy[j, c] if ok[c] else times[j, c]
            k2[c] = times[j, c] if ok[c] else energy[j, c]
            idx[c] = c
        for a in range(1, C):  # insertion sort: a row holds a few configurations
            x = idx[a]
            b = a - 1
            while b >= 0 and _before(miss[x], k1[x], k2[x], x, miss[idx[b]], k1[idx[b]],
                                     k2[idx[b]], idx[b]):
                idx[b + 1] = idx[b]
                b -= 1
            idx[b + 1] = x
        for c in range(n):  # the real entries come first; padding stays 0
            s = idx[c]
            o_ct[j, c], o_cg[j, c] = ct[j, s], cg[j, s]
            o_time[j, c], o_en[j, c], o_ok[j, c] = times[j, s], energy[j, s], ok[s]
            o_real[j, c] = True
            if c == 0 or times[j, s] < tmin[j]:
                tmin[j] = times[j, s]
            if c == 0 or times[j, s] > tmax[j]:
                tmax[j] = times[j, s]
    return o_ct, o_cg, o_time, o_en, o_ok, o_real, tmin, tmax
