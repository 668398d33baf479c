"""A carbon cap (`cluster.yaml`: `carbon_cap_kg`, per `carbon_cap_window_s`, a day by default),
enforced by the drivers on every policy's decision, as the capacity check is.

The rule is admission control, not a second planner. After the policy decides, its plan is
projected to the end of the current window: every job it runs goes on, undisturbed, to its end
(or the window's), every node at its table draw for the GPUs it keeps busy (idle draw with
none), times the grid's intensity. Jobs are admitted in order (those running and kept where
they run first, then by due date) while that projection stays within what the window has left;
running non-preemptible jobs always are. The first job refused that may be stopped later is
then started anyway if the budget leaves it at least `MIN_SPLIT_S`: until the latest time at
which stopping it keeps the projection (the others running on) within the budget, when the
drivers are asked again (that decision pauses it). The budget is spent, not left over.
Refused jobs wait, with a reason, for the next window.

The projection is an upper bound of what the plan emits until the next decision: later
decisions start nothing more without asking again, a job whose own draw is above the table's
adds the difference, and power limits, cheaper restarts and jobs drawing less only lower the
draw. So the cap holds, except where it cannot: running jobs that may not be
stopped, or idle draw alone, over what is left. Then the run goes over and says by how much
(`carbon_cap_over_kg`); and where a window begins with no job admissible, the first one runs
anyway so the queue does not wait forever (counted the same way). Policies plan without the
cap (its forward checks see none); a carbon price is how they steer towards cleaner hours.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from ..cost import node_draw_w
from ..model import Cluster

MIN_SPLIT_S = 1.0  # a job started on what is left of the budget runs at least this long
_BISECTIONS = 60


@dataclass(frozen=True)
class Intent:
    """A job the plan runs: on node index `node` with `gpus` GPUs (a gang: on each of `node`
    and `more` too), until `end` if undisturbed; `must`: it cannot be refused (running, not
    preemptible, or its policy never stops it); `splittable`: it may be stopped when the
    budget runs out."""

    job_id: str
    node: int
    gpus: int
    end: float
    must: bool = False
    splittable: bool = True
    above_w: float = 0.0  # what it draws above the table's share on each of its nodes
    more: tuple[int, ...] = ()  # a gang's other nodes


@dataclass(frozen=True)
class Admission:
    admitted: frozenset[str]
    revisit_at: float | None  # ask again then (the budget spent, or a new window)
    left_g: float  # what the window had left when asked
    forced: bool = False  # a fresh window admitted nothing: its first job runs anyway


def projected_g(cluster: Cluster, now: float, until: float, intents: Sequence[Intent]) -> float:
    """Grams CO2eq the whole cluster emits from `now` to `until` if `intents` run from now to
    their ends and nothing else runs: each node's draw for its busy GPUs, idle draw with none
    (`cost.node_draw_w`), integrated over the intensity (`Cluster.carbon_g`)."""
    if until <= now:
        return 0.0
    by_node: dict[int, list[Intent]] = {}
    for i in intents:
        by_node.setdefault(i.node, []).append(i)
        for n in i.more:
            by_node.setdefault(n, []).append(i)
    total = 0.0
    for n, node in enumerate(cluster.nodes):
        kind = cluster.gpu_types[node.gpu_type]
        mine = by_node.get(n, [])
        ends = sorted({min(i.end, until) for i in mine if i.end > now} | {until})
        t = now
        for e in ends:
            if e <= t:
                continue
            busy = sum(i.gpus for i in mine if i.end > t)
            watts = node_draw_w(kind, busy) + sum(i.above_w for i in mine if i.end > t)
            if watts:
                total += cluster.carbon_g(watts, t, e)
            t = e
    return total


def _latest_stop(cluster: Cluster, now: float, window_end: float, admitted: Sequence[Intent],
                 split: Intent, budget_g: float) -> float:
    """The latest time to stop `split` so that it and `admitted` (running on to their ends)
    emit at most `budget_g` by the window's end (the projection grows with the stop time:
    bisection)."""
    lo, hi = now, min(split.end, window_end)
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2
        stopped = replace(split, end=mid)
        if projected_g(cluster, now, window_end, [*admitted, stopped]) <= budget_g:
            lo = mid
        else:
            hi = mid
    return lo


def admit(cluster: Cluster, now: float, left_g: float, intents: Sequence[Intent]) -> Admission:
    """Which of `intents` (in the order they should be admitted) run, given `left_g` grams left
    in the window holding `now` (module docstring)."""
    cap = cluster.carbon_cap
    assert cap is not None, "admit needs a cluster with a carbon cap"
    end = cap.window_of(now)[1]
    tolerance = 1e-9 * max(cap.kg * 1000.0, 1.0)
    admitted = [i for i in intents if i.must]
    refused = []
    for intent in intents:
        if intent.must:
            continue
        if projected_g(cluster, now, end, [*admitted, intent]) <= left_g + tolerance:
            admitted.append(intent)
        else:
            refused.append(intent)
    if not refused:
        return Admission(frozenset(i.job_id for i in admitted), None, left_g)
    revisit = end
    split = next((i for i in refused if i.splittable), None)
    if split is not None:
        stop = _latest_stop(cluster, now, end, admitted, split, left_g)
        if stop - now >= MIN_SPLIT_S:
            admitted.append(split)
            revisit = min(revisit, stop)
    fresh = left_g >= cap.kg * 1000.0 - tolerance
    forced = fresh and not any(not i.must for i in admitted)
    if forced:  # nothing fits a whole window's budget: the first job runs, over the cap
        admitted.append(refused[0])
    return Admission(frozenset(i.job_id for i in admitted), revisit, left_g, forced)
