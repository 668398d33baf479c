"""The service's Prometheus metrics (GET /metrics), with prometheus_client.

A collector reads the state at each scrape (jobs by state, GPUs busy by type, costs so far,
decisions, failed ticks, the predicted cost still to come); the decision time is a histogram
the scheduler observes. No label names a job or a user: the series stay few however many jobs
pass, and a user reading /metrics learns nothing of another's jobs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import func, select

from .db import JobRow
from .states import ACTIVE_STATES, FINAL_STATES

if TYPE_CHECKING:
    from .scheduler import Scheduler
    from .store import Store

# seconds: a decision takes milliseconds on a small queue and seconds on a long one
DECISION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def decision_histogram() -> Histogram:
    """The scheduler's decision-time histogram, registered in no global registry (each app
    has its own, so that several services can live in one process, as in the tests)."""
    return Histogram("andreas_decision_seconds", "Time a scheduling decision took (policy, "
                     "checks and forecast).", buckets=DECISION_BUCKETS, registry=None)


class ServiceCollector(Collector):
    """What /metrics shows besides the histogram, read afresh at every scrape."""

    def __init__(self, store: "Store", scheduler: "Scheduler") -> None:
        self.store, self.scheduler = store, scheduler

    def collect(self) -> Iterator[Metric]:
        # (imported here: jobs.py imports the scheduler, which imports this module)
        from .jobs import gpu_holders, gpus_by_type

        scheduler = self.scheduler
        with self.store.session() as s:
            counts = dict(s.execute(select(JobRow.state, func.count())
                                    .group_by(JobRow.state)).all())
            held = gpu_holders(s, None)
        jobs = GaugeMetricFamily("andreas_jobs", "Jobs by state (queued and paused: the queue).",
                                 labels=["state"])
        for state in ACTIVE_STATES + FINAL_STATES:
            jobs.add_metric([state], counts.get(state, 0))
        yield jobs
        gpus = GaugeMetricFamily("andreas_gpus", "GPUs in the cluster, by type.",
                                 labels=["gpu_type"])
        busy = GaugeMetricFamily("andreas_gpus_busy", "GPUs held by running jobs, by type.",
                                 labels=["gpu_type"])
        for gpu_type, (total, in_use) in sorted(gpus_by_type(scheduler.nodes(), held).items()):
            gpus.add_metric([gpu_type], total)
            busy.add_metric([gpu_type], in_use)
        yield gpus
        yield busy
        measured = scheduler.accounting.measured()
        for name, text, value in (
                ("andreas_energy_kwh", "Energy drawn by jobs so far (modelled from busy time "
                 "and the power table).", measured["energy_kwh"]),
                ("andreas_energy_cost_eur", "Energy cost so far.", measured["energy_cost"]),
                ("andreas_tardiness_cost_eur", "Tardiness cost of completed jobs.",
                 measured["tardiness_cost"]),
                ("andreas_decisions", "Rescheduling decisions made.", scheduler.plan.decisions),
                ("andreas_failed_ticks", "Scheduler ticks that failed (see /healthz).",
                 scheduler.errors)):
            yield CounterMetricFamily(name, text, value=value)
        yield GaugeMetricFamily("andreas_predicted_cost_eur", "Cost still to come under the "
                                "latest plan (its forecast).",
                                value=sum(f["total_cost"] for f in
                                          scheduler.plan.forecast.values()))


def metrics_text(store: "Store", scheduler: "Scheduler") -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ServiceCollector(store, scheduler))
    registry.register(scheduler.decision_seconds)
    return generate_latest(registry).decode()
