"""The live driver of the scheduling core: snapshot the cluster, ask the policy, apply the plan.

`Scheduler.tick()` is one step: reconcile what the executor reports (runs that ended, jobs
cancelled, progress written to files), then, if anything calls for it (a submission, a
completion, a cancellation, a prediction that moved, the period), build a `Snapshot` from the
database, have the planner decide (planner.py: the very policy objects the simulator uses,
in a worker process, decider.py; quotas, drained nodes, foreseen plans), and apply the plan:
stop what must pause or move (SIGTERM, grace, SIGKILL), start what must start. Each step is
recorded in the database before it is taken, so a service killed at any moment can pick up
where it stopped.

It runs in its own thread, so the API stays responsive while the policy plans. What the jobs
have cost so far is `accounting.py`'s, from the runs the scheduler records; what a run's end
means for its job is `states.after_run`'s.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, NoReturn

from sqlalchemy import func, select, update

from ..catalogue import canonical_gpu
from ..executors import Executor, LaunchRequest, NodeInfo, NodeLost
from ..io import feasible_configs
from ..measure.nvml import NvmlMeter
from ..model import Cluster, Job, Node, Profiles
from ..policies.base import Assignment, JobView, Snapshot, stops_job
from ..policies.decision import Reason
from ..sim.forecast import JobForecast
from .accounting import Accounting
from .config import ServiceConfig
from .database_errors import describe_failure
from .db import DrainedNode, JobRow, ProgressRow, RunRow, User
from .decider import Decider, make_decider, warm_up_snapshot
from .events import event
from .folders import FolderRefused, refused_write, sqlite_folder
from .job_accounts import JobAccounts, read_job_file
from .learning import speed_factor
from .metrics import decision_histogram
from .planner import Planner, Proposal, waiting_entry, waiting_reasons
from .states import (
    ACTIVE_STATES,
    CANCELLED_MESSAGE,
    LIVE_RUN_STATES,
    WAITING_STATES,
    JobState,
    RunEnd,
    RunState,
    after_run,
)
from .store import Store, hash_token, in_batches, must_get, new_token

MAX_CULPRITS = 3  # jobs a tick may fail as unplannable before it gives up and says why

log = logging.getLogger("andreas.service")
DONE_EPS = 1e-6


@dataclass
class PlanInfo:
    """The latest decision, as `/plan` shows it."""

    time: float = 0.0
    reasons: list[str] = field(default_factory=list)
    decision_s: float = 0.0
    assignments: dict[str, dict] = field(default_factory=dict)
    forecast: dict[str, dict] = field(default_factory=dict)
    decisions: int = 0
    source: str = "policy"  # or "forecast": the plan the last forecast made for this moment
    revisit_at: float | None = None  # jobs held back on purpose must be looked at again then
    # job id -> why it waits: {"reason": kind, "text": sentence, "until", "node", "job"}
    waiting: dict[str, dict] = field(default_factory=dict)


SNAPSHOT_COLUMNS = (JobRow.id, JobRow.submitted_at, JobRow.due_date, JobRow.weight, JobRow.epochs,
                    JobRow.epochs_done, JobRow.profile_name, JobRow.inline_profile,
                    JobRow.speed_factor, JobRow.preemptible, JobRow.start_asap,
                    JobRow.first_started_at)


class Scheduler:
    def __init__(self, config: ServiceConfig, store: Store, executor: Executor,
                 clock: Callable[[], float] = time.time, decider: Decider | None = None) -> None:
        self.config = config
        # where jobs post progress: set by `andreas serve` to the address it binds
        self.progress_base = config.public_url or "http://127.0.0.1:8000"
        self.store = store
        self.executor = executor
        self.clock = clock
        self.decider = decider or make_decider(config)
        self.planner = Planner(self.decider, config.policy, config.quotas)
        self.accounting = Accounting(store, self.cluster, clock)
        self.plan = PlanInfo()
        self.meter = NvmlMeter() if executor.kind == "local" else None
        self._reasons: set[str] = {"startup"}
        self._reasons_lock = threading.Lock()
        self._tick_lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_period = self.clock()
        self.errors = 0  # scheduler ticks that failed
        self.last_error: str | None = None  # why the latest replan failed; None once one passes
        # the whole workload's predicted total at each decision, for `andreas validate`'s
        # plot; off in the service, where it read every job and run at every decision
        self.record_history = False
        self.history: deque[dict] = deque(maxlen=100_000)
        self.decision_log: deque[tuple[float, float]] = deque(maxlen=10_000)  # (when, seconds)
        self.decision_seconds = decision_histogram()  # for /metrics
        # per job, (when, predicted completion, predicted cost) at each decision, for the
        # dashboard; in memory (a restart starts it afresh), the newest 5,000 jobs
        self.forecast_history: dict[str, deque[tuple[float, float, float]]] = {}
        self.drained: set[str] = set()  # nodes an admin drained (read at every snapshot)
        self.owners: dict[str, str] = {}  # job id -> user name, of the active jobs
        self.accounts = JobAccounts(config)  # the OS user each job runs as, its folders
        self.drained_out: dict[str, str] = {}  # waiting job -> the drained nodes it needs

    # ------------------------------------------------------------------ thread
    def start(self) -> None:
        self.warm_up()
        self._thread = threading.Thread(target=self._loop, name="andreas-scheduler", daemon=True)
        self._thread.start()

    def warm_up(self) -> None:
        """Decide once on a made-up job before the first real one, so that loading the
        policy's kernels (about a second) does not delay it."""
        snapshot = warm_up_snapshot(self.cluster())
        if snapshot is not None:
            self.decider.warm_up(snapshot)

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        self.decider.close()

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
                self.errors += 1
                # a sentence for /healthz and the jobs' reasons; the SQL and its parameters
                # (other jobs' ids) only in the log
                self.last_error = describe_failure(exc, sqlite_folder(self.config.database_url))
                log.exception("scheduler tick failed")

    # ------------------------------------------------------------------ one step
    def tick(self) -> None:
        with self._tick_lock:
            with self._reasons_lock:
                reasons, self._reasons = self._reasons, set()
            try:
                reasons |= self.reconcile()
                period = self.config.period_s
                if period and self.clock() - self._last_period >= period:
                    reasons.add("period")
                if self.plan.revisit_at is not None and self.clock() >= self.plan.revisit_at:
                    reasons.add("revisit")  # the plan held jobs back until now at the latest
                if reasons:
                    self._last_period = self.clock()
                    self.replan(sorted(reasons))
                    self.last_error = None
            except Exception:
                with self._reasons_lock:  # not lost: the next tick replans, for them too
                    self._reasons |= reasons | {"retry"}
                raise

    def nodes(self) -> list[NodeInfo]:
        return self.executor.nodes()

    def cluster(self) -> Cluster:
        c = self.config.cluster
        nodes = tuple(Node(n.name, n.gpu_type, n.gpus) for n in self.nodes())
        return replace(c, nodes=nodes)

    def job_configs(self, job: Any, learned: bool = True) -> dict[tuple[str, int], float]:
        """Seconds per epoch by (GPU type, GPU count) for a job (a JobRow, or a row of its
        columns), scaled by what was learned."""
        if job.inline_profile:
            table = {(canonical_gpu(r["gpu_type"]) or r["gpu_type"], int(r["gpus"])):
                     float(r["seconds_per_epoch"]) for r in job.inline_profile}
        else:
            assert job.profile_name is not None  # a job has a profile name or inline rows
            table = dict(self.config.profiles.configs(job.profile_name))
        factor = job.speed_factor if learned else 1.0
        return {k: v * factor for k, v in table.items()}

    @staticmethod
    def profile_key(job: Any) -> str:
        """The snapshot's profile for `job`: its named profile, shared by every job that runs
        at its nominal speed; its own when it has inline rows or a learned speed. (One table per
        job made a long queue's snapshot slow to build.)"""
        if job.inline_profile or job.speed_factor != 1.0 or job.profile_name is None:
            return f"job:{job.id}"
        return f"profile:{job.profile_name}"

    def run_dir(self, job_id: str, run_id: int) -> Path:
        return self.config.data_dir / "jobs" / job_id / "runs" / str(run_id)

    def job_dir(self, job_id: str) -> Path:
        return self.config.data_dir / "jobs" / job_id

    # ------------------------------------------------------------------ reconcile
    def reconcile(self) -> set[str]:
        """Bring the database in line with reality; return replanning reasons found."""
        reasons: set[str] = set()
        with self.store.session() as s:
            runs = s.scalars(select(RunRow).where(RunRow.state.in_(LIVE_RUN_STATES)))
            for run in runs:
                job = must_get(s, JobRow, run.job_id)
                if self._read_progress_file(s, job, run):
                    reasons.add("prediction-moved")
                status = self.executor.status(run.handle, self.run_dir(job.id, run.id))
                if status.alive:
                    if run.state == RunState.STARTING:
                        run.state = RunState.RUNNING  # adopted after a restart
                    continue
                self._end_run(s, job, run, status.returncode, status.stop_requested)
                reasons.add("completion" if job.state == JobState.COMPLETED else "run-ended")
            for job in s.scalars(select(JobRow).where(JobRow.cancel_requested.is_(True),
                                                      JobRow.state.in_(WAITING_STATES))):
                job.state, job.message = JobState.CANCELLED, CANCELLED_MESSAGE
        stopping = self._live_runs(lambda job: job.cancel_requested)
        if stopping:
            self._stop(stopping, "cancel")
            reasons.add("cancel")
        timed_out = self._over_runtime()
        if timed_out:
            self._stop(timed_out, "timeout")
            reasons.add("timeout")
        return reasons

    def _over_runtime(self) -> list[tuple[str, int]]:
        """Live runs of jobs that have run, over all their runs, for their max_runtime_s."""
        now = self.clock()
        out = []
        with self.store.session() as s:
            rows = s.execute(select(RunRow, JobRow).join(JobRow, RunRow.job_id == JobRow.id)
                             .where(RunRow.state.in_(LIVE_RUN_STATES),
                                    JobRow.max_runtime_s.is_not(None))).all()
            for run, job in rows:
                earlier = s.scalars(select(RunRow).where(RunRow.job_id == job.id,
                                                         RunRow.id != run.id)).all()
                used = (now - run.started_at) + sum(r.ended_at - r.started_at for r in earlier
                                                    if r.ended_at is not None)
                if job.max_runtime_s is not None and used >= job.max_runtime_s:
                    out.append((job.id, run.id))
        return out

    def _read_progress_file(self, s, job: JobRow, run: RunRow) -> bool:
        """Progress the job wrote to its checkpoint dir but has not posted (yet, or at all);
        True if it moved the learned speed enough to replan."""
        # the job's account owns this folder: read it as a hostile file (no link, no FIFO)
        found = read_job_file(self.job_dir(job.id) / "checkpoint" / "andreas-progress.json")
        if found is None:
            return False
        try:  # written: when the job wrote it, not when we looked
            done, written = float(json.loads(found[0])["epochs_done"]), found[1]
        except (ValueError, KeyError, TypeError, IndexError):
            return False
        if not math.isfinite(done):
            return False
        if done > job.epochs_done + DONE_EPS:
            return self.record_progress(s, job, run, done, at=written)
        return False

    def record_progress(self, s, job: JobRow, run: RunRow, epochs_done: float,
                        at: float | None = None) -> bool:
        """Store a progress report (made at `at`, default now); return True when the learned
        speed moved enough to warrant a new plan."""
        now = self.clock() if at is None else at
        job.epochs_done = min(float(job.epochs), max(0.0, epochs_done))
        s.add(ProgressRow(job_id=job.id, run_id=run.id, time=now, epochs_done=job.epochs_done))
        if not self.config.learn:
            return False
        s.flush()
        reports = s.scalars(select(ProgressRow).where(ProgressRow.job_id == job.id)
                            .order_by(ProgressRow.id)).all()
        run_rows = {r.id: r for r in s.scalars(select(RunRow).where(RunRow.job_id == job.id))}
        base = self.job_configs(job, learned=False)
        factor = speed_factor(reports, {rid: base.get((r.gpu_type, len(r.gpu_indices)))
                                        for rid, r in run_rows.items()})
        if factor is None:
            return False
        moved = abs(factor - job.speed_factor) > self.config.replan_deviation * job.speed_factor
        job.speed_factor = factor
        return moved

    def _end_run(self, s, job: JobRow, run: RunRow, returncode: int | None,
                 stop_requested: bool) -> None:
        now = self.clock()
        run.state, run.ended_at, run.exit_code = RunState.ENDED, now, returncode
        run.epochs_at_end = job.epochs_done
        if self.meter and run.nvml_start_mj:
            end = self.meter.read_mj(int(i) for i in run.nvml_start_mj)
            if end:
                run.energy_j = sum(end[k] - v for k, v in run.nvml_start_mj.items()) / 1000.0
        self.executor.release(run.handle)
        earlier_crashes = s.scalar(select(func.count()).select_from(RunRow).where(
            RunRow.job_id == job.id, RunRow.id != run.id, RunRow.stop_reason == "crashed")) or 0
        outcome = after_run(RunEnd(
            run_id=run.id, returncode=returncode, stop_requested=stop_requested,
            stop_reason=run.stop_reason, all_epochs_done=job.epochs_done >= job.epochs - DONE_EPS,
            cancel_requested=job.cancel_requested, launched=run.handle is not None,
            ever_started=job.first_started_at is not None, earlier_crashes=earlier_crashes,
            max_retries=self.config.max_retries, max_runtime_s=job.max_runtime_s))
        job.state = outcome.state
        if outcome.message is not None:
            job.message = outcome.message
        if outcome.ends:
            job.completed_at = now
        if outcome.crashed:
            run.stop_reason = "crashed"
        if outcome.all_epochs:
            job.epochs_done = float(job.epochs)
            run.epochs_at_end = job.epochs_done
        event("end", job.id, run=run.id, state=job.state, exit=returncode,
              reason=run.stop_reason, epochs=f"{run.epochs_at_end:g}")

    def _live_runs(self, which: Callable[[JobRow], bool]) -> list[tuple[str, int]]:
        with self.store.session() as s:
            rows = s.execute(select(RunRow, JobRow).join(JobRow, RunRow.job_id == JobRow.id)
                             .where(RunRow.state.in_(LIVE_RUN_STATES))).all()
            return [(job.id, run.id) for run, job in rows if which(job)]

    def _stop(self, runs: list[tuple[str, int]], reason: str) -> None:
        """Record why, then SIGTERM all at once, wait out the grace period, SIGKILL the rest."""
        with self.store.session() as s:
            handles = []
            for job_id, run_id in runs:
                run = must_get(s, RunRow, run_id)
                run.stop_reason = run.stop_reason or reason
                handles.append((run.handle, self.run_dir(job_id, run_id)))
                event("stop", job_id, run=run_id, reason=run.stop_reason)
        self.executor.stop(handles, self.config.grace_s)
        with self.store.session() as s:
            for job_id, run_id in runs:
                run, job = must_get(s, RunRow, run_id), must_get(s, JobRow, job_id)
                if run.state == RunState.ENDED:
                    continue
                self._read_progress_file(s, job, run)
                status = self.executor.status(run.handle, self.run_dir(job_id, run_id))
                self._end_run(s, job, run, status.returncode, True)

    # ------------------------------------------------------------------ plan
    def snapshot(self) -> tuple[Snapshot, dict[str, RunRow]]:
        now = self.clock()
        cluster = whole = self.cluster()
        held: dict[str, int] = {}
        views, table, running = [], {}, {}
        known = {n.name for n in cluster.nodes}
        with self.store.session() as s:
            # plain rows of the columns a snapshot needs, read and then let go of: loading
            # ORM objects of a long queue, or building its views while in the transaction,
            # held the database from the API's requests for a long while
            jobs = s.execute(select(*SNAPSHOT_COLUMNS).where(
                JobRow.state.in_(ACTIVE_STATES), JobRow.cancel_requested.is_(False))
                .order_by(JobRow.submitted_at, JobRow.id)).all()
            live = {r.job_id: r for r in s.scalars(
                select(RunRow).where(RunRow.state.in_(LIVE_RUN_STATES)))}
            self.drained = set(s.scalars(select(DrainedNode.name)))
            self.owners = dict(s.execute(select(JobRow.id, User.name).join(
                User, JobRow.owner_id == User.id).where(JobRow.state.in_(ACTIVE_STATES))).all())
        for job in jobs:
            run = live.get(job.id)
            if run is not None and run.node not in known:
                # its node left the cluster (a Ray node lost) and the run is not yet
                # reconciled as ended: planned once it is, restarted from its checkpoint
                continue
            remaining = float(job.epochs) - job.epochs_done
            if remaining <= DONE_EPS:
                if run is not None:  # finishing: its GPUs stay taken until it exits
                    held[run.node] = held.get(run.node, 0) + len(run.gpu_indices)
                    continue
                # every epoch reported, but no run ended it (killed after its last
                # checkpoint): a run that resumes from the checkpoint ends it; planned as
                # one epoch, it would otherwise never be started again
                remaining = min(1.0, float(job.epochs))
            key = self.profile_key(job)
            if key not in table:
                table[key] = self.job_configs(job)
            assignment = None
            if run is not None:
                assignment = Assignment(run.node, len(run.gpu_indices))
                running[job.id] = run
            views.append(JobView(Job(job.id, job.submitted_at, job.due_date, job.weight,
                                     float(job.epochs), key, preemptible=job.preemptible,
                                     start_asap=job.start_asap), remaining, assignment,
                                 job.first_started_at is not None))
        for node, gpus in self.executor.foreign_gpus().items():  # another Slurm user's jobs
            held[node] = held.get(node, 0) + gpus
        if held:
            cluster = replace(cluster, nodes=tuple(
                Node(n.name, n.gpu_type, max(0, n.gpus - held.get(n.name, 0)))
                for n in cluster.nodes))
        views = self._leave_out_drained_out(views, table, whole)
        if self.drained:  # a drained node offers only the GPUs its running jobs hold
            running_there: dict[str, int] = {}
            for v in views:
                if v.assignment is not None:
                    running_there[v.assignment.node] = running_there.get(
                        v.assignment.node, 0) + v.assignment.gpus
            cluster = replace(cluster, nodes=tuple(
                Node(n.name, n.gpu_type, min(n.gpus, running_there.get(n.name, 0)))
                if n.name in self.drained else n for n in cluster.nodes
                if n.name not in self.drained or running_there.get(n.name, 0) > 0))
        # real processes pay the restart overhead on their first start too (the interpreter,
        # loading data): the holds, the plan and the forecast all count it
        return Snapshot(now, cluster, Profiles(table), tuple(views),
                        first_start_overhead=True), running

    def _leave_out_drained_out(self, views: list[JobView], table: dict,
                               cluster: Cluster) -> list[JobView]:
        """The views less the waiting jobs that no node left undrained can run (every node of
        their GPU types drained): they wait, saying so (`drained_out`), and the decision and
        its forecast plan the rest over the remaining nodes. Planned with them, a job that
        can never start stopped every decision until the node was undrained."""
        self.drained_out = {}
        if not self.drained:
            return views
        open_nodes = replace(cluster, nodes=tuple(n for n in cluster.nodes
                                                  if n.name not in self.drained))
        kept = []
        for view in views:
            if view.assignment is None and not feasible_configs(open_nodes,
                                                                table[view.job.profile]):
                types = {t for t, _ in table[view.job.profile]}
                self.drained_out[view.job_id] = ", ".join(sorted(
                    n.name for n in cluster.nodes if n.name in self.drained
                    and n.gpu_type in types)) or "every node"
                continue
            kept.append(view)
        return kept

    def replan(self, reasons: list[str]) -> None:
        """Decide (planner.py), carry the decision out (stop, then start), forecast it, and
        record it for `/plan`."""
        snapshot, running = self.snapshot()
        proposal, snapshot = self._decide_without_culprits(snapshot, running, reasons)
        plan = proposal.plan
        changed = [(job_id, run.id) for job_id, run in running.items()
                   if stops_job(Assignment(run.node, len(run.gpu_indices)), plan.get(job_id))]
        if changed:
            moved = {j for j, _ in changed if j in plan}
            self._stop([c for c in changed if c[0] not in moved], "pause")
            self._stop([c for c in changed if c[0] in moved], "move")
        starts = [(job_id, a) for job_id, a in plan.items()
                  if job_id not in running or (job_id, running[job_id].id) in changed]
        for job_id, assignment in starts:
            self._start(job_id, assignment)
        predicted = proposal.predicted
        if predicted is None:
            predicted = self.planner.forecast(snapshot, proposal)
        previous = self.plan.waiting
        self._record_plan(snapshot, plan, predicted, reasons, proposal.decision_s)
        self.plan.source, self.plan.revisit_at = proposal.source, proposal.revisit_at
        self.plan.waiting = waiting_reasons(snapshot, plan, proposal.why,
                                            previous if proposal.source == "kept" else {})
        for job_id, nodes in self.drained_out.items():
            self.plan.waiting[job_id] = waiting_entry(Reason("drained_out", node=nodes))

    def _decide_without_culprits(self, snapshot: Snapshot, running: dict[str, RunRow],
                                 reasons: list[str]) -> tuple[Proposal, Snapshot]:
        """The planner's decision; when it fails, the waiting job that alone makes it fail
        (planner.culprit) is failed with the reason and the rest decided again, up to
        MAX_CULPRITS jobs a tick. Returns the decision and the snapshot it was made on."""
        current = {job_id: Assignment(run.node, len(run.gpu_indices))
                   for job_id, run in running.items()}
        for _ in range(MAX_CULPRITS):
            try:
                return self.planner.decide(snapshot, current, reasons, self.owners,
                                           self.drained), snapshot
            except Exception as exc:
                culprit = self.planner.culprit(snapshot, self.owners, self.drained)
                if culprit is None:
                    raise
                self._fail_unplannable(culprit, exc)
                snapshot = replace(snapshot, jobs=tuple(v for v in snapshot.jobs
                                                        if v.job_id != culprit))
        return self.planner.decide(snapshot, current, reasons, self.owners,
                                   self.drained), snapshot

    def _fail_unplannable(self, job_id: str, exc: Exception) -> None:
        event("unplannable", job_id, error=f"{type(exc).__name__}: {exc}")
        with self.store.session() as s:
            job = must_get(s, JobRow, job_id)
            job.state = JobState.FAILED
            job.message = (f"the scheduler cannot plan this job ({type(exc).__name__}: {exc}), "
                           "so it fails alone rather than stop every user's planning; check "
                           "its profile and epochs")[:2000]

    def what_if(self, job: JobRow, owner: str) -> JobForecast:
        """The forecast of a job not yet submitted, planned with the current queue (for
        `hard_deadline`): the decision and forecast the next tick would make, made now,
        within `owner`'s quota."""
        snapshot, _ = self.snapshot()
        key = f"job:{job.id}"
        view = JobView(Job(job.id, job.submitted_at, job.due_date, job.weight, float(job.epochs),
                           key, preemptible=job.preemptible, start_asap=job.start_asap),
                       float(job.epochs))
        snapshot = replace(snapshot, profiles=Profiles(
            {**snapshot.profiles.table, key: self.job_configs(job)}),
            jobs=(*snapshot.jobs, view))
        owners = {**self.owners, job.id: owner}
        return self.planner.what_if(snapshot, job.id, self.planner.limits(owners, self.drained))

    def _owner_and_workdir(self, job_id: str) -> tuple[str, str | None]:
        with self.store.session() as s:
            row = s.execute(select(User.name, JobRow.workdir).join(
                JobRow, JobRow.owner_id == User.id).where(JobRow.id == job_id)).first()
        return ("", None) if row is None else (row[0] or "", row[1])

    def _free_indices(self, node: NodeInfo) -> list[int]:
        with self.store.session() as s:
            used = set()
            for run in s.scalars(select(RunRow).where(RunRow.node == node.name,
                                                      RunRow.state.in_(LIVE_RUN_STATES))):
                used.update(run.gpu_indices)
        return [i for i in node.gpu_indices if i not in used]

    def _start(self, job_id: str, assignment: Assignment) -> None:
        node = next((n for n in self.nodes() if n.name == assignment.node), None)
        if node is None:  # the node left the cluster since the snapshot (a Ray node lost)
            log.warning("job %s: node %s is gone; planning again", job_id, assignment.node)
            self.wake("node-lost")
            return
        indices = self._free_indices(node)[:assignment.gpus]
        if len(indices) < assignment.gpus:  # a GPU is still held by a run that is exiting
            log.warning("job %s: not enough free GPUs on %s yet", job_id, node.name)
            self.wake("retry")
            return
        job_dir = self.job_dir(job_id)
        owner, workdir = self._owner_and_workdir(job_id)
        try:  # before a run is recorded: a data folder that refuses writes records none
            account = self.accounts.prepare(job_dir, owner, workdir)
        except OSError as exc:
            refused = refused_write(exc, self.config.data_dir)
            if refused is None:
                raise
            self._refused(job_id, refused)
        token = new_token()
        now = self.clock()
        with self.store.session() as s:  # recorded before the process exists
            job = must_get(s, JobRow, job_id)
            run = RunRow(job_id=job_id, node=node.name, gpu_type=node.gpu_type,
                         gpu_indices=list(indices), state=RunState.STARTING,
                         token_hash=hash_token(token), started_at=now,
                         epochs_at_start=job.epochs_done)
            s.add(run)
            s.flush()
            run_id = run.id
            was = (job.state, job.first_started_at)  # restored if the node is lost
            job.state = JobState.RUNNING
            if job.first_started_at is None:
                job.first_started_at = now
            command, workdir, epochs = list(job.command), job.workdir, job.epochs
        request = LaunchRequest(
            run_id=run_id, job_id=job_id, node=node.name, gpu_indices=tuple(indices),
            command=tuple(command), workdir=workdir,
            env={"ANDREAS_JOB_ID": job_id, "ANDREAS_RUN_ID": str(run_id),
                 "ANDREAS_CHECKPOINT_DIR": str(job_dir / "checkpoint"),
                 "ANDREAS_PROGRESS_URL": f"{self.progress_base}/jobs/{job_id}/progress",
                 "ANDREAS_PROGRESS_TOKEN": token, "ANDREAS_EPOCHS": f"{epochs:g}",
                 "ANDREAS_GPU_INDICES": ",".join(map(str, indices)),
                 "ANDREAS_NODE": node.name, "ANDREAS_GPU_TYPE": node.gpu_type},
            run_dir=self.run_dir(job_id, run_id), log_path=job_dir / "logs" / f"run-{run_id}.log",
            lock_path=job_dir / "lock", user=account)
        nvml = self.meter.read_mj(indices) if self.meter else None
        try:
            handle = self.executor.start(request)
        except NodeLost as exc:  # not the job's fault: planned again on the nodes left
            with self.store.session() as s:
                run, job = must_get(s, RunRow, run_id), must_get(s, JobRow, job_id)
                run.state, run.ended_at, run.stop_reason = RunState.ENDED, self.clock(), "node-lost"
                job.state, job.first_started_at = was
                job.message = f"{exc}; planned again"
            self.wake("node-lost")
            return
        except OSError as exc:
            refused = refused_write(exc, self.config.data_dir)
            if refused is None:
                self._start_failed(run_id, job_id, exc)
                return
            # The service's folder, not the job: no run happened (it ends as it began, so no
            # energy is counted) and the job waits as it was
            with self.store.session() as s:
                run, job = must_get(s, RunRow, run_id), must_get(s, JobRow, job_id)
                run.state, run.ended_at, run.stop_reason = (RunState.ENDED, run.started_at,
                                                            "data-folder")
                job.state, job.first_started_at = was
            self._refused(job_id, refused)
        except Exception as exc:
            self._start_failed(run_id, job_id, exc)
            return
        with self.store.session() as s:
            run = must_get(s, RunRow, run_id)
            run.handle, run.nvml_start_mj = handle, nvml
            if run.state == RunState.STARTING:
                run.state = RunState.RUNNING
        event("start", job_id, run=run_id, node=node.name, gpus=len(indices),
              gpu_type=node.gpu_type, user=account)

    def _refused(self, job_id: str, refused: FolderRefused) -> NoReturn:
        """The data folder refused a write while starting `job_id`: the job keeps waiting with
        the reason as its message, and the tick fails with it, which /healthz and every
        waiting job's `reason` show (failed ticks retry, backing off, until it takes
        writes)."""
        with self.store.session() as s:
            must_get(s, JobRow, job_id).message = str(refused)
        raise refused

    def _start_failed(self, run_id: int, job_id: str, exc: Exception) -> None:
        """The job's start failed for a reason of its own (a missing working folder, a
        command that cannot run): it fails, saying why."""
        with self.store.session() as s:
            run, job = must_get(s, RunRow, run_id), must_get(s, JobRow, job_id)
            run.state, run.ended_at = RunState.ENDED, self.clock()
            run.stop_reason = "start-failed"
            job.state, job.message = JobState.FAILED, f"could not start: {exc}"
        event("start-failed", job_id, run=run_id, error=exc)

    def _record_plan(self, snapshot: Snapshot, plan, predicted, reasons, decision_s) -> None:
        info = PlanInfo(time=snapshot.time, reasons=list(reasons), decision_s=decision_s,
                        decisions=self.plan.decisions + 1)
        self.decision_log.append((snapshot.time, decision_s))
        self.decision_seconds.observe(decision_s)
        for job_id, f in predicted.items():
            self._remember_forecast(job_id, snapshot.time, f.completion, f.total_cost)
            info.forecast[job_id] = {"planned_at": snapshot.time, "start": f.start,
                                     "completion": f.completion, "energy_cost": f.energy_cost,
                                     "tardiness_cost": f.tardiness_cost,
                                     "total_cost": f.total_cost}
        with self.store.session() as s:
            live: dict[str, list[int]] = dict(s.execute(
                select(RunRow.job_id, RunRow.gpu_indices)
                .where(RunRow.state.in_(LIVE_RUN_STATES))).all())
            for job_id, a in plan.items():
                info.assignments[job_id] = {"node": a.node, "gpus": a.gpus,
                                            "gpu_indices": live.get(job_id)}
            # Stored in a job's row: its first forecast (`predicted`, and `forecast` until it
            # leaves the plan), then its last, once it leaves the plan (ended or cancelled).
            # The API shows the planned jobs' latest from memory (`plan.forecast`); a
            # restart's first decision makes them again. Writing every queued job's moved
            # forecast at every decision held the database and the service's interpreter
            # from the API's requests (all of them move when the queue is long).
            previous = self.plan.forecast
            left = [{"id": job_id, "forecast": entry} for job_id, entry in previous.items()
                    if job_id not in info.forecast]
            # not in the last plan: new jobs, or every job after a restart
            unseen = [job_id for job_id in info.forecast if job_id not in previous]
            new = [job_id for batch in in_batches(unseen)
                   for job_id in s.scalars(select(JobRow.id).where(
                       JobRow.id.in_(batch), JobRow.predicted.is_(None)))]
            first = [{"id": job_id, "predicted": info.forecast[job_id],
                      "forecast": info.forecast[job_id]} for job_id in new]
            for rows in (first, left):  # one statement for each set of columns
                if rows:
                    s.execute(update(JobRow), rows)
        self.plan = info
        if self.record_history:
            self._record_history(snapshot.time, predicted)

    def _remember_forecast(self, job_id: str, now: float, completion: float,
                           cost: float) -> None:
        points = self.forecast_history.get(job_id)
        if points is None:
            if len(self.forecast_history) >= 5000:
                del self.forecast_history[next(iter(self.forecast_history))]
            points = self.forecast_history[job_id] = deque(maxlen=500)
        if not points or points[-1][1:] != (completion, cost):
            points.append((now, completion, cost))

    def _record_history(self, now: float, predicted) -> None:
        """The whole workload's predicted cost as seen now: what was spent so far plus what
        the forecast says is still to come (for validation plots)."""
        spent = self.accounting.measured()["jobs"]
        total = 0.0
        for job_id, m in spent.items():
            f = predicted.get(job_id)
            total += m["energy_cost"] + (f.total_cost if f else m["tardiness_cost"])
        self.history.append({"time": now, "predicted_total": total, "jobs": len(spent)})

    def shutdown(self, stop_jobs: bool = False) -> None:
        """Stop the loop; jobs keep running (and are re-adopted) unless `stop_jobs`."""
        self.stop()
        if stop_jobs:
            runs = self._live_runs(lambda job: True)
            if runs:
                self._stop(runs, "shutdown")
