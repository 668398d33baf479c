"""Compare policies on the same scenarios: run every (instance, policy, seed), then tabulate.

Deterministic policies run once per instance; randomised ones once per seed. The % cost reduction
of a policy against a baseline is computed per instance (seed means first), then averaged.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

from ..model import Scenario
from ..policies import POLICIES, make_policy
from ..sim.engine import simulate

BASELINES = ("fifo", "edf", "ps")
RUN_COLUMNS = ("instance", "policy", "seed", "total_cost", "energy_cost", "tardiness_cost",
               "tardy_jobs", "total_tardiness_s", "makespan_s", "restarts",
               "rescheduling_points", "scheduler_seconds")
METRICS = ("total_cost", "energy_cost", "tardiness_cost", "tardy_jobs", "restarts",
           "scheduler_seconds")


@dataclass(frozen=True)
class RunSpec:
    instance: int  # index into the scenario list
    policy: str
    seed: int | None


def plan_runs(n_instances: int, policies: Sequence[str], seeds: Sequence[int]) -> list[RunSpec]:
    runs = []
    for i in range(n_instances):
        for p in policies:
            for s in (seeds if POLICIES[p].randomized else [None]):
                runs.append(RunSpec(i, p, s))
    return runs


def run_compare(scenarios: Sequence[Scenario], policies: Sequence[str], seeds: Sequence[int], *,
                period: float | None = None, params: dict | None = None,
                on_run: Callable[[RunSpec], None] | None = None) -> list[dict]:
    """Simulate every run; return one row per run (the columns of `RUN_COLUMNS`)."""
    for p in policies:
        make_policy(p)  # fail fast on an unknown name
    rows = []
    for spec in plan_runs(len(scenarios), policies, seeds):
        scenario = scenarios[spec.instance]
        policy = make_policy(spec.policy, **{**(params or {}),
                                             **({"seed": spec.seed} if spec.seed else {})})
        result = simulate(scenario, policy, period=period, seed=spec.seed)
        summary = result.summary
        row = {c: summary.get(c) for c in RUN_COLUMNS}
        row.update(instance=scenario.name, policy=spec.policy, seed=spec.seed)
        rows.append(row)
        if on_run:
            on_run(spec)
    return rows


def _mean(xs: Iterable[float]) -> float:
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    return sum(xs) / len(xs) if xs else math.nan


def summarize(rows: Sequence[dict], policies: Sequence[str]) -> list[dict]:
    """One row per policy: metric means over runs and % reduction against each baseline."""
    baselines = [b for b in BASELINES if b in policies]
    instances = list(dict.fromkeys(r["instance"] for r in rows))
    per_instance = {(i, p): _mean(r["total_cost"] for r in rows
                                  if r["instance"] == i and r["policy"] == p)
                    for i in instances for p in policies}
    table = []
    for p in policies:
        mine = [r for r in rows if r["policy"] == p]
        entry: dict = {"policy": p, "runs": len(mine)}
        for m in METRICS:
            entry[f"{m}_mean"] = _mean(r[m] for r in mine)
        for b in baselines:
            reductions = []
            for i in instances:
                base, cost = per_instance[(i, b)], per_instance[(i, p)]
                if base > 0:
                    reductions.append(100.0 * (base - cost) / base)
            entry[f"reduction_vs_{b}_pct"] = _mean(reductions)
        table.append(entry)
    return table


def write_table(table: Sequence[dict], rows: Sequence[dict], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    with (out_dir / "table.json").open("w", encoding="utf-8") as f:
        clean = [{k: (None if isinstance(v, float) and math.isnan(v) else v)
                  for k, v in entry.items()} for entry in table]
        json.dump(clean, f, indent=2)
        f.write("\n")
    for name, data in (("table.csv", table), ("runs.csv", rows)):
        with (out_dir / name).open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=list(data[0]))
            w.writeheader()
            w.writerows(data)
