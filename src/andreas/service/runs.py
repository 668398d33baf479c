"""The runs: bring the database in line with what the executor reports, start and stop
processes, record their progress.

Each step is recorded in the database before it is taken (a run's row before its process
exists, a stop's reason before the signal), so that a service killed at any moment can pick
up where it stopped. What a run's end means for its job is `states.after_run`'s; the SQL is
the store's (`store/runs.py`).
"""

from __future__ import annotations

import json
import logging
import math
import time
from typing import Callable, NoReturn

from sqlalchemy.orm import Session

from ..executors import Executor, LaunchRequest, NodeInfo, NodeLost
from ..measure.nvml import NvmlMeter
from ..policies.base import Assignment
from .config import ServiceConfig
from .db import JobRow, ProgressRow, RunRow, run_places
from .events import event
from .folders import FolderRefused, refused_write
from .job_accounts import JobAccounts, read_job_file
from .learning import speed_evidence, startup_s, worth_replanning
from .snapshots import DONE_EPS, job_configs, job_gangs, job_spread, run_config
from .states import CANCELLED_MESSAGE, JobState, RunEnd, RunState, after_run
from .store import Store, hash_token, must_get, new_token
from .store import runs as run_rows

log = logging.getLogger("andreas.service")


class Runs:
    """The runs of the jobs in `store` on `executor`. `wake(reason)` asks for a new decision
    (a node lost while starting, GPUs not free yet)."""

    def __init__(self, config: ServiceConfig, store: Store, executor: Executor,
                 wake: Callable[[str], None], clock: Callable[[], float] = time.time) -> None:
        self.config, self.store, self.executor = config, store, executor
        self.wake, self.clock = wake, clock
        # where jobs post progress
        self.progress_base = config.public_url or "http://127.0.0.1:8000"
        self.meter = NvmlMeter() if executor.kind == "local" else None
        self.accounts = JobAccounts(config)  # the OS user each job runs as, its folders

    # ------------------------------------------------------------------ reconcile
    def reconcile(self) -> set[str]:
        """Bring the database in line with reality; return the replanning reasons found."""
        reasons: set[str] = set()
        with self.store.session() as s:
            for run in run_rows.live_runs(s):
                job = must_get(s, JobRow, run.job_id)
                if self._read_progress_file(s, job, run):
                    reasons.add("prediction-moved")
                status = self.executor.status(run.handle, self.config.run_dir(job.id, run.id))
                if status.alive:
                    if run.state == RunState.STARTING:
                        run.state = RunState.RUNNING  # adopted after a restart
                    continue
                self._end_run(s, job, run, status.returncode, status.stop_requested)
                reasons.add("completion" if job.state == JobState.COMPLETED else "run-ended")
            for job in run_rows.cancelled_waiting(s):
                job.state, job.message = JobState.CANCELLED, CANCELLED_MESSAGE
        stopping = self.live(lambda job: job.cancel_requested)
        if stopping:
            self.stop(stopping, "cancel")
            reasons.add("cancel")
        timed_out = self._over_runtime()
        if timed_out:
            self.stop(timed_out, "timeout")
            reasons.add("timeout")
        return reasons

    def live(self, which: Callable[[JobRow], bool]) -> list[tuple[str, int]]:
        """(job id, run id) of the live runs whose job `which` picks."""
        with self.store.session() as s:
            return [(job.id, run.id) for run, job in run_rows.live_runs_with_jobs(s)
                    if which(job)]

    def _over_runtime(self) -> list[tuple[str, int]]:
        """Live runs of jobs that have run, over all their runs, for their max_runtime_s."""
        now = self.clock()
        out = []
        with self.store.session() as s:
            for run, job in run_rows.live_runs_with_jobs(s, runtime_limited=True):
                used = (now - run.started_at) + sum(
                    r.ended_at - r.started_at for r in run_rows.runs_of(s, job.id)
                    if r.id != run.id and r.ended_at is not None)
                if job.max_runtime_s is not None and used >= job.max_runtime_s:
                    out.append((job.id, run.id))
        return out

    # ------------------------------------------------------------------ progress
    def _read_progress_file(self, s: Session, job: JobRow, run: RunRow) -> bool:
        """Progress the job wrote to its checkpoint dir but has not posted (yet, or at all);
        True if it moved the learned speed enough to replan."""
        # the job's account owns this folder: read it as a hostile file (no link, no FIFO)
        found = read_job_file(self.config.job_dir(job.id) / "checkpoint"
                              / "andreas-progress.json")
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

    def record_progress(self, s: Session, job: JobRow, run: RunRow, epochs_done: float,
                        at: float | None = None) -> bool:
        """Store a progress report (made at `at`, default now); return True when the learned
        speed moved enough to warrant a new plan."""
        now = self.clock() if at is None else at
        job.epochs_done = min(float(job.epochs), max(0.0, epochs_done))
        s.add(ProgressRow(job_id=job.id, run_id=run.id, time=now, epochs_done=job.epochs_done))
        if not self.config.learn:
            return False
        s.flush()
        reports, runs = run_rows.progress_reports(s, job.id), run_rows.runs_of(s, job.id)
        profiled = {r.id: self._profiled_seconds(job, r) for r in runs}
        evidence = speed_evidence(reports, profiled)
        factor = evidence.learned
        job.speed_spread, job.speed_pairs = evidence.spread, evidence.pairs
        # its start-up, from each run's first report at the speed learned so far
        speed = job.speed_factor if factor is None else factor
        job.startup_s = startup_s(runs, reports, {
            r.id: spe * speed if (spe := profiled[r.id]) else None for r in runs})
        if factor is None:
            return False
        moved = worth_replanning(job.speed_factor, evidence, self.config.replan_deviation)
        job.speed_factor = factor
        return moved

    def _profiled_seconds(self, job: JobRow, run: RunRow) -> float | None:
        """The seconds per epoch `job`'s profile gives for where `run` ran (None: none), a
        gang's slowed by its `spread_slowdown` where its nodes spanned node groups: what
        its reports are measured against, so that the learned speed is the job's own."""
        config = run_config(run)
        table: dict = {**job_configs(self.config, job, learned=False),
                       **job_gangs(self.config, job, learned=False)}
        spe = table.get(config)
        if spe is None or len(config) < 3:
            return spe
        if self.config.cluster.spans_groups(tuple(node for node, _ in run_places(run))):
            spe *= job_spread(self.config, job).get(config, 1.0)
        return spe

    # ------------------------------------------------------------------ ends and stops
    def _end_run(self, s: Session, job: JobRow, run: RunRow, returncode: int | None,
                 stop_requested: bool) -> None:
        now = self.clock()
        run.state, run.ended_at, run.exit_code = RunState.ENDED, now, returncode
        run.epochs_at_end = job.epochs_done
        if self.meter and run.nvml_start_mj:
            end = self.meter.read_mj(int(i) for i in run.nvml_start_mj)
            if end:
                run.energy_j = sum(end[k] - v for k, v in run.nvml_start_mj.items()) / 1000.0
        self.executor.release(run.handle)
        outcome = after_run(RunEnd(
            run_id=run.id, returncode=returncode, stop_requested=stop_requested,
            stop_reason=run.stop_reason, all_epochs_done=job.epochs_done >= job.epochs - DONE_EPS,
            cancel_requested=job.cancel_requested, launched=run.handle is not None,
            ever_started=job.first_started_at is not None,
            earlier_crashes=run_rows.crashes_before(s, job.id, run.id),
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

    def stop(self, runs: list[tuple[str, int]], reason: str) -> None:
        """Record why, then SIGTERM all at once, wait out the grace period, SIGKILL the rest."""
        if not runs:
            return
        with self.store.session() as s:
            handles = []
            for job_id, run_id in runs:
                run = must_get(s, RunRow, run_id)
                run.stop_reason = run.stop_reason or reason
                handles.append((run.handle, self.config.run_dir(job_id, run_id)))
                event("stop", job_id, run=run_id, reason=run.stop_reason)
        self.executor.stop(handles, self.config.grace_s)
        with self.store.session() as s:
            for job_id, run_id in runs:
                run, job = must_get(s, RunRow, run_id), must_get(s, JobRow, job_id)
                if run.state == RunState.ENDED:
                    continue
                self._read_progress_file(s, job, run)
                status = self.executor.status(run.handle, self.config.run_dir(job_id, run_id))
                self._end_run(s, job, run, status.returncode, True)

    def fail_unplannable(self, job_id: str, exc: Exception) -> None:
        """Fail a waiting job no decision can plan, saying why."""
        event("unplannable", job_id, error=f"{type(exc).__name__}: {exc}")
        with self.store.session() as s:
            job = must_get(s, JobRow, job_id)
            job.state = JobState.FAILED
            job.message = (f"the scheduler cannot plan this job ({type(exc).__name__}: {exc}), "
                           "so it fails alone rather than stop every user's planning; check "
                           "its profile and epochs")[:2000]

    # ------------------------------------------------------------------ starts
    def start(self, job_id: str, assignment: Assignment) -> None:
        """Start a run of `job_id` as `assignment` says (on every node of a gang): recorded,
        then launched."""
        known = {n.name: n for n in self.executor.nodes()}
        places: list[tuple[NodeInfo, list[int]]] = []
        for name in assignment.nodes:
            node = known.get(name)
            if node is None:  # the node left the cluster since the snapshot (a Ray node lost)
                log.warning("job %s: node %s is gone; planning again", job_id, name)
                self.wake("node-lost")
                return
            with self.store.session() as s:
                held = run_rows.gpus_held(s, name)
            indices = [i for i in node.gpu_indices if i not in held][:assignment.gpus]
            if len(indices) < assignment.gpus:  # a GPU is still held by a run that is exiting
                log.warning("job %s: not enough free GPUs on %s yet", job_id, name)
                self.wake("retry")
                return
            places.append((node, indices))
        node, indices = places[0]
        more_nodes = tuple((n.name, tuple(i)) for n, i in places[1:])  # a gang's, rank 1 on
        with self.store.session() as s:
            owner, workdir = run_rows.owner_and_workdir(s, job_id)
        job_dir = self.config.job_dir(job_id)
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
                         epochs_at_start=job.epochs_done,
                         more_nodes=[{"node": n, "gpu_indices": list(i)}
                                     for n, i in more_nodes] or None)
            s.add(run)
            s.flush()
            run_id = run.id
            was = (job.state, job.first_started_at)  # restored if the node is lost
            job.state = JobState.RUNNING
            if job.first_started_at is None:
                job.first_started_at = now
            request = self._launch_request(job, run_id, node, indices, token, account,
                                           more_nodes)
        self._launch(request, was, node, account)

    def _launch_request(self, job: JobRow, run_id: int, node: NodeInfo, indices: list[int],
                        token: str, account: str | None,
                        more_nodes: tuple[tuple[str, tuple[int, ...]], ...] = ()
                        ) -> LaunchRequest:
        job_dir = self.config.job_dir(job.id)
        return LaunchRequest(more_nodes=more_nodes,
            run_id=run_id, job_id=job.id, node=node.name, gpu_indices=tuple(indices),
            command=tuple(job.command), workdir=job.workdir,
            env={"ANDREAS_JOB_ID": job.id, "ANDREAS_RUN_ID": str(run_id),
                 "ANDREAS_CHECKPOINT_DIR": str(job_dir / "checkpoint"),
                 "ANDREAS_PROGRESS_URL": f"{self.progress_base}/jobs/{job.id}/progress",
                 "ANDREAS_PROGRESS_TOKEN": token, "ANDREAS_EPOCHS": f"{job.epochs:g}",
                 "ANDREAS_GPU_INDICES": ",".join(map(str, indices)),
                 "ANDREAS_NODE": node.name, "ANDREAS_GPU_TYPE": node.gpu_type},
            run_dir=self.config.run_dir(job.id, run_id),
            log_path=job_dir / "logs" / f"run-{run_id}.log", lock_path=job_dir / "lock",
            user=account)

    def _launch(self, request: LaunchRequest, was: tuple, node: NodeInfo,
                account: str | None) -> None:
        run_id, job_id, indices = request.run_id, request.job_id, list(request.gpu_indices)
        # every rank's GPUs (a gang's "nodes" on the local executor are this machine's)
        nvml = self.meter.read_mj(sorted({i for _, gpus in request.places for i in gpus})) \
            if self.meter else None
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
        event("start", job_id, run=run_id, node=",".join(n for n, _ in request.places),
              gpus=len(indices), gpu_type=node.gpu_type, user=account)

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
