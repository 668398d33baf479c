"""What a snapshot reads from the database, and the forecasts written back to the jobs."""

from __future__ import annotations

from typing import Any, Sequence

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from ..db import DrainedNode, JobRow, User
from ..states import ACTIVE_STATES
from .core import in_batches

# the columns a snapshot needs of each active job: plain rows, read and let go of (loading
# ORM objects of a long queue held the database from the API's requests for a long while)
SNAPSHOT_COLUMNS = (JobRow.id, JobRow.submitted_at, JobRow.due_date, JobRow.weight, JobRow.epochs,
                    JobRow.epochs_done, JobRow.profile_name, JobRow.inline_profile,
                    JobRow.speed_factor, JobRow.preemptible, JobRow.start_asap,
                    JobRow.first_started_at, JobRow.startup_s, JobRow.speed_spread,
                    JobRow.speed_pairs)


def active_jobs(s: Session) -> Sequence[Any]:
    """The active jobs not being cancelled, as rows of SNAPSHOT_COLUMNS, oldest first."""
    return s.execute(select(*SNAPSHOT_COLUMNS).where(
        JobRow.state.in_(ACTIVE_STATES), JobRow.cancel_requested.is_(False))
        .order_by(JobRow.submitted_at, JobRow.id)).all()


def active_owners(s: Session) -> dict[str, str]:
    """Job id -> its owner's name, of the active jobs."""
    return dict(s.execute(select(JobRow.id, User.name).join(
        User, JobRow.owner_id == User.id).where(JobRow.state.in_(ACTIVE_STATES))).all())


def drained_names(s: Session) -> set[str]:
    return set(s.scalars(select(DrainedNode.name)))


def record_forecasts(s: Session, previous: dict[str, dict], current: dict[str, dict]) -> None:
    """Store in the jobs' rows their first forecast (`predicted`, and `forecast` until they
    leave the plan), and their last once they leave it (ended or cancelled). `previous` and
    `current` are the last decision's and this one's forecasts by job id.

    The API shows the planned jobs' latest from memory (the plan board); a restart's first
    decision makes them again. Writing every queued job's moved forecast at every decision
    held the database and the service's interpreter from the API's requests (all of them
    move when the queue is long)."""
    left = [{"id": job_id, "forecast": entry} for job_id, entry in previous.items()
            if job_id not in current]
    # not in the last plan: new jobs, or every job after a restart
    unseen = [job_id for job_id in current if job_id not in previous]
    new = [job_id for batch in in_batches(unseen)
           for job_id in s.scalars(select(JobRow.id).where(
               JobRow.id.in_(batch), JobRow.predicted.is_(None)))]
    first = [{"id": job_id, "predicted": current[job_id], "forecast": current[job_id]}
             for job_id in new]
    for rows in (first, left):  # one statement for each set of columns
        if rows:
            s.execute(update(JobRow), rows)
