"""Queries about jobs as the API and the dashboard show them: who may see which, a user's
queue, a submission's idempotency key, the costs' raw rows."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..db import JobRow, RunRow, User
from ..states import WAITING_STATES
from .core import in_batches


def owned_job_ids(s: Session, user: User) -> set[str] | None:
    """The ids of `user`'s jobs; None for an admin, who sees every job."""
    if user.role == "admin":
        return None
    return set(s.scalars(select(JobRow.id).where(JobRow.owner_id == user.id)))


def jobs_for(s: Session, user: User, state: str | None = None, owner: str | None = None,
             newest_first: bool = False) -> list[JobRow]:
    """The jobs `user` may see, oldest first (or newest): filtered by state, and for an admin
    by the owner's name."""
    order = JobRow.submitted_at.desc() if newest_first else JobRow.submitted_at
    query = select(JobRow).order_by(order, JobRow.id)
    if user.role != "admin":
        query = query.where(JobRow.owner_id == user.id)
    elif owner:
        query = query.join(User, JobRow.owner_id == User.id).where(User.name == owner)
    if state:
        query = query.where(JobRow.state == state)
    return list(s.scalars(query))


def all_jobs(s: Session) -> list[JobRow]:
    return list(s.scalars(select(JobRow)))


def runs_by_job(s: Session, job_ids: list[str]) -> dict[str, list[RunRow]]:
    """Each job's runs, oldest first, in one query per IN_BATCH jobs (not one per job: on a
    long queue those held the database from every other request)."""
    runs: dict[str, list[RunRow]] = {job_id: [] for job_id in job_ids}
    for batch in in_batches(job_ids):
        for run in s.scalars(select(RunRow).where(RunRow.job_id.in_(batch))
                             .order_by(RunRow.id)):
            runs[run.job_id].append(run)
    return runs


def runs_since(s: Session, since: float) -> list[RunRow]:
    """The runs live now or ended after `since`, oldest first."""
    return list(s.scalars(select(RunRow).where(
        (RunRow.ended_at.is_(None)) | (RunRow.ended_at > since)).order_by(RunRow.id)))


def user_names(s: Session) -> list[str]:
    return list(s.scalars(select(User.name).order_by(User.name)))


def user_names_by_id(s: Session) -> dict[int, str]:
    return dict(s.execute(select(User.id, User.name)).all())


def with_idempotency_key(s: Session, user: User, key: str) -> JobRow | None:
    """The job `user` submitted with Idempotency-Key `key`, if any."""
    return s.scalar(select(JobRow).where(JobRow.owner_id == user.id,
                                         JobRow.idempotency_key == key))


def waiting_count(s: Session, user: User) -> int:
    """How many of `user`'s jobs wait (queued or paused)."""
    return s.scalar(select(func.count()).select_from(JobRow).where(
        JobRow.owner_id == user.id, JobRow.state.in_(WAITING_STATES))) or 0


def jobs_by_state(s: Session) -> dict[str, int]:
    return dict(s.execute(select(JobRow.state, func.count()).group_by(JobRow.state)).all())


def cost_rows(s: Session) -> tuple[Sequence[Any], Sequence[Any]]:
    """Plain rows (loading ORM objects took 10x longer) of every job's and every run's columns
    that the costs so far are computed from."""
    jobs = s.execute(select(JobRow.id, JobRow.submitted_at, JobRow.due_date, JobRow.weight,
                            JobRow.epochs, JobRow.state, JobRow.completed_at,
                            JobRow.profile_name, JobRow.inline_profile)).all()
    runs = s.execute(select(RunRow.job_id, RunRow.node, RunRow.gpu_type, RunRow.gpu_indices,
                            RunRow.started_at, RunRow.ended_at, RunRow.epochs_at_start,
                            RunRow.epochs_at_end, RunRow.energy_j, RunRow.more_nodes)).all()
    return jobs, runs


def profile_rows(s: Session, job_ids: Iterable[str]) -> Sequence[Any]:
    """Plain rows of the given jobs' ids and profiles (named or inline)."""
    ids = sorted(set(job_ids))
    if not ids:
        return []
    return s.execute(select(JobRow.id, JobRow.profile_name, JobRow.inline_profile)
                     .where(JobRow.id.in_(ids))).all()


def ping(s: Session) -> None:
    """A round trip to the database (for /healthz)."""
    s.execute(select(1))
