"""Wait for GPUs of a powered node: a job the plan would run alone on a node waits instead
for GPUs of a node the plan keeps powered, when that adds less energy.

A node draws its base power whenever any of its GPUs is busy, so a job that runs alone powers
a node for itself. The plan's run times say when GPUs free on the nodes it keeps powered. The
job waits if it would add less energy there than it draws alone, would end there with
`share` x its run time of slack, and could still start alone by then with that slack: if
later arrivals take those GPUs, it is no worse off than starting alone then. Only while the
offered load is below `WAIT_MAX_LOAD` (1: the cluster keeps up); in overload a GPU that frees
is rarely the waiting job's. A job that others wait to join is not held itself. Only for plans
that place every job, and never on nodes that stay powered when idle (`idle_w` > 0); the plan
asks to be revisited when the first such GPUs should free.
"""

from __future__ import annotations

import math
from bisect import bisect_right, insort
from dataclasses import dataclass
from typing import ClassVar

from ...model import Node
from ..base import Assignment, JobView, Plan, Snapshot
from ..decision import Decision, Reason
from ..options import at_least, option
from .company import DEFAULT_SHARE, all_placed_or_waiting
from .registry import StepContext, register_step

WAIT_MAX_LOAD = 1.0  # wait for a powered node only while the offered load is below this


def _busy_profile(runs: list[tuple[float, float, int]]) -> tuple[list[float], list[int]]:
    """The busy GPUs of `runs` as a step function: busy[i] holds over [times[i], times[i+1])
    (0 before the first time)."""
    deltas: dict[float, int] = {}
    for start, end, gpus in runs:
        deltas[start] = deltas.get(start, 0) + gpus
        deltas[end] = deltas.get(end, 0) - gpus
    times = sorted(deltas)
    busy, b = [], 0
    for t in times:
        b += deltas[t]
        busy.append(b)
    return times, busy


def _usage(profile: tuple[list[float], list[int]], t0: float,
           t1: float) -> list[tuple[float, int]]:
    """(from, busy GPUs) pieces of a busy profile (`_busy_profile`) over [t0, t1)."""
    times, busy = profile
    i = bisect_right(times, t0) - 1
    pieces = [(t0, busy[i] if i >= 0 else 0)]
    for k in range(i + 1, len(times)):
        if times[k] >= t1:
            break
        pieces.append((times[k], busy[k]))
    return pieces


def _earliest_start(runs: list[tuple[float, float, int]], capacity: int, gpus: int,
                    run_s: float, now: float,
                    profile: tuple[list[float], list[int]] | None = None,
                    latest: float = math.inf) -> float | None:
    """The first time after `now`, and by `latest`, at which `gpus` GPUs stay free for
    `run_s` among `runs` (a run's end: GPUs free only then)."""
    profile = profile or _busy_profile(runs)
    for t in sorted({e for _, e, _ in runs if e > now}):
        if t > latest:
            return None
        if all(b + gpus <= capacity for _, b in _usage(profile, t, t + run_s)):
            return t
    return None


def wait_for_a_powered_node(snapshot: Snapshot, plan: Plan, *, share: float = DEFAULT_SHARE
                            ) -> tuple[Decision, set[str]]:
    """`plan` less the jobs it would run alone on a node that can instead wait for GPUs to free
    on a node the plan keeps powered (see the module's docstring), revisited when the first
    such GPUs should free; and the nodes those jobs wait for. For a plan that places every
    job."""
    now = snapshot.time
    nodes = {n.name: n for n in snapshot.cluster.nodes}
    types = snapshot.cluster.gpu_types
    views = {v.job_id: v for v in snapshot.jobs}
    run_s = {j: snapshot.run_s(views[j], nodes[a.node].gpu_type, a) for j, a in plan.items()}
    runs: dict[str, list[tuple[float, float, int]]] = {}  # node -> (start, end, GPUs)
    for job_id, a in plan.items():
        runs.setdefault(a.node, []).append((now, now + run_s[job_id], a.gpus))
    alone = [j for j, a in plan.items()
             if len(runs[a.node]) == 1 and types[nodes[a.node].gpu_type].idle_w == 0]
    freeing = _freeing(runs, nodes)
    out = dict(plan)
    wake = math.inf
    awaited: set[str] = set()
    reasons: dict[str, Reason] = {}
    for job_id in sorted(alone, key=lambda j: views[j].job.due_date):
        view, home = views[job_id], plan[job_id]
        if len(runs[home.node]) > 1:
            continue  # an earlier job now waits for its GPUs: it has company coming
        kind = nodes[home.node].gpu_type
        # if the GPUs are taken when they free, the job can still start alone, keeping its slack
        latest = view.job.due_date - (1.0 + share) * snapshot.start_run_s(view, kind, home)
        alone_j = types[kind].power_w(home.gpus) * run_s[job_id]
        best = _cheapest_wait(snapshot, view, runs, nodes, home.node, share, freeing)
        if best is not None and best[0] < alone_j and now + 1.0 < best[2] <= latest:
            _, node, start, end, gpus = best
            del out[job_id]
            runs[home.node] = []
            runs[node].append((start, end, gpus))
            for name in (home.node, node):  # their entries move; the others stay sorted
                _refresh(freeing, runs, nodes, name)
            awaited.add(node)
            reasons[job_id] = Reason("waiting_for_gpus", until=start, node=node)
            wake = min(wake, start)
    return Decision.of(plan).replaced(out, revisit_at=wake if wake < math.inf else None,
                                      reasons=reasons), awaited


def _cheapest_wait(snapshot: Snapshot, view: JobView,
                   runs: dict[str, list[tuple[float, float, int]]], nodes: dict[str, Node],
                   home: str, share: float, freeing: dict[str, list[tuple[float, int, str]]]
                   ) -> tuple[float, str, float, float, int] | None:
    """(added energy J, node, start, end, GPUs) of the run of `view` that adds least energy to
    a powered node other than `home`, once enough GPUs free there, ending with `share` × its
    run time of slack; None if there is none. On a tie, the node listed first in `runs` and
    the configuration listed first in the profile. `freeing`: per GPU type, (when GPUs first
    free, position in `runs`, node) sorted by that time, so that nodes freeing too late for
    the job's slack are never looked at."""
    configs: dict[str, list[tuple[int, int]]] = {}  # by type: (position in profile, GPUs)
    for k, (gpu_type, gpus) in enumerate(snapshot.profiles.configs(view.job.profile)):
        configs.setdefault(gpu_type, []).append((k, gpus))
    now, due = snapshot.time, view.job.due_date
    best = None
    best_key: tuple[float, int, int] | None = None
    for gpu_type, choices in configs.items():
        kind = snapshot.cluster.gpu_types.get(gpu_type)
        if kind is None or gpu_type not in freeing:
            continue
        run_s = {}  # the same on every node of the type
        for _, gpus in choices:
            run_s[gpus] = snapshot.start_run_s(view, gpu_type, Assignment(home, gpus))
        latest_any = due - (1.0 + share) * min(run_s.values())
        for first_free, position, name in freeing[gpu_type]:
            if first_free > latest_any:
                break  # the rest free later still
            node_runs = runs[name]
            if name == home or not node_runs:
                continue
            profile = None
            for k, gpus in choices:
                run = run_s[gpus]
                latest = due - (1.0 + share) * run  # a later start leaves too little slack
                if gpus > nodes[name].gpus or first_free > latest:
                    continue
                profile = profile or _busy_profile(node_runs)
                start = _earliest_start(node_runs, nodes[name].gpus, gpus, run, now, profile,
                                        latest)
                if start is None:
                    continue
                pieces = _usage(profile, start, start + run)
                ends = [t for t, _ in pieces[1:]] + [start + run]
                added = sum((kind.power_w(busy + gpus) - kind.power_w(busy)) * (end - t)
                            for (t, busy), end in zip(pieces, ends))
                if best_key is None or (added, position, k) < best_key:
                    best_key = (added, position, k)
                    best = (added, name, start, start + run, gpus)
    return best


def _refresh(freeing: dict[str, list[tuple[float, int, str]]],
             runs: dict[str, list[tuple[float, float, int]]], nodes: dict[str, Node],
             name: str) -> None:
    """Node `name`'s entry in `freeing` after its runs changed."""
    entries = freeing.setdefault(nodes[name].gpu_type, [])
    position = next((p for _, p, n in entries if n == name), None)
    if position is None:
        position = list(runs).index(name)
    else:
        entries[:] = [e for e in entries if e[2] != name]
    if runs[name]:
        insort(entries, (min(e for _, e, _ in runs[name]), position, name))


def _freeing(runs: dict[str, list[tuple[float, float, int]]],
             nodes: dict[str, Node]) -> dict[str, list[tuple[float, int, str]]]:
    """Per GPU type: (when GPUs first free, position in `runs`, node), earliest first."""
    out: dict[str, list[tuple[float, int, str]]] = {}
    for position, (name, node_runs) in enumerate(runs.items()):
        if node_runs:
            out.setdefault(nodes[name].gpu_type, []).append(
                (min(e for _, e, _ in node_runs), position, name))
    for entries in out.values():
        entries.sort()
    return out


@register_step("wait")
@dataclass(frozen=True)
class WaitForPoweredNode:
    """Step: a job the plan would run alone on a node waits for GPUs of a powered node
    (`wait_for_a_powered_node`), while the offered load is below `WAIT_MAX_LOAD`."""

    share: float
    name: ClassVar[str] = "wait"

    @dataclass(frozen=True)
    class Options:
        share: float | None = option(
            DEFAULT_SHARE, "slack a waiting job keeps, as a share of its run time; off: the "
            "step is off")

        def __post_init__(self) -> None:
            at_least("wait.share", self.share, 0.0, off=True)

    @classmethod
    def configure(cls, options: Options) -> "WaitForPoweredNode | None":
        return None if options.share is None else cls(options.share)

    def apply(self, snapshot: Snapshot, decision: Decision, ctx: StepContext) -> Decision:
        if (snapshot.cluster.tariff is not None or not ctx.load < WAIT_MAX_LOAD or ctx.awaited
                or not all_placed_or_waiting(snapshot, decision)):
            return decision
        held, awaited = wait_for_a_powered_node(snapshot, decision, share=self.share)
        ctx.awaited |= awaited
        return held
