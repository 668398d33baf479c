"""The service's own state: `/healthz` (no token: for load balancers), `/whoami`, `/metrics`."""

from __future__ import annotations

import os
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse

from ..database_errors import first_line
from ..folders import read_only, sqlite_folder
from ..metrics import metrics_text
from ..store.jobs import ping
from .deps import CurrentUser, ServicesDep

router = APIRouter(tags=["service"])

# /healthz says "degraded" below this much room for the database, logs and checkpoints ...
LOW_DISK_BYTES = 16 * 1024 * 1024
LOW_INODES = 1000  # ... or below this many free inodes (each log, checkpoint, upload takes one)


def disk_free(folder: Path) -> int | None:
    """Free bytes on the file system of `folder` (or its nearest existing parent)."""
    found = _statvfs(folder)
    return None if found is None else found.f_bavail * found.f_frsize


def inodes_free(folder: Path) -> int | None:
    """Free inodes for this user on the file system of `folder`; None where the file system
    does not count them (it reports 0 files in all)."""
    found = _statvfs(folder)
    return None if found is None or found.f_files == 0 else found.f_favail


def _statvfs(folder: Path):
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            try:
                return os.statvfs(candidate)
            except OSError:
                return None
    return None


@router.get("/healthz")
def healthz(svc: ServicesDep):
    try:
        with svc.store.session() as s:
            ping(s)
        database = "ok"
    except Exception as exc:  # reported, not raised: a 503 below
        database = f"error: {first_line(exc)}"
    last_error = svc.board.last_error
    failing = last_error is not None
    state = ("failing: " + str(last_error)) if failing else (
        "running" if svc.scheduler_alive() else "stopped")
    free, inodes = disk_free(svc.config.data_dir), inodes_free(svc.config.data_dir)
    low = (free is not None and free < LOW_DISK_BYTES) or (
        inodes is not None and inodes < LOW_INODES)
    frozen = read_only(svc.config.data_dir)
    folder = sqlite_folder(svc.config.database_url)
    if database == "ok" and folder is not None and (
            frozen if folder == svc.config.data_dir else read_only(folder)):  # probed once
        database = f"read-only: the file system of {folder} is mounted read-only"
    reachable = database == "ok" or database.startswith("read-only")
    body = {"status": "ok" if database == "ok" and not (failing or low or frozen)
            else "degraded",
            "database": database, "scheduler": state, "failed_ticks": svc.board.failed_ticks,
            "data_dir": {"path": str(svc.config.data_dir), "free_bytes": free,
                         "free_inodes": inodes, "low": low,
                         "read_only": frozen}}
    # a load balancer takes a service whose database is unreachable out of rotation; one
    # that cannot write still answers reads (the jobs, their logs, the plan)
    return JSONResponse(body, status_code=200 if reachable else 503)


@router.get("/whoami")
def whoami(user: CurrentUser):
    return {"user": user.name, "role": user.role}


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(_: CurrentUser, svc: ServicesDep):
    return metrics_text(svc)
