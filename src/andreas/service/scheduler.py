"""The live driver of the scheduling core: the thread that decides and carries decisions out.

`Scheduler.tick()` is one step: reconcile what the executor reports (`Runs`: runs that
ended, jobs cancelled, progress written to files), then, if anything calls for it (a
submission, a completion, a cancellation, a prediction that moved, the period), read a
`Snapshot` (`read_snapshot`), have the planner decide (planner.py: the very policy objects the
simulator uses, in a worker process; quotas, drained nodes, foreseen plans), carry the plan
out (`Runs`: stop what must pause or move, start what must start) and publish it on the
`PlanBoard`, which the API, the dashboard and /metrics read.

It runs in its own thread, so the API stays responsive while the policy plans.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from typing import Callable

from ..executors import Executor
from ..model import Job, Profiles
from ..policies.base import JobView, Snapshot, stops_job
from ..policies.decision import Reason
from ..sim.forecast import JobForecast
from .accounting import Accounting
from .config import ServiceConfig
from .database_errors import describe_failure
from .db import JobRow
from .decider import Decider, make_decider, warm_up_snapshot
from .folders import sqlite_folder
from .plan_board import PlanBoard, PlanInfo, forecast_entry
from .planner import Planner, Proposal, waiting_entry, waiting_reasons
from .runs import Runs
from .snapshots import (
    SnapshotRead,
    cluster_of,
    job_configs,
    job_gangs,
    job_power,
    job_spread,
    job_startup,
    operator_values,
    read_snapshot,
    run_assignment,
)
from .store import Store
from .store import queue as queue_rows
from .store import runs as run_rows

MAX_CULPRITS = 3  # jobs a tick may fail as unplannable before it gives up and says why

log = logging.getLogger("andreas.service")


class Scheduler:
    """The scheduler's thread over `store` and `executor`; `board` receives its decisions."""

    def __init__(self, config: ServiceConfig, store: Store, executor: Executor,
                 clock: Callable[[], float] = time.time, decider: Decider | None = None,
                 board: PlanBoard | None = None) -> None:
        self.config, self.store, self.executor, self.clock = config, store, executor, clock
        self.decider = decider or make_decider(config)
        self.planner = Planner(self.decider, config.policy, config.quotas, config.switch_gain)
        self.board = board or PlanBoard()
        self.runs = Runs(config, store, executor, self.wake, clock)
        # measured costs take only the operator's own draws and start-ups, never the numbers
        # a submission or a job's reports gave (those plan and forecast)
        self.accounting = Accounting(
            store, lambda: cluster_of(config, executor), clock,
            lambda job: operator_values(config.profiles.power, job),
            lambda job: operator_values(config.profiles.startup, job))
        self._reasons: set[str] = {"startup"}
        self._reasons_lock = threading.Lock()
        self._tick_lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_period = self.clock()

    # ------------------------------------------------------------------ thread
    def start(self) -> None:
        self.warm_up()
        self._thread = threading.Thread(target=self._loop, name="andreas-scheduler", daemon=True)
        self._thread.start()

    def warm_up(self) -> None:
        """Decide once on a made-up job before the first real one, so that loading the
        policy's kernels (about a second) does not delay it."""
        snapshot = warm_up_snapshot(cluster_of(self.config, self.executor))
        if snapshot is not None:
            self.decider.warm_up(snapshot)

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        self.decider.close()

    def shutdown(self, stop_jobs: bool = False) -> None:
        """Stop the loop; jobs keep running (and are re-adopted) unless `stop_jobs`."""
        self.stop()
        if stop_jobs:
            self.runs.stop(self.runs.live(lambda job: True), "shutdown")

    def alive(self) -> bool:
        """Whether the scheduler's thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def wake(self, reason: str) -> None:
        with self._reasons_lock:
            self._reasons.add(reason)
        self._wake.set()

    def _loop(self) -> None:
        failures = 0  # in a row: the retries back off, up to 30 s apart
        while not self._stopping.is_set():
            # after failures, retry less often (a request still wakes it at once)
            self._wake.wait(min(30.0, self.config.poll_s * 2 ** failures))
            self._wake.clear()
            if self._stopping.is_set():
                break
            try:
                self.tick()
                failures = 0
            except Exception as exc:  # keep serving; the next tick retries (tick keeps why)
                failures += 1
                # a sentence for /healthz and the jobs' reasons; the SQL and its parameters
                # (other jobs' ids) only in the log
                self.board.tick_failed(describe_failure(
                    exc, sqlite_folder(self.config.database_url)))
                log.exception("scheduler tick failed")

    # ------------------------------------------------------------------ one step
    def tick(self) -> None:
        with self._tick_lock:
            with self._reasons_lock:
                reasons, self._reasons = self._reasons, set()
            try:
                reasons |= self.runs.reconcile()
                period = self.config.period_s
                if period and self.clock() - self._last_period >= period:
                    reasons.add("period")
                revisit = self.board.latest.revisit_at
                if revisit is not None and self.clock() >= revisit:
                    reasons.add("revisit")  # the plan held jobs back until now at the latest
                if reasons:
                    self._last_period = self.clock()
                    self.replan(sorted(reasons))
                    self.board.tick_passed()
            except Exception:
                with self._reasons_lock:  # not lost: the next tick replans, for them too
                    self._reasons |= reasons | {"retry"}
                raise

    def replan(self, reasons: list[str]) -> None:
        """Decide (planner.py), carry the decision out (stop, then start), forecast it, and
        publish it on the board."""
        read = read_snapshot(self.store, self.executor, self.config, self.clock)
        proposal, read = self._decide_without_culprits(read, reasons)
        plan, running = proposal.plan, read.running
        changed = [(job_id, run.id) for job_id, run in running.items()
                   if stops_job(run_assignment(run), plan.get(job_id))]
        moved = {j for j, _ in changed if j in plan}
        self.runs.stop([c for c in changed if c[0] not in moved], "pause")
        self.runs.stop([c for c in changed if c[0] in moved], "move")
        for job_id, assignment in plan.items():
            if job_id not in running or (job_id, running[job_id].id) in changed:
                self.runs.start(job_id, assignment)
        predicted = proposal.predicted
        if predicted is None or (read.spread and predicted
                                 and all(f.range is None for f in predicted.values())):
            # (a forecast made to weigh a switch has no range: made again, with one)
            predicted = self.planner.forecast(read.snapshot, proposal, read.spread)
        self._publish(read, proposal, predicted, reasons)

    def _decide_without_culprits(self, read: SnapshotRead, reasons: list[str]
                                 ) -> tuple[Proposal, SnapshotRead]:
        """The planner's decision; when it fails, the waiting job that alone makes it fail
        (planner.culprit) is failed with the reason and the rest decided again, up to
        MAX_CULPRITS jobs a tick. Returns the decision and the snapshot it was made on."""
        current = {job_id: run_assignment(run) for job_id, run in read.running.items()}
        for _ in range(MAX_CULPRITS):
            try:
                return self.planner.decide(read.snapshot, current, reasons, read.owners,
                                           set(read.drained), read.speed_error), read
            except Exception as exc:
                culprit = self.planner.culprit(read.snapshot, read.owners, set(read.drained))
                if culprit is None:
                    raise
                self.runs.fail_unplannable(culprit, exc)
                read = replace(read, snapshot=replace(read.snapshot, jobs=tuple(
                    v for v in read.snapshot.jobs if v.job_id != culprit)))
        return self.planner.decide(read.snapshot, current, reasons, read.owners,
                                   set(read.drained), read.speed_error), read

    def _publish(self, read: SnapshotRead, proposal: Proposal,
                 predicted: dict[str, JobForecast], reasons: list[str]) -> None:
        """Record the decision: the jobs' first and last forecasts in their rows, the rest on
        the board."""
        snapshot, previous = read.snapshot, self.board.latest
        info = PlanInfo(time=snapshot.time, reasons=list(reasons),
                        decision_s=proposal.decision_s, decisions=previous.decisions + 1,
                        source=proposal.source, revisit_at=proposal.revisit_at,
                        forecast_cut=self.planner.forecast_cut,
                        foreseen=tuple(self.planner.foreseen), weighed=proposal.weighed,
                        gain_needed=proposal.gain_needed)
        price = self.config.cluster.carbon_price
        info.forecast = {job_id: forecast_entry(snapshot.time, f, price)
                         for job_id, f in predicted.items()}
        with self.store.session() as s:
            live = run_rows.live_gpu_indices(s)
            queue_rows.record_forecasts(s, previous.forecast, info.forecast)
        info.assignments = {job_id: {"node": a.node, "gpus": a.gpus,
                                     "gpu_indices": live.get(job_id),
                                     **({"more_nodes": list(a.more_nodes)}
                                        if a.more_nodes else {})}
                            for job_id, a in proposal.plan.items()}
        info.waiting = waiting_reasons(snapshot, proposal.plan, proposal.why,
                                       previous.waiting if proposal.source == "kept" else {})
        for job_id, nodes in read.drained_out.items():
            info.waiting[job_id] = waiting_entry(Reason("drained_out", node=nodes))
        self.board.publish(info)
        if self.board.record_history:
            self._record_history(snapshot.time, predicted, info)

    def _record_history(self, now: float, predicted: dict[str, JobForecast],
                        info: PlanInfo) -> None:
        """The whole workload's predicted cost as seen now: what was spent so far plus what
        the forecast says is still to come (for validation plots); and the decision: why it
        was made, where its plan came from (`Proposal.source`), and on which node each job
        runs now or is first foreseen to start (to tell a job that ran elsewhere than first
        planned)."""
        spent = self.accounting.measured()["jobs"]
        total = 0.0
        for job_id, m in spent.items():
            f = predicted.get(job_id)
            total += m["energy_cost"] + m.get("carbon_cost", 0.0) + (
                f.total_cost if f else m["tardiness_cost"])
        nodes = {job_id: "+".join(a.nodes) for d in reversed(info.foreseen)
                 for job_id, a in d.plan.items()}  # each job's first foreseen place wins
        nodes.update((job_id, "+".join([a["node"], *a.get("more_nodes", ())]))
                     for job_id, a in info.assignments.items())
        self.board.history.append({"time": now, "predicted_total": total, "jobs": len(spent),
                                   "forecast_jobs": len(predicted), "source": info.source,
                                   "reasons": list(info.reasons), "nodes": nodes,
                                   "weighed": info.weighed, "gain_needed": info.gain_needed})

    # ------------------------------------------------------------------ what-if
    def what_if(self, job: JobRow, owner: str) -> JobForecast:
        """The forecast of a job not yet submitted, planned with the current queue (for
        `hard_deadline`): the decision and forecast the next tick would make, made now,
        within `owner`'s quota. Called from request threads: it reads its own snapshot."""
        read = read_snapshot(self.store, self.executor, self.config, self.clock)
        key = f"job:{job.id}"
        view = JobView(Job(job.id, job.submitted_at, job.due_date, job.weight, float(job.epochs),
                           key, preemptible=job.preemptible, start_asap=job.start_asap),
                       float(job.epochs))
        known = read.snapshot.profiles
        snapshot: Snapshot = replace(read.snapshot, profiles=Profiles(
            {**known.table, key: job_configs(self.config, job)}, known.levels,
            {**known.power, key: job_power(self.config, job)},
            {**known.startup, key: job_startup(self.config, job)},
            {**known.gangs, key: job_gangs(self.config, job)},
            {**known.spread_slowdown, key: job_spread(self.config, job)}),
            jobs=(*read.snapshot.jobs, view))
        owners = {**read.owners, job.id: owner}
        spread = (None if self.config.forecast_spread is None
                  else {**read.spread, job.id: self.config.forecast_spread})
        return self.planner.what_if(snapshot, job.id,
                                    self.planner.limits(owners, set(read.drained)), spread)


