"""Compare policies on the same scenarios: run every (instance, policy, seed), then tabulate.

Each table row carries a mean and a 95 % confidence interval over all runs of a policy
(instances × seeds). The % cost reduction against a baseline is computed per instance (seed means
first), then averaged over instances with its own confidence interval. Wall-clock timings are the
only numbers that differ between two runs of the same comparison; they are kept in their own
columns and files so that everything else is reproducible byte for byte, serial or parallel.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from ..errors import AndreasError
from ..model import Scenario
from ..policies import make_policy
from ..sim.engine import SimulationResult
from .runner import RunSpec, Task, plan_runs, run_all
from .stats import mean_ci

BASELINES = ("fifo", "edf", "ps")
RUN_COLUMNS = ("instance", "policy", "seed", "total_cost", "energy_cost", "tardiness_cost",
               "energy_kwh", "tardy_jobs", "total_tardiness_s", "makespan_s", "restarts",
               "rescheduling_points", "emissions_kg", "carbon_cost")  # (empty without carbon)
TIMING_COLUMNS = ("instance", "policy", "seed", "scheduler_seconds")
JOB_COLUMNS = ("instance", "policy", "seed", "job_id", "submit_time", "due_date",
               "completion_time", "lateness_s", "tardiness_cost", "energy_cost", "restarts")
CI_METRICS = ("total_cost", "energy_cost", "tardiness_cost", "tardy_jobs", "restarts")
CARBON_METRICS = ("emissions_kg", "carbon_cost")  # where every run knows the grid's intensity


@dataclass
class Comparison:
    scenarios: Sequence[Scenario]
    policies: Sequence[str]
    specs: Sequence[RunSpec]
    results: Sequence[SimulationResult]

    def run_rows(self) -> list[dict]:
        rows = []
        for spec, result in zip(self.specs, self.results):
            row = {c: result.summary.get(c) for c in RUN_COLUMNS}
            row.update(instance=self.scenarios[spec.instance].name, policy=spec.policy,
                       seed=spec.seed)
            rows.append(row)
        return rows

    def timing_rows(self) -> list[dict]:
        return [{"instance": self.scenarios[s.instance].name, "policy": s.policy, "seed": s.seed,
                 "scheduler_seconds": r.summary["scheduler_seconds"]}
                for s, r in zip(self.specs, self.results)]

    def job_rows(self) -> list[dict]:
        rows = []
        for spec, result in zip(self.specs, self.results):
            for j in result.jobs:
                rows.append({"instance": self.scenarios[spec.instance].name,
                             "policy": spec.policy, "seed": spec.seed, "job_id": j.job_id,
                             "submit_time": j.submit_time, "due_date": j.due_date,
                             "completion_time": j.completion_time,
                             "lateness_s": j.completion_time - j.due_date,
                             "tardiness_cost": j.tardiness_cost, "energy_cost": j.energy_cost,
                             "restarts": j.restarts})
        return rows

    def table(self) -> list[dict]:
        return summarize(self.run_rows(), self.policies, self.timing_rows())

    def result_for(self, instance: int, policy: str) -> SimulationResult:
        """The first run (lowest seed) of `policy` on instance number `instance`."""
        for spec, result in zip(self.specs, self.results):
            if spec.instance == instance and spec.policy == policy:
                return result
        raise KeyError((instance, policy))


def compare(scenarios: Sequence[Scenario], policies: Sequence[str], seeds: Sequence[int], *,
            period: float | None = None, params: dict | None = None, workers: int = 1,
            on_done: Callable[[int], None] | None = None,
            period_only: bool = False, every_round: bool = False,
            ray_address: str | None = None) -> Comparison:
    for p in policies:
        make_policy(p)  # fail fast on an unknown name
    if period_only and period is None:
        raise AndreasError("period_only needs a period")
    specs = plan_runs(len(scenarios), policies, seeds)
    tasks = [Task(s, scenarios[s.instance], period, dict(params or {}), period_only,
                  every_round) for s in specs]
    results = list(run_all(tasks, workers, on_done, ray_address))
    return Comparison(scenarios, list(policies), specs, results)


def _instance_means(rows: Sequence[dict], metric: str) -> list[float]:
    by_instance: dict[str, list[float]] = {}
    for r in rows:
        by_instance.setdefault(r["instance"], []).append(r[metric])
    if len(by_instance) == 1:
        return next(iter(by_instance.values()))
    return [sum(v) / len(v) for v in by_instance.values()]


def _finite_mean(xs) -> float:
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    return sum(xs) / len(xs) if xs else math.nan


def summarize(rows: Sequence[dict], policies: Sequence[str],
              timings: Sequence[dict] = ()) -> list[dict]:
    """One row per policy: mean and 95 % CI of each metric, mean scheduler time, and the
    per-instance % reduction against each baseline, averaged with its CI.

    Seeds of one instance are not independent samples of the workload, so with several
    instances a metric's CI is taken over the per-instance means (seeds averaged first); with
    one instance, over its seeds."""
    baselines = [b for b in BASELINES if b in policies]
    instances = list(dict.fromkeys(r["instance"] for r in rows))
    per_instance = {(i, p): _finite_mean(r["total_cost"] for r in rows
                                         if r["instance"] == i and r["policy"] == p)
                    for i in instances for p in policies}
    table = []
    for p in policies:
        mine = [r for r in rows if r["policy"] == p]
        entry: dict = {"policy": p, "runs": len(mine)}
        metrics = CI_METRICS + tuple(m for m in CARBON_METRICS
                                     if rows and all(r.get(m) is not None for r in rows))
        for m in metrics:
            est = mean_ci(_instance_means(mine, m))
            entry[f"{m}_mean"], entry[f"{m}_ci_low"], entry[f"{m}_ci_high"] = \
                est.mean, est.low, est.high
        entry.update(reduction_columns(per_instance, instances, p, baselines))
        entry["scheduler_seconds_mean"] = _finite_mean(
            t["scheduler_seconds"] for t in timings if t["policy"] == p)
        table.append(entry)
    return table


def reduction_columns(per_instance: dict, instances: Sequence, policy: str,
                      baselines: Sequence[str]) -> dict:
    """% total-cost reduction of `policy` against each baseline: per instance (from the
    instances' mean costs, keyed (instance, policy)), then averaged with its 95 % CI; instances
    where the baseline cost nothing are left out."""
    out = {}
    for b in baselines:
        reductions = []
        for i in instances:
            base, cost = per_instance[(i, b)], per_instance[(i, policy)]
            if base > 0:
                reductions.append(100.0 * (base - cost) / base)
        est = mean_ci(reductions)
        out[f"reduction_vs_{b}_pct"] = est.mean
        out[f"reduction_vs_{b}_ci_low"] = est.low
        out[f"reduction_vs_{b}_ci_high"] = est.high
    return out


def _json_safe(value):
    return None if isinstance(value, float) and math.isnan(value) else value


def write_csv(path: Path, rows: Sequence[dict], columns: Sequence[str] | None = None) -> None:
    columns = list(columns or (rows[0] if rows else []))
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        for row in rows:
            w.writerow({k: ("" if row[k] is None else repr(row[k]) if isinstance(row[k], float)
                            else row[k]) for k in columns})


def write_comparison(comparison: Comparison, out_dir: Path) -> list[dict]:
    """table.csv, table.json, runs.csv, timings.csv and jobs.csv; returns the table."""
    out_dir.mkdir(parents=True, exist_ok=True)
    table = comparison.table()
    with (out_dir / "table.json").open("w", encoding="utf-8") as f:
        json.dump([{k: _json_safe(v) for k, v in e.items()} for e in table], f, indent=2)
        f.write("\n")
    write_csv(out_dir / "table.csv", table)
    write_csv(out_dir / "runs.csv", comparison.run_rows(), RUN_COLUMNS)
    write_csv(out_dir / "timings.csv", comparison.timing_rows(), TIMING_COLUMNS)
    write_csv(out_dir / "jobs.csv", comparison.job_rows(), JOB_COLUMNS)
    return table
