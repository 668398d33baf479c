"""How the greedy judges a candidate plan (compiled in kernel.py, called here on a
`Placement`: one implementation for the greedy pass, the local searches and resizing).

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

from .orderings import pressure_ranks
from .placement import Placement
from .planning import PlanningContext

Score = Callable[[PlanningContext, Placement], float]


def score(ctx: PlanningContext, name: str, placement: Placement) -> float:
    """The named score of a placement (kernel._score: the one implementation of each)."""
    from .kernel import _score

    k = ctx.packed
    return float(_score(name == "lookahead", placement.node, placement.cand, placement.moved,
                        k.ct, k.cg, k.ctime, k.mtime, k.cen, k.nc, k.wait_penalty, k.due,
                        k.weight, pressure_ranks(ctx), k.node_type, k.power, k.type_capacity,
                        float(ctx.now), float(ctx.eur_per_joule), k.cw))


def proxy(ctx: PlanningContext, placement: Placement) -> float:
    """The paper's score (kernel.proxy_score)."""
    return score(ctx, "proxy", placement)


def lookahead(ctx: PlanningContext, placement: Placement) -> float:
    """The look-ahead score (kernel.lookahead_score)."""
    return score(ctx, "lookahead", placement)


SCORES: dict[str, Score] = {"proxy": proxy, "lookahead": lookahead}
