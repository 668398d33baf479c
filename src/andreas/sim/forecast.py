"""Forecast a live cluster: simulate the rest of the queue from a snapshot and a plan.

The live service calls this after each decision, so the costs it shows (and that the
validation compares with measurements) come from the same simulator and cost model as
offline experiments: the plan just applied is the starting state, later decisions are made
by a fresh copy of the same policy, and no further arrivals are assumed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from ..model import Job, Profiles, Scenario
from ..policies.base import (
    Assignment,
    JobView,
    Plan,
    Policy,
    Snapshot,
    check_plan,
    revisit_at,
)
from ..policies.decision import Decision, Reason
from .engine import Simulator


@dataclass(frozen=True)
class ForeseenDecision:
    """A decision the forecast made at a future event: which jobs were active, what plan."""

    time: float
    jobs: frozenset[str]
    plan: Mapping


def foreseen_for(snapshot: Snapshot, foreseen: Sequence[ForeseenDecision],
                 policy_name: str) -> Mapping | None:
    """The plan a forecast foresaw for the moment of `snapshot`: that of the first of
    `foreseen` made with the same active jobs, if it still fits the snapshot (check_plan);
    None otherwise. The live service keeps to it (service.planner) and so do later
    forecasts (service.decider.KeepForeseen)."""
    active = frozenset(v.job_id for v in snapshot.jobs)
    for decision in foreseen:
        if decision.jobs == active:
            return decision.plan if still_fits(snapshot, decision.plan, policy_name) else None
    return None


def still_fits(snapshot: Snapshot, plan: Mapping, policy_name: str) -> bool:
    """Whether a plan made earlier (foreseen, or repaired from what was foreseen) passes
    `check_plan` on `snapshot`: one that no longer fits, in any way, is not kept."""
    try:
        check_plan(snapshot, plan, policy_name)
    except Exception:
        return False
    return True


def foreseen_starts(snapshot: Snapshot, foreseen: Sequence[ForeseenDecision]
                    ) -> tuple[dict[str, Assignment], dict[str, Reason]]:
    """The last forecast's plan, repaired for events that came in another order: every
    running job kept where it runs, and each waiting job started where the forecast first
    foresaw it start (node, GPUs, power limit) when those GPUs are free now and no job
    foreseen to start on those nodes before it still waits: each node keeps its foreseen
    order. A job left waiting is `waiting_for_gpus` of its foreseen node until its foreseen
    start; a job no foreseen decision starts waits without a reason here.

    Why: timing jitter reorders completions (foreseen: a ends at 40 s, then b at 42 s;
    measured: b at 39 s). No foreseen decision then has the jobs now active, and a fresh
    decision may start the next job on the other node, at another power and cost than the
    forecast told its user, and the rest of the schedule shifts with it."""
    free = snapshot.free_gpus()
    plan = {v.job_id: v.assignment for v in snapshot.jobs if v.assignment is not None}
    waiting = {v.job_id for v in snapshot.jobs if v.assignment is None}
    first: dict[str, tuple[float, Assignment]] = {}  # in the order the forecast starts them
    for decision in sorted(foreseen, key=lambda d: d.time):
        for job_id, a in decision.plan.items():
            if job_id in waiting and job_id not in first:
                first[job_id] = (decision.time, a)
    blocked: set[str] = set()  # nodes where a job foreseen earlier still waits
    why = {}
    for job_id, (at, a) in first.items():
        nodes = a.nodes
        if blocked.isdisjoint(nodes) and all(free.get(n, 0) >= a.gpus for n in nodes):
            plan[job_id] = a
            for n in nodes:
                free[n] -= a.gpus
        else:
            blocked.update(nodes)
            why[job_id] = Reason("waiting_for_gpus", until=at, node=a.node)
    return plan, why


@dataclass(frozen=True)
class ForecastRange:
    """How sure a job's forecast is: its completion and its cost (EUR) in the early and the
    late bound forecasts (`forecast_range`), each widened to hold the forecast itself."""

    completion: tuple[float, float]
    total_cost: tuple[float, float]


@dataclass(frozen=True)
class JobForecast:
    job_id: str
    start: float | None  # when it (re)starts under the plan; None if it already runs
    completion: float
    energy_cost: float
    tardiness_cost: float
    emissions_kg: float | None = None  # with the grid's intensity (Cluster.carbon)
    range: ForecastRange | None = None  # how sure it is (forecast_range), where computed

    @property
    def total_cost(self) -> float:
        return self.energy_cost + self.tardiness_cost


def forecast(snapshot: Snapshot, plan: Plan, policy: Policy, *,
             decisions: list[ForeseenDecision] | None = None,
             arrivals: tuple[Job, ...] = (),
             on_event: Callable[[], None] | None = None) -> dict[str, JobForecast]:
    """Per job: predicted completion and the cost still to come (energy from now on, plus
    tardiness at the predicted completion).

    A job's first start pays the cluster's restart overhead too where the snapshot says so
    (`Snapshot.first_start_overhead`, as the live service's do), in the plan just made and in
    the later decisions alike. A `decisions` list receives the later decisions the forecast
    made, in order. `arrivals` are jobs assumed to arrive later (submit times after now, on
    the snapshot's clock): the forward check samples them. `on_event` is called at every
    simulated event (it may raise to stop the forecast: the forward check's time budget)."""
    now = snapshot.time  # the simulation runs on times relative to now: the simulator's
    jobs, preset = [], {}  # tolerances are relative to the clock, and Unix times are large
    for view in snapshot.jobs:
        job = replace(view.job, submit_time=0.0, due_date=view.job.due_date - now,
                      epochs=view.remaining_epochs)
        jobs.append(job)
        target = plan.get(view.job_id)
        preset[view.job_id] = JobView(
            job, view.remaining_epochs, target, view.started,
            0.0 if target is None else snapshot.restart_s(
                view, target, snapshot.cluster.nodes[
                    snapshot.cluster.node_index(target.node)].gpu_type))
    if not jobs:
        return {}
    jobs.extend(replace(job, submit_time=job.submit_time - now, due_date=job.due_date - now)
                for job in sorted(arrivals, key=lambda j: j.submit_time))
    # the series too: the simulation's hour 0 is now's hour
    scenario = Scenario(snapshot.cluster.from_time(now), snapshot.profiles, tuple(jobs),
                        name="forecast")
    wake = revisit_at(plan)  # a plan holding jobs back starts them then at the latest
    simulator = Simulator(scenario, policy, start=0.0, preset=preset,
                          first_start_overhead=snapshot.first_start_overhead,
                          record_decisions=decisions is not None,
                          on_progress=None if on_event is None else lambda *_: on_event(),
                          first_revisit=None if wake is None else max(0.0, wake - now))
    result = simulator.run()
    if decisions is not None:
        decisions.extend(ForeseenDecision(now + t, jobs, _shifted(plan, now))
                         for t, jobs, plan in simulator.decisions)
    out = {}
    for record in result.jobs:
        out[record.job_id] = JobForecast(record.job_id, now + record.first_start,
                                         now + record.completion_time, record.energy_cost,
                                         record.tardiness_cost, record.emissions_kg)
    return out


def at_speeds(snapshot: Snapshot, factors: Mapping[str, float]) -> Snapshot:
    """`snapshot` with each job's seconds per epoch times `factors[job_id]` (1 if absent): each
    job on a profile of its own (`~job_id`, with more `~` in front while a profile's name
    starts so: names are the users'), its power limits, own draws, start-ups and gangs
    kept."""
    profiles = snapshot.profiles
    table = dict(profiles.table)
    prefix = "~"
    while any(name.startswith(prefix) for name in table):
        prefix += "~"
    levels, power, startup = dict(profiles.levels), dict(profiles.power), dict(profiles.startup)
    gangs, spread = dict(profiles.gangs), dict(profiles.spread_slowdown)
    views = []
    for view in snapshot.jobs:
        name, key = view.job.profile, f"{prefix}{view.job_id}"
        factor = factors.get(view.job_id, 1.0)
        table[key] = {c: spe * factor for c, spe in profiles.configs(name).items()}
        if name in profiles.gangs:
            gangs[key] = {c: spe * factor for c, spe in profiles.gangs[name].items()}
        if name in profiles.spread_slowdown:
            spread[key] = profiles.spread_slowdown[name]
        if name in profiles.levels:
            levels[key] = {c: tuple(replace(lv, seconds_per_epoch=lv.seconds_per_epoch * factor)
                                    for lv in ls) for c, ls in profiles.levels[name].items()}
        for own, given in ((power, profiles.power), (startup, profiles.startup)):
            if name in given:
                own[key] = dict(given[name])
        views.append(JobView(replace(view.job, profile=key), view.remaining_epochs,
                             view.assignment, view.started, view.restart_remaining_s))
    return replace(snapshot, profiles=Profiles(table, levels, power, startup, gangs, spread),
                   jobs=tuple(views))


def forecast_range(snapshot: Snapshot, plan: Plan, policy: Callable[[], Policy],
                   predicted: Mapping[str, JobForecast], spread: Mapping[str, float],
                   arrivals: tuple[Job, ...] = (),
                   on_event: Callable[[], None] | None = None) -> dict[str, ForecastRange]:
    """Each job's forecast range: an early bound, every job `spread[job_id]` (a share) faster
    than believed and no arrival, and a late bound, every job that much slower and the
    sampled `arrivals` competing for the GPUs (the same plan now, later decisions by fresh
    `policy()` copies). A job's range holds both bounds and `predicted` (its forecast):
    under a policy that re-plans, a faster job can end later (another's plan changed)."""
    early = forecast(at_speeds(snapshot, {j: 1.0 - min(0.9, s) for j, s in spread.items()}),
                     plan, policy(), on_event=on_event)
    late = forecast(at_speeds(snapshot, {j: 1.0 + s for j, s in spread.items()}), plan,
                    policy(), arrivals=arrivals, on_event=on_event)
    out = {}
    for job_id, f in predicted.items():
        done = [f.completion] + [b[job_id].completion for b in (early, late) if job_id in b]
        cost = [f.total_cost] + [b[job_id].total_cost for b in (early, late) if job_id in b]
        out[job_id] = ForecastRange((min(done), max(done)), (min(cost), max(cost)))
    return out


def _shifted(plan: Mapping, now: float) -> Decision:
    """A foreseen plan on the live clock (the forecast runs on times relative to now), its
    revisit time and the times its reasons name shifted too."""
    decision = Decision.of(plan)
    wake = decision.revisit_at
    reasons = {j: r if r.until is None else replace(r, until=now + r.until)
               for j, r in decision.reasons.items()}
    return Decision(decision, None if wake is None else now + wake, reasons)


__all__ = ["ForeseenDecision", "ForecastRange", "JobForecast", "at_speeds", "forecast",
           "foreseen_for",
           "forecast_range", "Job"]
