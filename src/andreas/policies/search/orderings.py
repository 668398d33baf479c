"""Job orderings, shared by the non-preemptive baselines (on waiting jobs) and by the greedy
(on every unfinished job). Each takes a planning context and job indices and returns them in
the order they should be served; ties keep submission order.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .planning import PlanningContext

Ordering = Callable[[PlanningContext, list[int]], list[int]]
ATC_K = 2.0  # look-ahead factor of the ATC rule; 2 is the textbook default for tardiness


def _by(key: Callable[[PlanningContext, int], float]) -> Ordering:
    def order(ctx: PlanningContext, jobs: list[int]) -> list[int]:
        return sorted(jobs, key=lambda j: (key(ctx, j), ctx.views[j].job.submit_time))
    return order


fifo = _by(lambda ctx, j: ctx.views[j].job.submit_time)
edf = _by(lambda ctx, j: ctx.due[j])
ps = _by(lambda ctx, j: -ctx.weight[j])
wspt = _by(lambda ctx, j: -ctx.weight[j] / ctx.tmin[j])
"""Weighted shortest processing time: weight over the fastest remaining run time."""


def pressure(ctx: PlanningContext, jobs: list[int]) -> list[int]:
    """ANDREAS: decreasing now + t_min − due, multiplied by the weight when positive."""
    tmin = ctx.table.tmin[jobs]
    if np.isnan(tmin).any():  # a job with no configuration here: the sort's own NaN order
        def p(j: int) -> float:
            x = ctx.now + ctx.tmin[j] - ctx.due[j]
            return x * ctx.weight[j] if x > 0 else x
        return sorted(jobs, key=lambda j: (-p(j), ctx.views[j].job.submit_time))
    # the same keys and the same stable order as that sort, in numpy (the greedy sorts every
    # job by pressure at every decision)
    x = ctx.now + tmin - np.array([ctx.due[j] for j in jobs])
    key = np.where(x > 0, x * np.array([ctx.weight[j] for j in jobs]), x)
    submit = np.array([ctx.views[j].job.submit_time for j in jobs])
    return np.asarray(jobs)[np.lexsort((submit, -key))].tolist()


def atc(ctx: PlanningContext, jobs: list[int]) -> list[int]:
    """Apparent tardiness cost: (w/p)·exp(−max(0, d − p − now) / (K·p̄)), highest first."""
    if not jobs:
        return []
    p_bar = sum(ctx.tmin[j] for j in jobs) / len(jobs)

    def index(j: int) -> float:
        slack = max(0.0, ctx.due[j] - ctx.tmin[j] - ctx.now)
        return ctx.weight[j] / ctx.tmin[j] * math.exp(-slack / (ATC_K * p_bar))
    return sorted(jobs, key=lambda j: (-index(j), ctx.views[j].job.submit_time))


OVERLOAD_SHARE = 0.25  # share of jobs past hope that switches to ATC (tuned on the paper sweep)


def adaptive(ctx: PlanningContext, jobs: list[int]) -> list[int]:
    """Pressure order while most jobs can still meet their due date; ATC once a quarter of
    them cannot even on their fastest configuration. Serving the most-late job first (pressure)
    protects due dates that are still reachable; when most are lost, weighted shortest-first
    (ATC, which tends to WSPT as slack vanishes) minimises the weighted tardiness."""
    return ORDERINGS[adaptive_choice(ctx, jobs)](ctx, jobs)


def adaptive_choice(ctx: PlanningContext, jobs: list[int]) -> str:
    """The order `adaptive` serves `jobs` in: "atc" or "pressure"."""
    hopeless = sum(1 for j in jobs if ctx.now + ctx.tmin[j] > ctx.due[j])
    return "atc" if jobs and hopeless >= OVERLOAD_SHARE * len(jobs) else "pressure"


ORDERINGS: dict[str, Ordering] = {"adaptive": adaptive, "fifo": fifo, "edf": edf, "ps": ps,
                                  "wspt": wspt, "atc": atc,
                                  "pressure": pressure}


def ordered(ctx: PlanningContext, order: str) -> list[int]:
    """Every job of `ctx` in the named order (`ORDERINGS`), sorted once per context: the
    passes' starting order and the look-ahead's pressure ranks are often the same sort. A new
    list each call (callers may reorder it)."""
    if order == "adaptive":
        order = adaptive_choice(ctx, list(range(len(ctx.views))))
    cached = ctx._orders.get(order)
    if cached is None:
        cached = ctx._orders[order] = ORDERINGS[order](ctx, list(range(len(ctx.views))))
    return list(cached)


def pressure_ranks(ctx: PlanningContext) -> np.ndarray:
    """Every job's rank in the pressure order, as the kernel's array (the look-ahead score's
    and the local search's), made once per context; the baselines never pay for the sort."""
    if ctx._pressure_ranks is None:
        rank = np.empty(len(ctx.views), np.int64)
        rank[ordered(ctx, "pressure")] = np.arange(len(ctx.views), dtype=np.int64)
        ctx._pressure_ranks = rank
    return ctx._pressure_ranks
