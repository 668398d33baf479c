"""Run the queue on fewer powered nodes, or smaller configurations, when a timeline of the
known jobs says every one still ends in time.

The greedy pass decides only what runs now, one job at a time. A job that finds the efficient
GPUs full goes to a slow node of its own (on the authors' cluster a TURING GPU draws 400 W
alone for a run 2.6 times as long as on a TESLA GPU, where one more busy GPU adds 170 W), even
when jobs with slack could pause and give it their GPUs; and the first job on an empty node
takes two GPUs, cheaper for a node of its own, before the jobs that will share the node are
placed. The hindsight bound does neither on its small instances: it time-shares the efficient
node, one GPU a job. An online policy can check the same for the jobs it knows, with a
timeline: the queue simulated forward on some of the nodes the plan powers, jobs in order of
their latest start (due date less run time), each on the configuration there that adds least
energy to a powered node while it meets its due date (else the fastest), preempted only at
completions. The plan's own nodes are tried first, then without one node at a time, the one
with the most energy per busy GPU-second first; the cheapest timeline (energy plus tardiness)
whose every job ends in time, if cheaper than the plan, gives what runs now. Some jobs then
pause, shrink or wait for GPUs of a powered node, and the dropped nodes switch off.

"In time" is where the bet on no arrivals is hedged. A job the plan runs is in time if it
ends no later than under the plan: the timeline then only spares it the slow node. It may end
later only while it keeps `share` × its run time of slack and at least min(its slack under the
plan, `guard` (5) × its run time): only jobs with days of slack pause for others. A job that
ends later than planned, or that the plan leaves waiting, has its end stretched by `margin`
(0.02) × the offered load on the nodes kept × the time from now, for the work that will
arrive meanwhile. Looser hedges left jobs late under overload once more jobs came (measured in
docs/holds-and-consolidation.md). With the load unknown nothing changes.

The arriving jobs themselves are hedged apart: while the newest arrivals' median slack is under
`arrival_slack` (0.5) × their run time, the step leaves the plan as it is. Jobs that come with
almost no slack must start at once on fast GPUs; a timeline that keeps GPUs busy with stretched
runs and switches nodes off makes them late (bench/zoo-holdout2.md: due dates 1.0-1.2x).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from ...cost import tardiness_cost
from ...model import GpuType, Node
from ..base import Assignment, JobView, Plan, Snapshot
from ..decision import Decision, Reason
from ..options import at_least, option
from .company import DEFAULT_MAX_LOAD, DEFAULT_SHARE
from .registry import StepContext, register_step

EPS = 1e-9
ARRIVAL_MARGIN = 0.02  # share of the arriving work (offered load) that stretches each end
# Consolidate only while the newest arrivals' median slack is at least this share of their run
# time: the jobs the timeline does not see must start when they come, on GPUs it keeps busy.
# Half a run, as `slack_guard` counts a job with less as one with no slack to spare.
ARRIVAL_SLACK = 0.5
DELAY_GUARD = 5.0  # a job ends later than planned only keeping this many run times of slack
# Timelines tried per decision, counted in (jobs in view)² × nodes, about the placement steps
# one takes: a paper instance (10 nodes, up to ~50 jobs in view) stays inside; a 501-job queue
# on 50 nodes tries none (a long queue leaves little to consolidate anyway). With a pass budget
# (trace replays) refine does not call this at all.
WORK_BUDGET = 500_000

Runs = list[tuple[float, int]]  # (end, busy GPUs) of the jobs a node runs from now


@dataclass
class _Task:
    """A job in the timeline: its fixed priority, its configuration on each GPU type of the
    nodes kept, when it must end, and its progress as the timeline goes."""

    job_id: str
    key: float  # latest start (due date less its fastest run here): the timeline's order
    due: float
    weight: float
    deadline: float  # it must end by then (before the arrival margin)
    configs: list[tuple[str, int, float]]  # (GPU type, GPUs, s/epoch), the preferred first
    epochs: float  # remaining
    node: str | None  # where it ran in the previous step (at first: where it runs now)
    gpus: int
    restart_left: float  # restart still to pay before progress, if it stays on `node`
    started: bool  # a start elsewhere pays the overhead (it has run, or first starts pay it)
    planned_end: float  # under the plan (-inf if it waits there): no later, no margin
    profile: str = ""  # its profile: its own start-up where the profile gives one


def node_energy(kind: GpuType, runs: Runs) -> float:
    """Joules a node of `kind` draws over `runs`, all started now, off once none is busy."""
    busy = sum(g for _, g in runs)
    joules, prev = 0.0, 0.0
    for end, gpus in sorted(runs):
        joules += kind.power_w(busy) * (end - prev)
        busy -= gpus
        prev = end
    return joules


def timeline(snapshot: Snapshot, tasks: list[_Task], nodes: list[Node], stretch: float,
             limit: float = math.inf
             ) -> tuple[float, dict[str, Assignment], set[str]] | None:
    """Run `tasks` on `nodes` (see the module's docstring): at each step, in priority order,
    each job takes its preferred configuration with room, on the node it ran on, else on the
    fullest that fits; the step lasts until the first of them ends. Returns the timeline's
    cost (EUR), its first step and the nodes that the jobs it leaves waiting run on later; or
    None if a job ends after its deadline (its end, if later than planned, stretched by
    `stretch` × the time from now), none fits, or the cost reaches `limit`."""
    now = snapshot.time
    overhead = snapshot.cluster.restart_overhead_s
    kinds = {n.name: snapshot.cluster.gpu_types[n.gpu_type] for n in nodes}
    eur = snapshot.cluster.eur_per_joule()
    joules = tardiness = 0.0
    first: dict[str, Assignment] | None = None
    awaited: set[str] = set()
    t = now
    active = sorted(tasks, key=lambda k: (k.key, k.job_id))
    of_type: dict[str, list[str]] = {}
    for n in nodes:
        of_type.setdefault(n.gpu_type, []).append(n.name)
    capacity = {n.name: n.gpus for n in nodes}
    while active:
        free = dict(capacity)
        left = sum(free.values())
        step: list[tuple[_Task, str, int, float, float]] = []  # task, node, GPUs, pay, s/epoch
        for task in active:
            if not left:
                break  # every GPU taken: the rest wait this step
            best = None
            for kind_name, gpus, spe in task.configs:
                for name in of_type[kind_name]:
                    if free[name] < gpus:
                        continue
                    rank = (not (name == task.node and gpus == task.gpus), free[name], name)
                    if best is None or rank < best[0]:
                        best = (rank, name, gpus, spe)
                if best is not None:
                    break  # the preferred type with room
            if best is None:
                continue
            rank, name, gpus, spe = best
            free[name] -= gpus
            left -= gpus
            pay = task.restart_left if not rank[0] else (
                snapshot.profiles.restart_s(task.profile, (kinds[name].name, gpus), overhead)
                if task.started else 0.0)
            step.append((task, name, gpus, pay, spe))
        if not step:
            return None
        if first is None:
            first = {task.job_id: Assignment(name, gpus) for task, name, gpus, _, _ in step}
        else:
            awaited.update(name for task, name, _, _, _ in step if task.job_id not in first)
        dt = min(pay + task.epochs * spe for task, _, _, pay, spe in step)
        end = t + dt
        for name, kind in kinds.items():
            busy = capacity[name] - free[name]
            if busy:
                joules += kind.power_w(busy) * dt
        for task in active:
            task.node, task.restart_left = None, 0.0
        for task, name, gpus, pay, spe in step:
            if pay + task.epochs * spe <= dt + EPS:
                task.epochs = 0.0
                margin = stretch * (end - now) if end > task.planned_end + EPS else 0.0
                if end + margin > task.deadline + EPS:
                    return None
                tardiness += tardiness_cost(task.weight, end, task.due)
            else:
                task.epochs -= max(0.0, dt - pay) / spe
            task.node, task.gpus, task.restart_left, task.started = \
                name, gpus, max(0.0, pay - dt), True
        if joules * eur + tardiness >= limit:
            return None
        active = [task for task in active if task.epochs > EPS]
        t = end
    return joules * eur + tardiness, first or {}, awaited


def _configs(snapshot: Snapshot, view: JobView, largest: dict[str, int], share: float
             ) -> list[tuple[str, int, float]]:
    """The job's configuration on each GPU type kept, as (type, GPUs, seconds per epoch), the
    preferred first. On each type: among those that meet its due date with `share` of slack,
    the one that adds least energy to a node of the type otherwise full (`largest` GPUs: a
    share of a powered node), else the fastest. Types where it meets its due date come first,
    by that energy, then the others by run time."""
    now, due = snapshot.time, view.job.due_date
    ranked = []
    for kind_name, cap in largest.items():
        kind = snapshot.cluster.gpu_types[kind_name]
        options = [(g, spe) for (t, g), spe in snapshot.profiles.configs(view.job.profile).items()
                   if t == kind_name and g <= cap]
        if not options:
            continue
        on_time = []
        for g, spe in options:
            run = view.remaining_epochs * spe
            if now + (1.0 + share) * run <= due:
                on_time.append(((kind.power_w(cap) - kind.power_w(cap - g)) * run, run, g, spe))
        if on_time:
            added, run, g, spe = min(on_time)
            ranked.append(((0, added, run), kind_name, g, spe))
        else:
            g, spe = min(options, key=lambda o: (o[1], o[0]))
            ranked.append(((1, view.remaining_epochs * spe, 0.0), kind_name, g, spe))
    ranked.sort(key=lambda r: (r[0], r[1]))
    return [(kind_name, g, spe) for _, kind_name, g, spe in ranked]


def consolidate(snapshot: Snapshot, plan: Plan, *, share: float, load: float,
                guard: float = DELAY_GUARD, margin: float = ARRIVAL_MARGIN
                ) -> tuple[Plan, set[str]]:
    """`plan`, or the first step of the cheapest timeline that keeps every job in time (see the
    module's docstring); and the nodes that jobs wait to run on. `load`: the offered load (inf
    while unknown: `plan` is kept); `margin`: the share of it that stretches each end. Not for
    nodes that stay powered when idle (the plan is kept)."""
    now = snapshot.time
    cluster = snapshot.cluster
    types = cluster.gpu_types
    by_name = {n.name: n for n in cluster.nodes}
    used = sorted({a.node for a in plan.values()})
    if not used or not math.isfinite(load) or any(
            types[by_name[n].gpu_type].idle_w > 0 for n in used):
        return plan, set()
    runs: dict[str, Runs] = {n: [] for n in used}
    plan_end: dict[str, float] = {}
    tardiness = 0.0
    for view in snapshot.jobs:
        a = plan.get(view.job_id)
        if a is not None:
            end = now + snapshot.run_s(view, by_name[a.node].gpu_type, a)
            plan_end[view.job_id] = end
            runs[a.node].append((end - now, a.gpus))
            tardiness += tardiness_cost(view.job.tardiness_weight, end, view.job.due_date)
    joules = {n: node_energy(types[by_name[n].gpu_type], runs[n]) for n in used}
    best_cost = sum(joules.values()) * cluster.eur_per_joule() + tardiness
    density = {n: joules[n] / max(EPS, sum(e * g for e, g in runs[n])) for n in used}
    total_gpus = cluster.total_gpus

    made: dict[tuple, list[tuple]] = {}  # the jobs' timeline terms, per GPU types kept

    def tasks_on(subset: list[Node]) -> list[_Task] | None:
        largest: dict[str, int] = {}
        for n in subset:
            largest[n.gpu_type] = max(largest.get(n.gpu_type, 0), n.gpus)
        key = tuple(sorted(largest.items()))
        if key not in made:
            terms = []
            for view in snapshot.jobs:
                configs = _configs(snapshot, view, largest, share)
                if not configs:
                    made[key] = []
                    break
                fastest = min(view.remaining_epochs * spe for _, _, spe in configs)
                due = view.job.due_date
                deadline = due - share * fastest
                end = plan_end.get(view.job_id)
                if end is not None:  # later than under the plan only with slack to spare
                    kept = min(due - end, guard * fastest)
                    deadline = max(end, due - max(share * fastest, kept))
                terms.append((view, due - fastest, deadline, configs))
            else:
                made[key] = terms
        if not made[key]:
            return None
        return [_Task(v.job_id, k, v.job.due_date, v.job.tardiness_weight, d, c,
                      v.remaining_epochs, v.assignment.node if v.assignment else None,
                      v.assignment.gpus if v.assignment else 0, v.restart_remaining_s,
                      snapshot.pays_overhead(v), plan_end.get(v.job_id, -math.inf),
                      v.job.profile)
                for v, k, d, c in made[key]]

    keep = list(used)
    best: tuple[dict[str, Assignment], set[str]] | None = None
    work = 0
    for drop in [None, *sorted(used, key=lambda n: (-density[n], n))]:
        subset = [by_name[n] for n in keep if n != drop]
        work += len(snapshot.jobs) ** 2 * len(subset)
        if work > WORK_BUDGET:
            break
        tasks = tasks_on(subset) if subset else None
        if not tasks:
            continue
        stretch = margin * load * total_gpus / sum(n.gpus for n in subset)
        result = timeline(snapshot, tasks, subset, stretch, best_cost - EPS)
        if result is not None and result[0] < best_cost - EPS:
            keep = [n.name for n in subset]
            best_cost, best = result[0], result[1:]
    return (plan, set()) if best is None else best


@register_step("consolidate")
@dataclass(frozen=True)
class Consolidate:
    """Step: run the queue on fewer powered nodes or smaller configurations when a timeline of
    the known jobs keeps each in time (`consolidate`). Not with a tariff (prices decide when
    jobs wait), nor with a pass budget (the timeline is plain Python: trace replays), nor while
    jobs arrive with little slack (`arrival_slack`)."""

    share: float
    margin: float
    max_load: float = math.inf
    arrival_slack: float | None = ARRIVAL_SLACK
    name: ClassVar[str] = "consolidate"

    @dataclass(frozen=True)
    class Options:
        share: float | None = option(
            DEFAULT_SHARE, "slack a job that ends later than planned keeps, as a share of its "
            "run time; off: the step is off")
        margin: float | None = option(
            ARRIVAL_MARGIN, "run the queue on fewer powered nodes when a timeline of the known "
            "jobs keeps each in time, ends stretched by this share of the offered load x the "
            "time from now; off: the step is off")
        max_load: float = option(
            DEFAULT_MAX_LOAD, "consolidate only while the offered load is below this: nearer "
            "full load the smaller, longer runs it chooses leave arrivals slow nodes "
            "(bench/zoo.md)")
        arrival_slack: float | None = option(
            ARRIVAL_SLACK, "consolidate only while the newest arrivals' median slack (due date "
            "less submission, as a share of their fastest run time, less 1) is at least this: "
            "jobs arriving with less must start at once; off: whatever the arrivals")

        def __post_init__(self) -> None:
            at_least("consolidate.share", self.share, 0.0, off=True)
            at_least("consolidate.arrival_slack", self.arrival_slack, 0.0, off=True)
            at_least("consolidate.margin", self.margin, 0.0, off=True)
            at_least("consolidate.max_load", self.max_load, 0.0)

    @classmethod
    def configure(cls, options: Options) -> "Consolidate | None":
        if options.share is None or options.margin is None:
            return None
        return cls(options.share, options.margin, options.max_load, options.arrival_slack)

    def apply(self, snapshot: Snapshot, decision: Decision, ctx: StepContext) -> Decision:
        if ctx.budgeted or snapshot.cluster.tariff is not None or not ctx.load < self.max_load:
            return decision
        if self.arrival_slack is not None and \
                not ctx.arrivals.median_slack() >= self.arrival_slack:
            return decision
        plan, awaited = consolidate(snapshot, decision, share=self.share, load=ctx.load,
                                    margin=self.margin)
        ctx.awaited |= awaited
        left = {v.job_id: Reason("consolidated") for v in snapshot.jobs
                if v.job_id not in plan and v.job_id in decision}
        return decision.replaced(plan, reasons=left)
