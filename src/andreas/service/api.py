"""The REST API: FastAPI routes over the store and the scheduler. No scheduling logic here.

Every endpoint but `/healthz` needs `Authorization: Bearer <token>`. Users see and cancel
their own jobs; admins see all. A running job reports progress with the token it was started
with (`ANDREAS_PROGRESS_TOKEN`), which is good for that job only.
"""

from __future__ import annotations

import logging
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated

from fastapi import Body, Depends, FastAPI, Header, HTTPException, Query, Request, Response
from fastapi import Path as FastAPIPath
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError, InterfaceError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from ..errors import AndreasError
from ..executors import NodeInfo, make_executor
from . import uploads
from .config import ServiceConfig
from .db import JobRow, RunRow, Token, User
from .jobs import (
    Refused,
    accept,
    gpu_holders,
    job_out,
    logs_tail,
    owned_job_ids,
    request_cancel,
    run_out,
    submitted_with,
    validate_submission,
    visible_job,
    visible_jobs,
)
from .limits import BodyLimit, SecurityHeaders
from .metrics import metrics_text
from .ratelimit import FailureLimiter
from .scheduler import Scheduler
from .schemas import (
    ERROR_RESPONSES,
    MAX_BATCH,
    JobOut,
    JobSubmit,
    NodeOut,
    ProgressIn,
    RunOut,
    TokenCreate,
    TokenCreated,
    TokenOut,
    UploadOut,
)
from .states import LIVE_RUN_STATES
from .store import Store, hash_token, must_get

log = logging.getLogger("andreas.service")

# /healthz says "degraded" below this much room for the database, logs and checkpoints
LOW_DISK_BYTES = 16 * 1024 * 1024


def storage_trouble(error: str) -> str | None:
    """What a database error says about the disk under it (SQLite's and PostgreSQL's words):
    "the disk is full", "its files are read-only", or None for anything else."""
    text = error.lower()
    if "disk is full" in text or "no space left" in text or "could not extend file" in text:
        return "the disk is full"
    if "readonly database" in text or "read-only file system" in text:
        return "its files are read-only"
    return None


def disk_free(folder: Path) -> int | None:
    """Free bytes on the file system of `folder` (or its nearest existing parent)."""
    import shutil

    for candidate in (folder, *folder.parents):
        if candidate.exists():
            try:
                return shutil.disk_usage(candidate).free
            except OSError:
                return None
    return None
MAX_ID = 2**31 - 1  # integer ids fit both engines' INTEGER (a larger one was a 500 on SQLite)
bearer = HTTPBearer(auto_error=False, description="an API token (`andreas tokens create`; the "
                                                   "first admin's: ANDREAS_ADMIN_TOKEN)")


def _nodes(config: ServiceConfig) -> list[NodeInfo]:
    return [NodeInfo(n.name, n.gpu_type, n.gpus,
                     config.gpu_indices.get(n.name, tuple(range(n.gpus))))
            for n in config.cluster.nodes]


def create_app(config: ServiceConfig, *, store: Store | None = None, executor=None,
               admin_token: str | None = None, run_scheduler: bool = True) -> FastAPI:
    """Build the application. The scheduler thread starts and stops with the app."""
    store = store or Store(config.database_url)
    if admin_token:
        store.ensure_token("admin", "admin", admin_token)
    if executor is None:
        options: dict = {"address": config.ray_address} if config.executor == "ray" else {}
        if config.executor == "slurm":
            options["partition"] = config.slurm_partition
        executor = make_executor(config.executor, _nodes(config),
                                 hidden_values=(admin_token,) if admin_token else (), **options)
        unknown = sorted({n.gpu_type for n in executor.nodes()} - set(config.cluster.gpu_types))
        if unknown:  # Ray or Slurm named a GPU type the cluster file has no power table for
            executor.close()
            raise AndreasError(f"{config.path}: the {config.executor} cluster has GPU types "
                               f"{', '.join(unknown)}, which the cluster file does not "
                               f"describe; expected them under gpu_types (known: "
                               f"{', '.join(sorted(config.cluster.gpu_types))})")
    scheduler = Scheduler(config, store, executor)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if run_scheduler:
            scheduler.start()
        yield
        scheduler.shutdown(stop_jobs=False)
        executor.close()

    app = FastAPI(title="ANDREAS", version=_version(), lifespan=lifespan,
                  responses=ERROR_RESPONSES, docs_url=None, redoc_url=None,
                  description="Energy- and deadline-aware scheduling of deep-learning jobs. "
                              "Submit jobs, watch the plan and the costs.")
    app.state.scheduler, app.state.store, app.state.config = scheduler, store, config
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes,
                       overrides={"/uploads": config.max_upload_bytes})
    app.add_middleware(SecurityHeaders)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        """FastAPI's answer, except that a 405's Allow lists every method of the path: the
        router names only the first route it matched (GET /tokens and POST /tokens are two)."""
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            routes = [r for r in app.router.routes if isinstance(r, APIRoute)
                      and r.matches(request.scope)[0] != Match.NONE]
            exact = [r for r in routes if r.path == request.url.path]  # /jobs/batch over
            methods = {m for r in exact or routes for m in r.methods or ()}  # /jobs/{job_id}
            headers["Allow"] = ", ".join(sorted(methods))
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=headers)

    @app.exception_handler(OperationalError)
    @app.exception_handler(InterfaceError)
    async def _database_down(request: Request, exc: Exception):
        """The database is unreachable (PostgreSQL restarting, a network cut): a 503 with a
        sentence and Retry-After, not a 500 traceback. Running jobs go on meanwhile, and the
        scheduler retries its decisions until the database is back."""
        first = str(getattr(exc, "orig", exc)).strip().splitlines()[0][:200]
        cause = storage_trouble(first)
        if cause is not None:  # reachable, but it cannot write: say what the operator must do
            return JSONResponse({"detail": f"the service cannot write to its database: {cause} "
                                           f"({first}); nothing was stored; try again once "
                                           f"{config.data_dir} has room"},
                                status_code=503, headers={"Retry-After": "30"})
        return JSONResponse({"detail": f"the database is unreachable ({first}); try again "
                                       "shortly"}, status_code=503, headers={"Retry-After": "5"})

    @app.exception_handler(Refused)
    async def _refused(request: Request, exc: Refused):
        return JSONResponse(status_code=exc.status, content={"detail": exc.detail})

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        messages = []
        for e in exc.errors():
            if e.get("type") == "json_invalid":  # say it in words, not "50: JSON decode error"
                at = e["loc"][-1] if e.get("loc") else "?"
                messages.append(f"the request body is not valid JSON (at character {at}): "
                                f"{e.get('ctx', {}).get('error', 'cannot parse it')}")
                continue
            if tuple(e.get("loc", ())) == ("body",) and e.get("type") in (
                    "model_attributes_type", "dict_type", "list_type"):
                messages.append("the request body must be a JSON "
                                f"{'list' if e.get('type') == 'list_type' else 'object'}; "
                                "send it with Content-Type: application/json")
                continue
            where = ".".join(str(p) for p in e["loc"] if p != "body")
            messages.append(f"{where}: {e['msg']}" if where else e["msg"])
        return JSONResponse(status_code=422, content={"detail": "; ".join(messages)})

    # ------------------------------------------------------------------ auth
    limiter = FailureLimiter(config.auth_max_failures, config.auth_window_s)
    app.state.limiter = limiter  # the dashboard's sign-in counts failures with the API's

    def check_rate(request: Request) -> str:
        """The client's address, refused with 429 while it has failed too often."""
        address = request.client.host if request.client else "?"
        wait = limiter.retry_after(address)
        if wait > 0:
            raise HTTPException(429, f"too many failed logins from {address}; try again in "
                                     f"{wait:.0f} s", headers={"Retry-After": f"{wait:.0f}"})
        return address

    def current_user(request: Request,
                     credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> User:
        address = check_rate(request)
        if credentials is None:
            limiter.failed(address)
            raise HTTPException(401, "missing token: send 'Authorization: Bearer <token>'")
        user = store.user_for(credentials.credentials)
        if user is None:
            limiter.failed(address)
            raise HTTPException(401, "invalid or revoked token")
        return user

    def admin(user: User = Depends(current_user)) -> User:
        if user.role != "admin":
            raise HTTPException(403, "this needs an admin token")
        return user

    # ------------------------------------------------------------------ routes
    @app.get("/healthz", tags=["service"])
    def healthz():
        try:
            with store.session() as s:
                s.execute(select(1))
            database = "ok"
        except Exception as exc:  # reported, not raised: a 503 below
            database = f"error: {str(exc).strip().splitlines()[0][:200]}"
        alive = scheduler._thread is not None and scheduler._thread.is_alive()
        failing = scheduler.last_error is not None
        state = ("failing: " + scheduler.last_error) if failing else (
            "running" if alive else "stopped")
        free = disk_free(config.data_dir)
        low = free is not None and free < LOW_DISK_BYTES
        body = {"status": "ok" if database == "ok" and not failing and not low else "degraded",
                "database": database, "scheduler": state, "failed_ticks": scheduler.errors,
                "data_dir": {"path": str(config.data_dir), "free_bytes": free,
                             "low": low}}
        # a load balancer takes a service whose database is unreachable out of rotation
        return JSONResponse(body, status_code=200 if database == "ok" else 503)

    @app.get("/whoami", tags=["service"])
    def whoami(user: User = Depends(current_user)):
        return {"user": user.name, "role": user.role}

    @app.post("/tokens", tags=["tokens"], status_code=201, response_model=TokenCreated)
    def create_token(body: TokenCreate, _: User = Depends(admin)):
        """Create a token for a user (made if new); the answer holds the secret, once."""
        expires = None if body.expires_in_s is None else time.time() + body.expires_in_s
        try:
            token_id, token = store.create_token(body.user, body.role, expires)
        except AndreasError as exc:
            raise HTTPException(409, str(exc)) from None
        entry = next(e for e in store.tokens() if e[0].id == token_id)
        return TokenCreated(**_token_out(*entry).model_dump(), token=token)

    @app.get("/tokens", tags=["tokens"], response_model=list[TokenOut])
    def list_tokens(user: User = Depends(current_user)):
        """Every token (an admin) or your own (a user), without the secrets."""
        return [_token_out(t, u) for t, u in
                store.tokens(None if user.role == "admin" else user.id)]

    @app.post("/tokens/{token_id}/revoke", tags=["tokens"], response_model=TokenOut)
    def revoke_token(token_id: Annotated[int, FastAPIPath(ge=1, le=MAX_ID)],
                     user: User = Depends(current_user)):
        """Revoke a token (an admin: any; a user: their own); refused from the next request."""
        revoked = store.revoke_token(token_id, None if user.role == "admin" else user.id)
        if revoked is None:
            raise HTTPException(404, f"no token {token_id} of yours")
        return _token_out(*revoked)

    @app.post("/uploads", tags=["jobs"], status_code=201, response_model=UploadOut,
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/octet-stream": {"schema": {"type": "string",
                                                          "format": "binary"}}}}})
    async def upload(request: Request, user: User = Depends(current_user)):
        """Send a working folder as a gzipped tar (at most max_upload_bytes); a job names
        the answer's id as `working_dir` and runs in its own copy of the folder."""
        chunks = [chunk async for chunk in request.stream()]
        return uploads.save(config.data_dir, user.id, chunks, config.max_upload_bytes)

    @app.post("/jobs", tags=["jobs"], status_code=201, response_model=JobOut,
              responses={200: {"model": JobOut, "description": "a retried submission (the "
                                                              "same Idempotency-Key): the job "
                                                              "made the first time"}})
    def submit(body: JobSubmit, response: Response, user: User = Depends(current_user),
               idempotency_key: str | None = Header(
                   None, max_length=200, pattern=r"^[\x21-\x7e]+$",
                   description="any token of yours (printable ASCII): a retry with the same "
                               "key returns the job already made instead of a second one")):
        row = validate_submission(config, body, time.time(), user.id)
        try:
            shown, new = accept(store, scheduler, [row], user, idempotency_key)
        except IntegrityError:  # a concurrent retry with the same key won the race
            if idempotency_key is None:
                raise
            with store.session() as s:
                earlier = submitted_with(s, scheduler, user, idempotency_key)
            if earlier is None:
                raise
            shown, new = [earlier], False
        if not new:
            response.status_code = 200
        return shown[0]

    @app.post("/jobs/batch", tags=["jobs"], status_code=201, response_model=list[JobOut])
    def submit_batch(body: Annotated[list[JobSubmit], Body(max_length=MAX_BATCH)],
                     user: User = Depends(current_user)):
        """Submit several jobs at once: all or none are accepted, and they are planned
        together (a workload known in advance)."""
        now = time.time()
        rows = []
        for i, item in enumerate(body):
            try:
                rows.append(validate_submission(config, item, now, user.id))
            except Refused as exc:
                raise Refused(exc.status, f"job [{i}]: {exc.detail}") from None
        return accept(store, scheduler, rows, user)[0]

    @app.get("/jobs", tags=["jobs"], response_model=list[JobOut])
    def list_jobs(state: str | None = Query(None, pattern="^(queued|running|paused|completed|"
                                                          "failed|cancelled|timeout)$",
                                            description="queued, running, paused, completed, "
                                                        "failed, cancelled, timeout"),
                  user: User = Depends(current_user)):
        return visible_jobs(store, scheduler, user, state)

    @app.get("/jobs/{job_id}", tags=["jobs"], response_model=JobOut)
    def show_job(job_id: str, user: User = Depends(current_user)):
        measured = scheduler.measured()["jobs"]
        with store.session() as s:
            return job_out(s, visible_job(s, job_id, user), scheduler, measured.get(job_id))

    @app.post("/jobs/{job_id}/cancel", tags=["jobs"], status_code=202, response_model=JobOut)
    def cancel_job(job_id: str, user: User = Depends(current_user)):
        request_cancel(store, scheduler, job_id, user)
        with store.session() as s:
            return job_out(s, must_get(s, JobRow, job_id), scheduler, None)

    @app.get("/jobs/{job_id}/runs", tags=["jobs"], response_model=list[RunOut])
    def job_runs(job_id: str, user: User = Depends(current_user)):
        with store.session() as s:
            visible_job(s, job_id, user)
            return [run_out(r) for r in s.scalars(select(RunRow).where(RunRow.job_id == job_id)
                                                   .order_by(RunRow.id))]

    @app.get("/jobs/{job_id}/logs", tags=["jobs"], response_class=PlainTextResponse)
    def job_logs(job_id: str, tail_bytes: int = Query(65536, ge=1, le=50_000_000),
                 user: User = Depends(current_user)):
        with store.session() as s:
            visible_job(s, job_id, user)
            run_ids = s.scalars(select(RunRow.id).where(RunRow.job_id == job_id)
                                .order_by(RunRow.id)).all()
        return logs_tail(scheduler, list(run_ids), job_id, tail_bytes)

    @app.post("/jobs/{job_id}/progress", tags=["jobs"])
    def progress(job_id: str, body: ProgressIn, request: Request,
                 credentials: HTTPAuthorizationCredentials | None = Depends(bearer)):
        address = check_rate(request)
        if credentials is None:
            limiter.failed(address)
            raise HTTPException(401, "missing token: send 'Authorization: Bearer <token>'")
        digest = hash_token(credentials.credentials)
        with store.session() as s:
            job = s.get(JobRow, job_id)
            refused = HTTPException(403, f"this token may not report progress for job {job_id!r}")
            if job is None:  # the same answer as for a job that exists: ids do not leak
                user = store.user_for(credentials.credentials)
                if user is None or user.role != "admin":
                    limiter.failed(address)
                    raise refused
                raise HTTPException(404, f"no job {job_id!r}")
            run = s.scalar(select(RunRow).where(RunRow.job_id == job_id,
                                                RunRow.state.in_(LIVE_RUN_STATES))
                           .order_by(RunRow.id.desc()))
            if run is None or run.token_hash != digest:
                user = store.user_for(credentials.credentials)
                if user is None or (user.role != "admin" and user.id != job.owner_id):
                    limiter.failed(address)
                    raise refused
                if run is None:
                    raise HTTPException(409, f"job {job_id!r} is not running")
            if body.epochs_done > job.epochs + 1e-9:
                raise HTTPException(422, f"epochs_done {body.epochs_done} exceeds the job's "
                                         f"{job.epochs:g} epochs")
            moved = scheduler.record_progress(s, job, run, body.epochs_done)
            done = job.epochs_done
        if moved:
            scheduler.wake("prediction-moved")
        return {"job": job_id, "epochs_done": done}

    @app.get("/nodes", tags=["cluster"], response_model=list[NodeOut])
    def nodes(user: User = Depends(current_user)):
        """GPUs and who holds them; a user sees other users' jobs only as "busy"."""
        with store.session() as s:
            busy = gpu_holders(s, owned_job_ids(s, user))
        drained = store.drained_nodes()
        return [NodeOut(name=n.name, gpu_type=n.gpu_type, gpus=n.gpus,
                        gpu_indices=list(n.gpu_indices), busy=busy.get(n.name, {}),
                        drained=n.name in drained)
                for n in scheduler.nodes()]

    def set_drained(name: str, drained: bool, user: User) -> NodeOut:
        if name not in {n.name for n in scheduler.nodes()}:
            raise HTTPException(404, f"no node {name!r}")
        store.set_drained(name, drained, user.name)
        scheduler.wake("drain" if drained else "undrain")
        return next(n for n in nodes(user) if n.name == name)

    @app.post("/nodes/{name}/drain", tags=["cluster"], response_model=NodeOut)
    def drain(name: str, user: User = Depends(admin)):
        """Let the node's jobs finish (or move, if the plan moves them) and start nothing new
        there, until undrained (kept across restarts)."""
        return set_drained(name, True, user)

    @app.post("/nodes/{name}/undrain", tags=["cluster"], response_model=NodeOut)
    def undrain(name: str, user: User = Depends(admin)):
        return set_drained(name, False, user)

    @app.get("/plan", tags=["cluster"])
    def plan(user: User = Depends(current_user)):
        info = scheduler.plan
        with store.session() as s:
            owned = owned_job_ids(s, user)
        keep = (lambda j: True) if owned is None else (lambda j: j in owned)
        forecast = {j: f for j, f in info.forecast.items() if keep(j)}
        return {"time": info.time, "policy": config.policy, "decisions": info.decisions,
                "source": info.source, "revisit_at": info.revisit_at,
                "reasons": info.reasons, "decision_seconds": info.decision_s,
                "assignments": {j: a for j, a in info.assignments.items() if keep(j)},
                "waiting": {j: w for j, w in info.waiting.items() if keep(j)},
                "forecast": forecast,
                "forecast_cut": scheduler.forecast_cut,  # why no fresh forecast, if none
                "predicted_total_cost": sum(f["total_cost"] for f in forecast.values())}

    @app.get("/metrics", tags=["service"], response_class=PlainTextResponse)
    def metrics(_: User = Depends(current_user)):
        return metrics_text(store, scheduler)

    from ..ui import install as install_dashboard

    install_dashboard(app)
    _install_docs(app)
    return app


def _install_docs(app: FastAPI) -> None:
    """Swagger UI at /docs from files a dependency installs (swagger-ui-py's copy of Swagger
    UI 5, which reads OpenAPI 3.1), not from a CDN: the docs work without internet access."""
    import swagger_ui
    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.staticfiles import StaticFiles

    files = Path(swagger_ui.__file__).parent / "static"
    app.mount("/docs/static", StaticFiles(directory=str(files)), name="docs-static")

    @app.get("/docs", include_in_schema=False)
    def docs():
        return get_swagger_ui_html(openapi_url="/openapi.json", title="ANDREAS API",
                                   swagger_js_url="/docs/static/swagger-ui-bundle.js",
                                   swagger_css_url="/docs/static/swagger-ui.css",
                                   swagger_favicon_url="data:,")


def _token_out(token: Token, user: User) -> TokenOut:
    return TokenOut(id=token.id, user=user.name, role=user.role, created_at=token.created_at,
                    expires_at=token.expires_at, revoked=token.revoked,
                    valid=token.valid(time.time()))


def _version() -> str:
    from .. import __version__

    return __version__


