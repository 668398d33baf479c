"""How the greedy judges a candidate plan (compiled in kernel.py, called here on a plan of
`Candidate`s: one implementation for the greedy pass, the local searches and resizing).

`proxy` is the paper's: energy until the plan's first predicted completion, plus the tardiness
scheduled jobs would have then, plus 100 × the lateness of waiting jobs on their slowest
configuration. It looks only up to the first completion, so leaving non-urgent jobs waiting
looks cheap, and more iterations can make the Randomized Greedy worse.

`lookahead` estimates the total cost of finishing every job under the plan: the exact node
energy of scheduled jobs until each finishes (busy-GPU counts fall as jobs end) and their
tardiness, and for waiting jobs a list-scheduling forecast: in the plan's pressure order each
starts, on its preferred configuration that has room, as soon as enough GPUs of that type are
released, and pays the energy of that run alone on a node and its forecast tardiness. The
forecast ignores future arrivals, so it is optimistic about waiting; charging waiting jobs the
energy of a node of their own (not a share of a full node) keeps waiting from looking cheaper
than running now. At a negative price a waiting job's forecast run earns nothing (as in
`milp`): its run alone would earn more than sharing a node now, so waiting would look best.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .planning import Candidate, PlanningContext

Placed = list[tuple[int, Candidate] | None]
Score = Callable[[PlanningContext, Placed], float]


def _placed_arrays(placed: Placed) -> tuple[np.ndarray, ...]:
    """Node (-1: waiting), GPU type, GPU count and run time of each job's placed candidate."""
    n = len(placed)
    nodes, types, gpus, times = [-1] * n, [0] * n, [0] * n, [0.0] * n
    for j, e in enumerate(placed):  # Python lists, then one array each: numpy's per-item
        if e is not None:           # writes took most of a resize step's time
            c = e[1]
            nodes[j], types[j], gpus[j], times[j] = e[0], c.gpu_type, c.gpus, c.time_s
    return (np.array(nodes, np.int64), np.array(types, np.int64), np.array(gpus, np.int64),
            np.array(times, float))


def _score_arrays(ctx: PlanningContext, name: str, pn: np.ndarray, pt: np.ndarray,
                  pg: np.ndarray, ptime: np.ndarray) -> float:
    """The named score of a plan given as _placed_arrays' arrays (the kernel's, the one
    implementation of each)."""
    from .kernel import lookahead_score, proxy_score

    k = ctx.packed
    if name == "proxy":
        return float(proxy_score(pn, pg, ptime, k.wait_penalty, k.due, k.weight, k.node_type,
                                 k.power, float(ctx.now), float(ctx.eur_per_joule)))
    return float(lookahead_score(pn, pt, pg, ptime, k.ct, k.cg, k.ctime, k.cen, k.nc, k.due,
                                 k.weight, ctx.pressure_ranks, k.node_type, k.power,
                                 k.type_capacity, float(ctx.now), float(ctx.eur_per_joule)))


def proxy(ctx: PlanningContext, placed: Placed) -> float:
    """The paper's score (kernel.proxy_score)."""
    return _score_arrays(ctx, "proxy", *_placed_arrays(placed))


def lookahead(ctx: PlanningContext, placed: Placed) -> float:
    """The look-ahead score (kernel.lookahead_score)."""
    return _score_arrays(ctx, "lookahead", *_placed_arrays(placed))


class NeighbourScores:
    """Scores of plans one move away from a base plan (a hill climb's neighbours, with the
    jobs each move changed): the base's arrays are built once and each neighbour's are a
    copy with its changed entries patched, so a neighbour costs Python work in its changes,
    not in the queue (rebuilding the arrays of every job for every neighbour was most of a
    resize step). The same arrays as built from scratch, so exactly the same score."""

    def __init__(self, ctx: PlanningContext, name: str) -> None:
        self.ctx, self.name = ctx, name
        self.arrays: tuple[np.ndarray, ...] = ()
        self.last: tuple[Placed | None, tuple[np.ndarray, ...]] = (None, ())

    def rebase(self, placed: Placed) -> None:
        """Neighbours are now one move from `placed` (the last plan scored, when the climb
        accepted it: its arrays are reused)."""
        plan, arrays = self.last
        self.arrays = arrays if plan is placed else _placed_arrays(placed)

    def score(self, plan: Placed, changed: list[int]) -> float:
        pn, pt, pg, ptime = (a.copy() for a in self.arrays)
        for j in changed:
            e = plan[j]
            if e is None:
                pn[j], pt[j], pg[j], ptime[j] = -1, 0, 0, 0.0
            else:
                c = e[1]
                pn[j], pt[j], pg[j], ptime[j] = e[0], c.gpu_type, c.gpus, c.time_s
        self.last = (plan, (pn, pt, pg, ptime))
        return _score_arrays(self.ctx, self.name, pn, pt, pg, ptime)


SCORES: dict[str, Score] = {"proxy": proxy, "lookahead": lookahead}
