"""Where the service's policy decides and forecasts: in a process of its own, or inline.

A decision and its forecast are seconds of pure Python and numba on a long queue. Run in the
scheduler's thread, they hold the interpreter, and every API request waits its turn
(bench/service-load.md measures it; docs/service-measured.md, "Where the time goes", explains it).
`ProcessDecider` runs them in one worker process (`decide_in: process`, the default), so the
service's own process only reads and writes the database and answers requests.
`InlineDecider` runs them in the calling thread (`decide_in: thread`), for tests that hand the
scheduler a policy object of their own.

Both keep one policy object for the life of the service, as the simulator does: a policy may
learn from the decisions it has made (the arrival rate of the holds' forward check). A worker
that dies is replaced at the next call, with a fresh policy; the failed call raises, and the
scheduler's next tick retries it.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from typing import Any, ClassVar, Protocol

import numpy as np

from ..model import Job, Profiles
from ..policies import Policy, make_policy, pinning
from ..policies.arrivals import ArrivalLog
from ..policies.base import JobView, Snapshot
from ..policies.decision import Decision
from ..policies.greedy import follower
from ..policies.registry import options_for
from ..policies.steps.forward_check import sample_arrivals, with_profiles_of
from ..policies.steps.pipeline import holds_off
from ..sim.compiled_forecast import compiled_cost
from ..sim.forecast import (
    ForeseenDecision,
    JobForecast,
    forecast,
    forecast_range,
    foreseen_for,
    foreseen_starts,
    still_fits,
)
from .quotas import ServiceLimits, limited

log = logging.getLogger("andreas.service")

WORKER_NICENESS = 10  # the default of service.yaml's decide_nice
FORECAST_BUDGET = 10_000  # Randomized Greedy passes x queued jobs, per forecast
# The scheduler keeps to a foreseen decision only at the next events (Scheduler._foreseen_plan);
# all of them, one plan per future completion, made the answer grow with the queue squared.
FORESEEN_KEPT = 16


def forecast_policy(name: str, options: Mapping[str, Any], jobs: int) -> Policy:
    """The policy the forecast simulates later decisions with: the service's own, with fewer
    Randomized Greedy passes as the queue grows. A forecast makes one decision per future
    completion, so its cost grows with the square of the queue (bench/service_bench.py
    measures it). Up to 10 jobs, all passes: fewer made the forecasts of the validation
    workload less accurate (docs/validation.md). The forecast assumes no further arrivals, so
    its decisions hold no job back (the holding steps off). Options the policy does not take
    (fifo has none of these) are left out."""
    chosen = dict(options)
    chosen.update(holds_off(chosen.get("steps")))
    cap = int(chosen.get("max_iterations", 1000))
    chosen["max_iterations"] = max(1, min(cap, FORECAST_BUDGET // max(1, jobs)))
    return make_policy(name, **options_for(name, chosen))


Forecast = tuple[dict[str, JobForecast], list[ForeseenDecision]]


class KeepForeseen:
    """`policy`, except at a moment an earlier forecast foresaw (the same active jobs, and
    its plan still fits): there, the decision that forecast foresaw; and after completions in
    another order than foreseen, the foreseen starts (each node keeps its foreseen order).

    Why: a forecast is made after every decision, with the speeds learned so far. Asked
    afresh at each later event, the policy places a job that has not started by margins that
    shift with every small change of those speeds, so the node a job was forecast to run on,
    and with it its predicted energy, flipped from one forecast to the next although nothing
    unforeseen happened. The live service keeps to the foreseen decisions
    (`Planner.foreseen_plan`); its forecasts now do so too, until something unforeseen
    happens (an arrival, a cancellation, a learned speed that moved past its noise)."""

    pins_itself: ClassVar[bool] = True  # the foreseen plans hold the pinned jobs already

    def __init__(self, policy: Policy, foreseen: Sequence[ForeseenDecision]) -> None:
        self.policy, self.foreseen = policy, tuple(foreseen)
        self.name = policy.name

    def decide(self, snapshot: Snapshot) -> Mapping:
        plan = foreseen_for(snapshot, self.foreseen, self.name)
        if plan is None:
            plan = self.foreseen_starts(snapshot)
        return pinning.decide(self.policy, snapshot) if plan is None else Decision.of(plan)

    def foreseen_starts(self, snapshot: Snapshot) -> Mapping | None:
        """Where no foreseen decision has these active jobs (completions came in another
        order), the foreseen starts that fit (`foreseen_starts`: each node keeps its foreseen
        order), as the live service repairs its plan (`Planner.incumbent`), provided every
        waiting job has a foreseen start and something runs; None otherwise (the policy
        decides: a job never foreseen, or a cluster left idle)."""
        if not self.foreseen:
            return None
        plan, why = foreseen_starts(snapshot, self.foreseen)
        waiting = {v.job_id for v in snapshot.jobs if v.assignment is None}
        if not plan or not waiting <= set(plan) | set(why) \
                or not still_fits(snapshot, plan, self.name):
            return None
        return Decision(plan, reasons=why)


class ForecastCut(Exception):
    """A forecast stopped at its time budget (`forecast_budget_s`): it grows with the square
    of the queue, and a scheduler waiting for it reacts to nothing else."""


class Decider(Protocol):
    """Decisions and forecasts for the scheduler (see the module's docstring)."""

    def decide(self, snapshot: Snapshot, limits: ServiceLimits | None = None) -> Mapping: ...

    def forecast(self, snapshot: Snapshot, plan: Mapping, wake: float | None,
                 limits: ServiceLimits | None = None,
                 spread: Mapping[str, float] | None = None,
                 foreseen: Sequence[ForeseenDecision] = ()) -> Forecast: ...

    def what_if(self, snapshot: Snapshot, job_id: str, limits: ServiceLimits | None = None,
                spread: Mapping[str, float] | None = None) -> JobForecast: ...

    def warm_up(self, snapshot: Snapshot) -> None: ...

    def close(self) -> None: ...


class Worker:
    """The decisions and forecasts themselves; one lives in the worker process (or inline)."""

    def __init__(self, policy: Policy, name: str, options: Mapping[str, Any],
                 forecast_budget_s: float | None = None) -> None:
        self.policy, self.name, self.options = policy, name, dict(options)
        self.forecast_budget_s = forecast_budget_s
        self.arrivals = ArrivalLog()  # the jobs seen: the late bound samples arrivals from it

    def _past_budget(self, snapshot: Snapshot) -> Callable[[], None] | None:
        """A check that raises ForecastCut once the time budget from now is spent."""
        budget = self.forecast_budget_s
        if not budget:
            return None
        deadline = time.monotonic() + budget

        def past_budget() -> None:
            if time.monotonic() > deadline:
                raise ForecastCut(f"the forecast of {len(snapshot.jobs)} queued jobs was "
                                  f"stopped after {budget:g} s (forecast_budget_s)")
        return past_budget

    def _run_forecast(self, snapshot: Snapshot, plan: Mapping, policy: Policy,
                      decisions: list[ForeseenDecision] | None = None) -> dict:
        """`forecast`, stopped with ForecastCut past the time budget."""
        return forecast(snapshot, plan, policy, decisions=decisions,
                        on_event=self._past_budget(snapshot))

    def _forecast_policy(self, snapshot: Snapshot, limits: ServiceLimits | None,
                         foreseen: Sequence[ForeseenDecision] = ()) -> Policy:
        """What a forecast's later decisions are made with: the service's policy for
        forecasts (`forecast_policy`), keeping to `foreseen` decisions (KeepForeseen) and to
        `limits`."""
        own = forecast_policy(self.name, self.options, len(snapshot.jobs))
        return limited(KeepForeseen(own, foreseen) if foreseen else own, limits)

    def _with_range(self, snapshot: Snapshot, plan: Mapping, limits: ServiceLimits | None,
                    predicted: dict[str, JobForecast], spread: Mapping[str, float] | None,
                    foreseen: Sequence[ForeseenDecision] = ()) -> dict[str, JobForecast]:
        """`predicted`, each job's forecast with its range (`forecast_range`: every job
        `spread` faster, or slower with arrivals sampled from the jobs seen, at the rate
        seen); as it was where the range's forecasts pass the time budget."""
        if not spread or not predicted:
            return predicted
        self.arrivals.observe(snapshot)
        horizon = max(f.completion for f in predicted.values()) - snapshot.time
        arrivals = sample_arrivals(snapshot, self.arrivals, horizon,
                                   np.random.default_rng(int(snapshot.time) % 2**32))
        try:  # (a sampled arrival may copy a finished job: its profile comes along)
            ranges = forecast_range(
                with_profiles_of(snapshot, self.arrivals, [arrivals]), plan,
                lambda: self._forecast_policy(snapshot, limits, foreseen),
                predicted, spread, arrivals, on_event=self._past_budget(snapshot))
        except ForecastCut:
            return predicted
        except Exception:  # the forecast itself stands: a range is an extra
            log.exception("the forecast's range failed; the forecast is shown without one")
            return predicted
        return {j: replace(f, range=ranges.get(j)) for j, f in predicted.items()}

    def decide(self, snapshot: Snapshot, limits: ServiceLimits | None = None) -> Mapping:
        """The policy's decision, keeping to the service's `limits` (quotas.WithinLimits)."""
        if not snapshot.jobs:
            return {}
        return pinning.decide(limited(self.policy, limits), snapshot)

    def forecast(self, snapshot: Snapshot, plan: Mapping, wake: float | None,
                 limits: ServiceLimits | None = None,
                 spread: Mapping[str, float] | None = None,
                 foreseen: Sequence[ForeseenDecision] = ()) -> Forecast:
        """The rest of the queue under `plan` (which holds jobs back until `wake`, if set),
        and the later decisions the forecast made, each keeping to `limits` too; where an
        earlier forecast `foreseen` a moment, its decision there (KeepForeseen); with
        `spread` (job -> share), each job's forecast carries its range."""
        made: list[ForeseenDecision] = []
        timed = plan if wake is None else Decision(dict(plan), wake)
        policy = self._forecast_policy(snapshot, limits, foreseen)
        predicted = self._run_forecast(snapshot, timed, policy, made)
        predicted = self._with_range(snapshot, timed, limits, predicted, spread, foreseen)
        return predicted, made[:FORESEEN_KEPT]

    def what_if(self, snapshot: Snapshot, job_id: str, limits: ServiceLimits | None = None,
                spread: Mapping[str, float] | None = None) -> JobForecast:
        """The forecast of `job_id` under the decision the next tick would make, made now
        (with its range, given `spread`)."""
        policy = self._forecast_policy(snapshot, limits)
        plan = pinning.decide(policy, snapshot)
        predicted = self._with_range(snapshot, plan, limits,
                                     self._run_forecast(snapshot, plan, policy), spread)
        return predicted[job_id]

    def warm_up(self, snapshot: Snapshot) -> None:
        """Decide and forecast once on a made-up job, so that loading the policy's compiled
        kernels (about a second), the forward checks' compiled forecast among them, does not
        delay the first real job."""
        plan = make_policy(self.name, **self.options).decide(snapshot)
        self.forecast(snapshot, plan, None)
        compiled_cost(snapshot, plan, follower())


class InlineDecider(Worker):
    """Decides in the calling thread, with `policy` (any object with `name` and `decide`)."""

    def close(self) -> None:
        pass


_WORKER: Worker | None = None  # in the worker process


def _start_worker(name: str, options: Mapping[str, Any], forecast_budget_s: float | None,
                  niceness: int) -> None:
    global _WORKER
    _die_with_parent()
    # background work: where the cores are few, the API's requests go first. On a host busy
    # with other work at niceness 0 (the jobs themselves, with the local executor) it then
    # gets a small share of a core: decide_nice 0 trades some API latency for decision time
    # (docs/service-measured.md).
    os.nice(niceness)
    _WORKER = Worker(make_policy(name, **options), name, options, forecast_budget_s)


def _die_with_parent() -> None:
    """End the worker when the service is gone, even killed by SIGKILL, so that it leaves
    no process behind. Watched, not PR_SET_PDEATHSIG: that signal follows the thread that
    started the worker, and a request's thread may start a new one and then end."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="andreas-parent-watch", daemon=True).start()


def _call(method: str, *args: Any) -> Any:
    assert _WORKER is not None, "the decision worker was not started"
    return getattr(_WORKER, method)(*args)


class ProcessDecider:
    """Decides in one worker process (spawned, so no lock of the service's threads is copied
    into it); calls are served one at a time, in order."""

    def __init__(self, name: str, options: Mapping[str, Any],
                 forecast_budget_s: float | None = None,
                 niceness: int = WORKER_NICENESS) -> None:
        self.name, self.options, self.forecast_budget_s = name, dict(options), forecast_budget_s
        self.niceness = niceness
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None

    def _ensure(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                    initializer=_start_worker,
                    initargs=(self.name, self.options, self.forecast_budget_s,
                              self.niceness))
            return self._pool

    def _run(self, method: str, *args: Any) -> Any:
        pool = self._ensure()
        try:
            return pool.submit(_call, method, *args).result()
        except BrokenProcessPool:
            log.error("the decision worker process died; starting a new one")
            with self._lock:
                if self._pool is pool:
                    self._pool = None
            pool.shutdown(wait=False, cancel_futures=True)
            raise

    def decide(self, snapshot: Snapshot, limits: ServiceLimits | None = None) -> Mapping:
        return self._run("decide", snapshot, limits)

    def forecast(self, snapshot: Snapshot, plan: Mapping, wake: float | None,
                 limits: ServiceLimits | None = None,
                 spread: Mapping[str, float] | None = None,
                 foreseen: Sequence[ForeseenDecision] = ()) -> Forecast:
        return self._run("forecast", snapshot, plan, wake, limits, spread, tuple(foreseen))

    def what_if(self, snapshot: Snapshot, job_id: str, limits: ServiceLimits | None = None,
                spread: Mapping[str, float] | None = None) -> JobForecast:
        return self._run("what_if", snapshot, job_id, limits, spread)

    def warm_up(self, snapshot: Snapshot) -> None:
        """Start the worker and warm it up, before the service answers its first request:
        warmed up in the background, it took a core from the first requests."""
        self._run("warm_up", snapshot)

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def make_decider(config) -> Decider:
    """The decider `decide_in` in service.yaml asks for (a ServiceConfig)."""
    if config.decide_in == "thread":
        return InlineDecider(make_policy(config.policy, **config.policy_options),
                             config.policy, config.policy_options, config.forecast_budget_s)
    return ProcessDecider(config.policy, config.policy_options, config.forecast_budget_s,
                          config.decide_nice)


def warm_up_snapshot(cluster) -> Snapshot | None:
    """A one-job snapshot on the cluster's first node (None for an empty cluster)."""
    if not cluster.nodes:
        return None
    node = cluster.nodes[0]
    view = JobView(Job("warm-up", 0.0, 1.0, 0.0, 1.0, "p"), 1.0)
    return Snapshot(0.0, cluster, Profiles({"p": {(node.gpu_type, 1): 1.0}}), (view,))
