"""Queries about runs: which are live, what their jobs reported, which GPUs they hold."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..db import JobRow, ProgressRow, RunRow, User, run_places
from ..states import LIVE_RUN_STATES, WAITING_STATES


def live_runs(s: Session) -> list[RunRow]:
    """The runs started and not yet seen to end."""
    return list(s.scalars(select(RunRow).where(RunRow.state.in_(LIVE_RUN_STATES))))


def live_runs_with_jobs(s: Session, *, runtime_limited: bool = False
                        ) -> list[tuple[RunRow, JobRow]]:
    """The live runs with their jobs; only the jobs with a `max_runtime_s` if
    `runtime_limited`."""
    query = (select(RunRow, JobRow).join(JobRow, RunRow.job_id == JobRow.id)
             .where(RunRow.state.in_(LIVE_RUN_STATES)))
    if runtime_limited:
        query = query.where(JobRow.max_runtime_s.is_not(None))
    return [(run, job) for run, job in s.execute(query).all()]


def runs_of(s: Session, job_id: str) -> list[RunRow]:
    """Every run of a job, oldest first."""
    return list(s.scalars(select(RunRow).where(RunRow.job_id == job_id).order_by(RunRow.id)))


def crashes_before(s: Session, job_id: str, run_id: int) -> int:
    """How many of the job's other runs crashed."""
    return s.scalar(select(func.count()).select_from(RunRow).where(
        RunRow.job_id == job_id, RunRow.id != run_id, RunRow.stop_reason == "crashed")) or 0


def progress_reports(s: Session, job_id: str) -> list[ProgressRow]:
    """The job's progress reports in the order they came."""
    return list(s.scalars(select(ProgressRow).where(ProgressRow.job_id == job_id)
                          .order_by(ProgressRow.id)))


def cancelled_waiting(s: Session) -> list[JobRow]:
    """Waiting jobs whose owner asked to cancel them."""
    return list(s.scalars(select(JobRow).where(JobRow.cancel_requested.is_(True),
                                               JobRow.state.in_(WAITING_STATES))))


def gpus_held(s: Session, node: str) -> set[int]:
    """The GPU indices that live runs hold on `node` (a gang's on each of its nodes)."""
    held: set[int] = set()
    for run in live_runs(s):
        for name, indices in run_places(run):
            if name == node:
                held.update(indices)
    return held


def live_gpu_indices(s: Session) -> dict[str, list[int]]:
    """Job id -> the GPU indices its live run holds (rank 0's node's, for a gang)."""
    return dict(s.execute(select(RunRow.job_id, RunRow.gpu_indices)
                          .where(RunRow.state.in_(LIVE_RUN_STATES))).all())


def owner_and_workdir(s: Session, job_id: str) -> tuple[str, str | None]:
    """The name of the job's owner and its working folder ("" and None if no such job)."""
    row = s.execute(select(User.name, JobRow.workdir).join(
        JobRow, JobRow.owner_id == User.id).where(JobRow.id == job_id)).first()
    return ("", None) if row is None else (row[0] or "", row[1])


def live_run_of(s: Session, job_id: str) -> RunRow | None:
    """The job's newest live run, if any."""
    return s.scalar(select(RunRow).where(RunRow.job_id == job_id,
                                         RunRow.state.in_(LIVE_RUN_STATES))
                    .order_by(RunRow.id.desc()))


def run_ids_of(s: Session, job_id: str) -> list[int]:
    return list(s.scalars(select(RunRow.id).where(RunRow.job_id == job_id)
                          .order_by(RunRow.id)))
