"""Jobs: submit (one, or a batch planned together), list, show, cancel, their runs and logs,
working folders sent ahead (`/uploads`), and the progress a running job reports."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Body, Header, HTTPException, Query, Request, Response
from fastapi.responses import PlainTextResponse
from starlette.concurrency import run_in_threadpool

from .. import uploads
from ..db import JobRow
from ..jobs import (
    Refused,
    accept,
    job_out,
    logs_tail,
    request_cancel,
    run_out,
    validated,
    visible_job,
    visible_jobs,
)
from ..schemas import MAX_BATCH, JobOut, JobSubmit, ProgressIn, RunOut, UploadOut
from ..states import JobState
from ..store import hash_token, must_get
from ..store import runs as run_rows
from .deps import (
    Credentials,
    CurrentUser,
    ServicesDep,
    client_address,
    missing_token,
    refuse,
)

router = APIRouter(tags=["jobs"])
STATE_PATTERN = "^(" + "|".join(JobState) + ")$"


@router.post("/uploads", status_code=201, response_model=UploadOut,
             openapi_extra={"requestBody": {"required": True, "content": {
                 "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}})
async def upload(request: Request, user: CurrentUser, svc: ServicesDep):
    """Send a working folder as a gzipped tar (at most max_upload_bytes); a job names the
    answer's id as `working_dir` and runs in the folder, unpacked once for all the jobs that
    name it. Kept until `expires_at` (upload_ttl_s after it is sent), and while a job that
    waits or runs uses it."""
    chunks = [chunk async for chunk in request.stream()]
    config = svc.config

    def save() -> dict:
        in_use = {u for u in (uploads.upload_of(w, config.data_dir)
                              for w in svc.store.active_workdirs()) if u}
        return uploads.save(config.data_dir, user.id, chunks, config.max_upload_bytes,
                            config.upload_ttl_s, config.max_upload_bytes_per_user, in_use)
    # written, checked and unpacked in a worker thread: reading a large archive's members on
    # the event loop once held every other request for a minute and a half
    return await run_in_threadpool(save)


@router.post("/jobs", status_code=201, response_model=JobOut,
             responses={200: {"model": JobOut, "description": "a retried submission (the same "
                                                              "Idempotency-Key): the job made "
                                                              "the first time"}})
async def submit(body: JobSubmit, response: Response, user: CurrentUser, svc: ServicesDep,
                 idempotency_key: str | None = Header(
                     None, max_length=200, pattern=r"^[\x21-\x7e]+$",
                     description="any token of yours (printable ASCII): a retry with the "
                                 "same key returns the job already made instead of a second "
                                 "one")):
    row = await validated(svc.config, body, time.time(), user.id)
    shown, new = await accept(svc, [row], user, idempotency_key)
    if not new:
        response.status_code = 200
    return shown[0]


@router.post("/jobs/batch", status_code=201, response_model=list[JobOut])
async def submit_batch(body: Annotated[list[JobSubmit], Body(max_length=MAX_BATCH)],
                       user: CurrentUser, svc: ServicesDep):
    """Submit several jobs at once: all or none are accepted, and they are planned together
    (a workload known in advance)."""
    now = time.time()
    rows = []
    for i, item in enumerate(body):
        try:
            rows.append(await validated(svc.config, item, now, user.id))
        except Refused as exc:
            raise Refused(exc.status, f"job [{i}]: {exc.detail}") from None
    return (await accept(svc, rows, user))[0]


@router.get("/jobs", response_model=list[JobOut])
def list_jobs(user: CurrentUser, svc: ServicesDep,
              state: str | None = Query(None, pattern=STATE_PATTERN,
                                        description=", ".join(JobState))):
    return visible_jobs(svc, user, state)


@router.get("/jobs/{job_id}", response_model=JobOut)
def show_job(job_id: str, user: CurrentUser, svc: ServicesDep):
    measured = svc.accounting.measured()["jobs"]
    with svc.store.session() as s:
        return job_out(s, visible_job(s, job_id, user), svc, measured.get(job_id))


@router.post("/jobs/{job_id}/cancel", status_code=202, response_model=JobOut)
def cancel_job(job_id: str, user: CurrentUser, svc: ServicesDep):
    request_cancel(svc, job_id, user)
    with svc.store.session() as s:
        return job_out(s, must_get(s, JobRow, job_id), svc, None)


@router.get("/jobs/{job_id}/runs", response_model=list[RunOut])
def job_runs(job_id: str, user: CurrentUser, svc: ServicesDep):
    with svc.store.session() as s:
        visible_job(s, job_id, user)
        return [run_out(r) for r in run_rows.runs_of(s, job_id)]


@router.get("/jobs/{job_id}/logs", response_class=PlainTextResponse)
def job_logs(job_id: str, user: CurrentUser, svc: ServicesDep,
             tail_bytes: int = Query(65536, ge=1, le=50_000_000)):
    with svc.store.session() as s:
        visible_job(s, job_id, user)
        run_ids = run_rows.run_ids_of(s, job_id)
    return logs_tail(svc.config, run_ids, job_id, tail_bytes)


@router.post("/jobs/{job_id}/progress")
def progress(job_id: str, body: ProgressIn, request: Request, credentials: Credentials,
             svc: ServicesDep):
    """Epochs done, from the running job (with the token its run was started with), its
    owner or an admin. A bad token gets the same 403 whether the job exists or not."""
    address = client_address(request)
    if credentials is None:
        raise missing_token(request, address)
    digest = hash_token(credentials.credentials)
    refused = f"this token may not report progress for job {job_id!r}"
    with svc.store.session() as s:
        job = s.get(JobRow, job_id)
        if job is None:  # the same answer as for a job that exists: ids do not leak
            user = svc.store.user_for(credentials.credentials)
            if user is None or user.role != "admin":
                raise refuse(request, address, 403, refused, credentials.credentials)
            raise HTTPException(404, f"no job {job_id!r}")
        run = run_rows.live_run_of(s, job_id)
        if run is None or run.token_hash != digest:
            user = svc.store.user_for(credentials.credentials)
            if user is None or (user.role != "admin" and user.id != job.owner_id):
                raise refuse(request, address, 403, refused, credentials.credentials)
            if run is None:
                raise HTTPException(409, f"job {job_id!r} is not running")
        if body.epochs_done > job.epochs + 1e-9:
            raise HTTPException(422, f"epochs_done {body.epochs_done} exceeds the job's "
                                     f"{job.epochs:g} epochs")
        moved = svc.runs.record_progress(s, job, run, body.epochs_done)
        done = job.epochs_done
    if moved:
        svc.wake("prediction-moved")
    return {"job": job_id, "epochs_done": done}
