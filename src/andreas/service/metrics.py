"""The service's Prometheus metrics (GET /metrics), with prometheus_client.

A collector reads the state at each scrape (jobs by state, GPUs busy by type, costs so far,
decisions, failed ticks, the predicted cost still to come); the decision time is a histogram
the plan board observes. No label names a job or a user: the series stay few however many jobs
pass, and a user reading /metrics learns nothing of another's jobs.
"""

from __future__ import annotations

from typing import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .gpus import gpu_holders, gpus_by_type
from .services import Services
from .states import ACTIVE_STATES, FINAL_STATES
from .store import jobs as job_rows


class ServiceCollector(Collector):
    """What /metrics shows besides the histogram, read afresh at every scrape."""

    def __init__(self, svc: Services) -> None:
        self.svc = svc

    def collect(self) -> Iterator[Metric]:
        svc, plan = self.svc, self.svc.board.latest
        with svc.store.session() as s:
            counts = job_rows.jobs_by_state(s)
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
        for gpu_type, (total, in_use) in sorted(gpus_by_type(svc.nodes(), held).items()):
            gpus.add_metric([gpu_type], total)
            busy.add_metric([gpu_type], in_use)
        yield gpus
        yield busy
        measured = svc.accounting.measured()
        for name, text, value in (
                ("andreas_energy_kwh", "Energy drawn by jobs so far (modelled from busy time "
                 "and the power table).", measured["energy_kwh"]),
                ("andreas_energy_cost_eur", "Energy cost so far.", measured["energy_cost"]),
                ("andreas_tardiness_cost_eur", "Tardiness cost of completed jobs.",
                 measured["tardiness_cost"]),
                ("andreas_decisions", "Rescheduling decisions made.", plan.decisions),
                ("andreas_failed_ticks", "Scheduler ticks that failed (see /healthz).",
                 svc.board.failed_ticks)):
            yield CounterMetricFamily(name, text, value=value)
        if "emissions_kg" in measured:  # the cluster gives the grid's carbon intensity
            yield CounterMetricFamily("andreas_emissions_kg", "CO2eq emitted by the energy "
                                      "drawn so far (kg; the grid's intensity in cluster.yaml).",
                                      value=measured["emissions_kg"])
            yield CounterMetricFamily("andreas_carbon_cost_eur", "The carbon price times the "
                                      "emissions so far (0 without a carbon_price).",
                                      value=measured["carbon_cost"])
        yield GaugeMetricFamily("andreas_predicted_cost_eur", "Cost still to come under the "
                                "latest plan (its forecast).",
                                value=sum(f["total_cost"] for f in
                                          plan.forecast.values()))


def metrics_text(svc: Services) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ServiceCollector(svc))
    registry.register(svc.board.decision_seconds)
    return generate_latest(registry).decode()
