"""How the greedy judges a candidate plan.

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

import heapq
from typing import Callable

from .planning import Candidate, PlanningContext

Placed = list[tuple[int, Candidate] | None]
Score = Callable[[PlanningContext, Placed], float]


def proxy(ctx: PlanningContext, placed: Placed) -> float:
    return ctx.proxy_cost(placed)


def lookahead(ctx: PlanningContext, placed: Placed) -> float:
    now, eur = ctx.now, ctx.eur_per_joule
    cost = 0.0
    per_node: dict[int, list[tuple[float, int]]] = {}
    free = list(ctx.type_capacity)
    releases: list[tuple[float, int, int]] = []  # (time from now, gpu type, gpus)
    waiting = []
    for j, e in enumerate(placed):
        if e is None:
            waiting.append(j)
            continue
        node, cand = e
        per_node.setdefault(node, []).append((cand.time_s, cand.gpus))
        free[cand.gpu_type] -= cand.gpus
        releases.append((cand.time_s, cand.gpu_type, cand.gpus))
        late = now + cand.time_s - ctx.due[j]
        if late > 0:
            cost += ctx.weight[j] * late
    for node, items in per_node.items():
        items.sort()
        power = ctx.power[ctx.node_type[node]]
        busy = sum(g for _, g in items)
        prev = 0.0
        for t, g in items:
            cost += power[busy - 1] * (t - prev) * eur
            busy -= g
            prev = t
    if not waiting:
        return cost
    waiting.sort(key=lambda j: ctx.pressure_rank[j])
    heapq.heapify(releases)
    t = 0.0
    while waiting:
        started = []
        for j in waiting:
            for cand in ctx.cands[j]:
                if free[cand.gpu_type] >= cand.gpus:
                    free[cand.gpu_type] -= cand.gpus
                    end = t + cand.time_s
                    heapq.heappush(releases, (end, cand.gpu_type, cand.gpus))
                    cost += max(cand.energy_eur, 0.0)  # waiting earns nothing at a negative price
                    late = now + end - ctx.due[j]
                    if late > 0:
                        cost += ctx.weight[j] * late
                    started.append(j)
                    break
        if started:
            waiting = [j for j in waiting if j not in started]
            if not waiting:
                break
        if not releases:  # cannot happen: every job fits an empty cluster
            break
        t, gtype, g = heapq.heappop(releases)
        free[gtype] += g
        while releases and releases[0][0] <= t:
            _, gtype, g = heapq.heappop(releases)
            free[gtype] += g
    return cost


SCORES: dict[str, Score] = {"proxy": proxy, "lookahead": lookahead}
