"""The plan board: what the latest decision was, for the API, the dashboard and /metrics.

The scheduler's thread publishes each decision here (a `PlanInfo` built whole, then swapped
in); readers in request threads get that object and never see one half made. The per-job
forecast history, the decision log and the tick failures live behind the board's lock, so
that a page iterating them does not race the thread appending to them. Readers never touch
the scheduler's loop.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterable

from prometheus_client import Histogram

from ..sim.forecast import ForeseenDecision, JobForecast

# seconds: a decision takes milliseconds on a small queue and seconds on a long one
DECISION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
HISTORY_JOBS = 5000  # jobs whose forecast history is kept (the newest)
HISTORY_POINTS = 500  # points per job


@dataclass
class PlanInfo:
    """The latest decision, as `/plan` shows it."""

    time: float = 0.0
    reasons: list[str] = field(default_factory=list)
    decision_s: float = 0.0
    assignments: dict[str, dict] = field(default_factory=dict)
    forecast: dict[str, dict] = field(default_factory=dict)
    decisions: int = 0
    source: str = "policy"  # or "forecast", "repaired", "kept": planner.Proposal.source
    revisit_at: float | None = None  # jobs held back on purpose must be looked at again then
    # job id -> why it waits: {"reason": kind, "text": sentence, "until", "node", "job"}
    waiting: dict[str, dict] = field(default_factory=dict)
    forecast_cut: str | None = None  # why the forecast was stopped, if it was
    foreseen: tuple[ForeseenDecision, ...] = ()  # the later decisions the forecast made
    weighed: dict[str, float] | None = None  # forecast totals of the plans weighed, by source
    gain_needed: float | None = None  # the share a switch had to save, where one was weighed


def forecast_entry(planned_at: float, f: JobForecast, carbon_price: float = 0.0) -> dict:
    """A job's forecast as `/plan` and the job's row show it. Forecasts run on the cluster as
    policies see it, whose energy price includes `carbon_price` (EUR/t) times the intensity:
    the carbon charge is split back out of the energy cost here."""
    carbon = carbon_price * (f.emissions_kg or 0.0) / 1000.0
    entry: dict[str, Any] = {
        "planned_at": planned_at, "start": f.start, "completion": f.completion,
        "energy_cost": f.energy_cost - carbon, "tardiness_cost": f.tardiness_cost,
        "total_cost": f.total_cost}
    if f.range is not None:  # how sure it is: the early and late bounds (forecast_range)
        entry["completion_range"] = list(f.range.completion)
        entry["total_cost_range"] = list(f.range.total_cost)
    if f.emissions_kg is not None:  # the cluster gives the grid's intensity
        entry["emissions_kg"] = f.emissions_kg
        if carbon_price:
            entry["carbon_cost"] = carbon
    return entry


def decision_histogram() -> Histogram:
    """The decision-time histogram, registered in no global registry (each app has its own,
    so that several services can live in one process, as in the tests)."""
    return Histogram("andreas_decision_seconds", "Time a scheduling decision took (policy, "
                     "checks and forecast).", buckets=DECISION_BUCKETS, registry=None)


class PlanBoard:
    """The latest decision and what was learned making them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest = PlanInfo()
        self._points: dict[str, deque[tuple[float, float, float]]] = {}
        self._log: deque[tuple[float, float]] = deque(maxlen=10_000)  # (when, seconds)
        self.decision_seconds = decision_histogram()  # for /metrics
        self.failed_ticks = 0
        self.last_error: str | None = None  # why the latest tick failed; None once one passes
        # the whole workload's predicted total at each decision (`andreas validate`'s plot);
        # off in the service, where it read every job and run at every decision
        self.record_history = False
        self.history: deque[dict] = deque(maxlen=100_000)

    @property
    def latest(self) -> PlanInfo:
        return self._latest

    def publish(self, info: PlanInfo) -> None:
        """Make `info` the latest decision; remember its time and each job's forecast."""
        with self._lock:
            self._log.append((info.time, info.decision_s))
            for job_id, f in info.forecast.items():
                self._remember(job_id, info.time, f["completion"], f["total_cost"])
            self._latest = info
        self.decision_seconds.observe(info.decision_s)

    def _remember(self, job_id: str, now: float, completion: float, cost: float) -> None:
        points = self._points.get(job_id)
        if points is None:
            if len(self._points) >= HISTORY_JOBS:
                del self._points[next(iter(self._points))]
            points = self._points[job_id] = deque(maxlen=HISTORY_POINTS)
        if not points or points[-1][1:] != (completion, cost):
            points.append((now, completion, cost))

    def forecast_points(self, job_id: str) -> list[tuple[float, float, float]]:
        """(when, predicted completion, predicted cost) of the job at each decision that
        changed them (in memory: a restart starts afresh)."""
        with self._lock:
            return list(self._points.get(job_id, ()))

    def set_forecast_points(self, job_id: str,
                            points: Iterable[tuple[float, float, float]]) -> None:
        """Replace a job's forecast history (tests of what the dashboard draws)."""
        with self._lock:
            self._points[job_id] = deque(points, maxlen=HISTORY_POINTS)

    def decisions_since(self, since: float) -> list[tuple[float, float]]:
        """(when, seconds) of the decisions made after `since`."""
        with self._lock:
            return [(t, d) for t, d in self._log if t > since]

    def tick_failed(self, why: str) -> None:
        with self._lock:
            self.failed_ticks += 1
            self.last_error = why

    def tick_passed(self) -> None:
        self.last_error = None
