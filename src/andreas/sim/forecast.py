"""Forecast a live cluster: simulate the rest of the queue from a snapshot and a plan.

The live service calls this after each decision, so the costs it shows (and that the
validation compares with measurements) come from the same simulator and cost model as
offline experiments: the plan just applied is the starting state, later decisions are made
by a fresh copy of the same policy, and no further arrivals are assumed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..model import Job, Scenario
from ..policies.base import JobView, Plan, Policy, Snapshot
from .engine import Simulator


@dataclass(frozen=True)
class JobForecast:
    job_id: str
    start: float | None  # when it (re)starts under the plan; None if it already runs
    completion: float
    energy_cost: float
    tardiness_cost: float

    @property
    def total_cost(self) -> float:
        return self.energy_cost + self.tardiness_cost


def forecast(snapshot: Snapshot, plan: Plan, policy: Policy) -> dict[str, JobForecast]:
    """Per job: predicted completion and the cost still to come (energy from now on, plus
    tardiness at the predicted completion)."""
    now = snapshot.time
    jobs, preset = [], {}
    for view in snapshot.jobs:
        job = replace(view.job, submit_time=now, epochs=view.remaining_epochs)
        jobs.append(job)
        target = plan.get(view.job_id)
        if target is None:
            preset[view.job_id] = JobView(job, view.remaining_epochs, None, view.started)
        else:
            same = view.assignment == target
            overhead = view.restart_remaining_s if same else (
                snapshot.cluster.restart_overhead_s if view.started else 0.0)
            preset[view.job_id] = JobView(job, view.remaining_epochs, target, view.started,
                                          overhead)
    if not jobs:
        return {}
    scenario = Scenario(snapshot.cluster, snapshot.profiles, tuple(jobs), name="forecast")
    result = Simulator(scenario, policy, start=now, preset=preset).run()
    out = {}
    for record in result.jobs:
        out[record.job_id] = JobForecast(record.job_id, record.first_start, record.completion_time,
                                         record.energy_cost, record.tardiness_cost)
    return out


__all__ = ["JobForecast", "forecast", "Job"]
