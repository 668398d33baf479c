"""A database error in one sentence, for people: what the API's 503 says, what /healthz and a
waiting job's reason say when a scheduler tick failed. The driver's full message (its SQL
statement and parameters, other jobs' ids among them) goes to the service log only: /healthz
answers without a token, and a job's reason is read by its owner."""

from __future__ import annotations

import re
from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError

from .folders import read_only

JOB_ID = re.compile(r"\bjob-[0-9a-f]{12}\b")
"""A job id as the service makes them (jobs.py): said to no one but its owner and admins."""


def first_line(exc: BaseException) -> str:
    """The first line of the driver's own message (SQLAlchemy wraps it in `orig` and appends
    the statement and its parameters), at most 200 characters."""
    text = str(getattr(exc, "orig", None) or exc).strip()
    return (text.splitlines() or [type(exc).__name__])[0][:200]


def storage_trouble(error: str, database_folder: Path | None = None) -> str | None:
    """What a database error says about the disk under it (SQLite's and PostgreSQL's words):
    "the disk is full", "its files are read-only", "its file system is read-only", or None
    for anything else. SQLite says only "disk I/O error" on a file system the kernel
    remounted read-only after a disk error: `database_folder` (SQLite's) is then looked at."""
    text = error.lower()
    if "disk is full" in text or "no space left" in text or "could not extend file" in text:
        return "the disk is full"
    if "readonly database" in text:
        return "its files are read-only"
    if "read-only file system" in text or (
            "disk i/o error" in text and database_folder is not None
            and read_only(database_folder)):
        return "its file system is read-only"
    return None


def describe_failure(exc: BaseException, database_folder: Path | None = None) -> str:
    """Why a scheduler tick failed, in one line without SQL: "the database cannot write: the
    disk is full (could not extend file ...)" for a refused write, "the database failed:
    <its first line>" for another database error, "<ExceptionType>: <first line>" else. Job
    ids in it read "job-…": every waiting job's owner reads it, and /healthz needs no token."""
    first = JOB_ID.sub("job-…", first_line(exc))
    if not isinstance(exc, SQLAlchemyError):
        return f"{type(exc).__name__}: {first}"
    cause = storage_trouble(first, database_folder)
    if cause is not None:
        return f"the database cannot write: {cause} ({first})"
    return f"the database failed: {first}"
