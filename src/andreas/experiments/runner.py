"""Run many simulations, serially or in worker processes, with identical results either way.

Each run is independent and deterministic (policies seed their randomness from the run's seed and
the decision time), so a pool only changes the wall time. Results come back in submission order.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from ..model import Scenario
from ..policies import POLICIES, make_policy
from ..policies.options import options_for
from ..sim.engine import SimulationResult, simulate


@dataclass(frozen=True)
class RunSpec:
    instance: int  # index into the scenario list
    policy: str
    seed: int | None  # None for deterministic policies


@dataclass(frozen=True)
class Task:
    spec: RunSpec
    scenario: Scenario
    period: float | None
    params: dict
    period_only: bool = False  # rounds: the policy is asked only every `period` seconds


def plan_runs(n_instances: int, policies: Sequence[str], seeds: Sequence[int]) -> list[RunSpec]:
    """Deterministic policies run once per instance; randomised ones once per seed."""
    return [RunSpec(i, p, s) for i in range(n_instances) for p in policies
            for s in (seeds if POLICIES[p].randomized else [None])]


def execute(task: Task) -> SimulationResult:
    params = options_for(task.spec.policy, task.params)  # shared options: those it takes
    if task.spec.seed is not None:
        params["seed"] = task.spec.seed
    return simulate(task.scenario, make_policy(task.spec.policy, **params), period=task.period,
                    seed=task.spec.seed, period_only=task.period_only)


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
               else os.cpu_count() or 1)


def run_all(tasks: Sequence[Task], workers: int = 1,
            on_done: Callable[[int], None] | None = None) -> Iterator[SimulationResult]:
    """Yield each task's result in task order; `on_done(i)` fires as each finishes."""
    if workers <= 1 or len(tasks) <= 1:
        for i, task in enumerate(tasks):
            result = execute(task)
            if on_done:
                on_done(i)
            yield result
        return
    with ProcessPoolExecutor(max_workers=min(workers, len(tasks))) as pool:
        futures = [pool.submit(execute, t) for t in tasks]
        if on_done is not None:
            for i, f in enumerate(futures):
                f.add_done_callback(_callback(on_done, i))
        for f in futures:
            yield f.result()


def _callback(on_done: Callable[[int], None], i: int) -> Callable[[object], None]:
    """A future's done-callback that reports task `i`."""
    return lambda _future: on_done(i)
