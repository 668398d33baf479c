"""Run many simulations, serially, in worker processes or as tasks on a Ray cluster, with
identical results every way.

Each run is independent and deterministic (policies seed their randomness from the run's seed and
the decision time), so a pool or a cluster only changes the wall time. Results come back in
submission order.
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from ..errors import AndreasError
from ..model import Scenario
from ..policies import POLICIES, make_policy
from ..policies.registry import options_for
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
    every_round: bool = False  # in rounds, ask at quiet rounds too (Simulator)


def plan_runs(n_instances: int, policies: Sequence[str], seeds: Sequence[int]) -> list[RunSpec]:
    """Deterministic policies run once per instance; randomised ones once per seed."""
    return [RunSpec(i, p, s) for i in range(n_instances) for p in policies
            for s in (seeds if POLICIES[p].randomized else [None])]


def execute(task: Task) -> SimulationResult:
    params = options_for(task.spec.policy, task.params)  # shared options: those it takes
    if task.spec.seed is not None:
        params["seed"] = task.spec.seed
    return simulate(task.scenario, make_policy(task.spec.policy, **params), period=task.period,
                    seed=task.spec.seed, period_only=task.period_only,
                    every_round=task.every_round)


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
               else os.cpu_count() or 1)


def run_all(tasks: Sequence[Task], workers: int = 1,
            on_done: Callable[[int], None] | None = None,
            ray_address: str | None = None) -> Iterator[SimulationResult]:
    """Yield each task's result in task order; `on_done(i)` fires as each finishes. With
    `ray_address`, each task is a Ray task on that cluster (`workers` is then Ray's to
    decide)."""
    if ray_address is not None:
        yield from _run_on_ray(tasks, ray_address, on_done)
        return
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


def _run_on_ray(tasks: Sequence[Task], address: str,
                on_done: Callable[[int], None] | None) -> Iterator[SimulationResult]:
    """Every task as a Ray task (one CPU each); results yielded in task order, `on_done` as
    each finishes. The cluster's workers must import the same andreas (installed on every
    node, or shipped with a runtime_env: docs/experiments.md)."""
    try:
        import ray
    except ImportError:
        raise AndreasError("--ray needs Ray: pip install 'andreas[ray]'") from None
    started = not ray.is_initialized()
    if started:
        _check_reachable(address)
        try:
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
        except (ConnectionError, RuntimeError) as exc:
            raise AndreasError(f"--ray: cannot connect to the Ray cluster at {address!r}: "
                               f"{exc}; start one with `ray start --head`") from None
    try:
        remote = ray.remote(num_cpus=1, max_retries=2)(execute)
        refs = [remote.remote(t) for t in tasks]
        index = {ref: i for i, ref in enumerate(refs)}
        results: dict[int, SimulationResult] = {}
        pending, following = list(refs), 0
        while following < len(refs):
            if following not in results:
                ready, pending = ray.wait(pending, num_returns=1)
                for ref in ready:
                    results[index[ref]] = ray.get(ref)
                    if on_done:
                        on_done(index[ref])
                continue
            yield results.pop(following)
            following += 1
    finally:
        if started:
            ray.shutdown()


def _check_reachable(address: str) -> None:
    """A host:port that answers no TCP connection is an error now, not after Ray's minute of
    retries ('auto' and other forms are left to Ray)."""
    import socket

    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host or "://" in address:
        return
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        raise AndreasError(f"--ray: cannot connect to the Ray cluster at {address!r}: {exc}; "
                           "start one with `ray start --head`") from None
