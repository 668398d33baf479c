"""The REST API assembled: the app, its lifespan (the scheduler thread), middleware, error
answers, the routes of `service/routes/` and the dashboard. No scheduling logic here.

Every endpoint but `/healthz` needs `Authorization: Bearer <token>`. Users see and cancel
their own jobs; admins see all. A running job reports progress with the token it was started
with (`ANDREAS_PROGRESS_TOKEN`), which is good for that job only.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from ..errors import AndreasError
from ..executors import NodeInfo, make_executor
from .config import ServiceConfig
from .database_errors import first_line, storage_trouble
from .folders import ensure_writable, sqlite_folder
from .job_accounts import JobAccounts
from .limits import BodyLimit, SecurityHeaders
from .ratelimit import FailureLimiter
from .refused import Refused
from .routes import ROUTERS
from .scheduler import Scheduler
from .schemas import ERROR_RESPONSES
from .services import Services
from .store import Store


def _nodes(config: ServiceConfig) -> list[NodeInfo]:
    return [NodeInfo(n.name, n.gpu_type, n.gpus,
                     config.gpu_indices.get(n.name, tuple(range(n.gpus))))
            for n in config.cluster.nodes]


class ProgressPostFilter(logging.Filter):
    """Leave out of uvicorn's access log the progress posts that were accepted: every job
    posts one per epoch, and they were 99 % of the service's log, burying what an operator
    looks for. A refused one (a bad token, a 4xx) is still logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5:  # client, method, path, version, status
            _, method, path, _, status = args
            if (method == "POST" and str(path).endswith("/progress")
                    and isinstance(status, int) and status < 400):
                return False
        return True


QUIET_PROGRESS = ProgressPostFilter()


def _sqlite_file(url: str) -> Path | None:
    folder = sqlite_folder(url)
    return None if folder is None else folder / Path(url.split(":///", 1)[1]).name


def create_app(config: ServiceConfig, *, store: Store | None = None, executor=None,
               admin_token: str | None = None, run_scheduler: bool = True,
               stop_jobs_on_exit: bool = False) -> FastAPI:
    """Build the application. The scheduler thread starts and stops with the app; running
    jobs outlive it (re-adopted at the next start) unless `stop_jobs_on_exit`."""
    ensure_writable(config.data_dir, "the data folder: job logs, checkpoints, uploads",
                    f"make it writable or set data_dir in {config.path}")
    store = store or Store(config.database_url)
    accounts = JobAccounts(config)  # jobs reach none of the service's files, or stop it here
    accounts.secure_data_folder(_sqlite_file(config.database_url))
    accounts.check_reach()
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
        if not config.log_progress_posts:  # uvicorn has set its loggers up by now
            logging.getLogger("uvicorn.access").addFilter(QUIET_PROGRESS)
        if run_scheduler:
            scheduler.start()
        yield
        scheduler.shutdown(stop_jobs=stop_jobs_on_exit)
        executor.close()

    app = FastAPI(title="ANDREAS", version=_version(), lifespan=lifespan,
                  responses=ERROR_RESPONSES, docs_url=None, redoc_url=None,
                  description="Energy- and deadline-aware scheduling of deep-learning jobs. "
                              "Submit jobs, watch the plan and the costs.")
    app.state.scheduler, app.state.store, app.state.config = scheduler, store, config
    app.state.services = Services.around(store, config, scheduler)  # what routes and pages use
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

    @app.exception_handler(DBAPIError)
    async def _database_trouble(request: Request, exc: DBAPIError):
        """The database is unreachable (PostgreSQL restarting, a network cut) or cannot write
        (its disk full or read-only): a 503 with a sentence and Retry-After, not a 500
        traceback. Running jobs go on meanwhile, and the scheduler retries its decisions until
        the database is back. Any other database error stays a 500, logged."""
        first = first_line(exc)
        folder = sqlite_folder(config.database_url)
        cause = storage_trouble(first, folder)
        if cause is not None:  # reachable, but it cannot write: say what the operator must do
            # (PostgreSQL says a read-only file system under its WAL with a privilege error)
            once = "has room" if cause == "the disk is full" else "is writable again"
            where = folder or ("its data folder" if config.database_url.startswith("sqlite")
                               else "the database server's disk")
            return JSONResponse({"detail": f"the service cannot write to its database: {cause} "
                                           f"({first}); nothing was stored; try again once "
                                           f"{where} {once}"},
                                status_code=503, headers={"Retry-After": "30"})
        if not isinstance(exc, (OperationalError, InterfaceError)):
            raise exc
        return JSONResponse({"detail": f"the database is unreachable ({first}); try again "
                                       "shortly"}, status_code=503, headers={"Retry-After": "5"})

    @app.exception_handler(Refused)
    async def _refused(request: Request, exc: Refused):
        return JSONResponse(status_code=exc.status, content={"detail": exc.detail},
                            headers=None if exc.retry_after is None
                            else {"Retry-After": str(exc.retry_after)})

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

    app.state.limiter = FailureLimiter(config.auth_max_failures, config.auth_window_s)
    for router in ROUTERS:
        app.include_router(router)

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


def _version() -> str:
    from .. import __version__

    return __version__


