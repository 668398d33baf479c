"""The dashboard's pages under /ui: sign-in, jobs, a job, the plan, the cluster, submit.

Sign-in takes an API token and keeps it in an HttpOnly, SameSite=Strict cookie (Secure over
HTTPS), so a revoked or expired token ends the session at once. Every form that changes
something carries a CSRF token derived from the session's token; a form without it is refused
(403). Parts of a page that change (the jobs table, a job's state and log, the plan) reload
themselves from /ui/part/... every few seconds (static/ui.js).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates
from starlette.concurrency import run_in_threadpool

from ..clock import local_time, parse_duration
from ..service.db import User
from ..service.jobs import (
    Refused,
    accept,
    iso,
    job_out,
    logs_tail,
    request_cancel,
    run_out,
    validated,
    visible_job,
    visible_jobs,
)
from ..service.routes.deps import client_address, refuse
from ..service.schemas import JobSubmit
from ..service.states import FINAL_STATES
from ..service.store import runs as run_rows
from ..timing import on_time, shown_end
from .views import STATES, cluster_view, forecast_charts, plan_view, user_names

HERE = Path(__file__).parent
SESSION = "andreas_session"
LOGIN_NONCE = "andreas_login"
SESSION_S = 12 * 3600  # the cookie's life; the token's own expiry and revocation still apply

templates = Jinja2Templates(directory=str(HERE / "templates"))
templates.env.filters["clock"] = local_time
templates.env.globals["on_time"] = lambda j, now: on_time(
    j.completed_at, j.state in FINAL_STATES, j.due_date, (j.forecast or {}).get("completion"),
    now)
templates.env.globals["shown_end"] = lambda j: shown_end(
    j.completed_at, j.state in FINAL_STATES, (j.forecast or {}).get("completion"))
# a finished job's last forecast is no longer one: its views show what happened instead
templates.env.globals["live_forecast"] = lambda j: {} if j.state in FINAL_STATES else (
    j.forecast or {})
router = APIRouter(prefix="/ui", include_in_schema=False)


def csrf_for(token: str) -> str:
    """The CSRF token of a session: unguessable without the session's API token."""
    return hmac.new(token.encode(), b"andreas-ui-csrf", hashlib.sha256).hexdigest()[:32]


class SignIn(Exception):
    """Raised where a page needs a signed-in user and there is none: redirect to sign-in."""

    def __init__(self, path: str) -> None:
        self.path = path


def signed_in(request: Request) -> tuple[User, str]:
    token = request.cookies.get(SESSION)
    user = request.app.state.store.user_for(token) if token else None
    if user is None or token is None:
        raise SignIn(request.url.path)
    return user, token


def check_csrf(token: str, sent: str | None) -> None:
    if not sent or not hmac.compare_digest(csrf_for(token), sent):
        raise HTTPException(403, "this form lacks a valid CSRF token; reload the page and "
                                 "try again")


def page(request: Request, name: str, user: User | None, token: str | None,
         **context: Any) -> HTMLResponse:
    return templates.TemplateResponse(request, name, {
        "user": user, "csrf": csrf_for(token) if token else "", "now": time.time(),
        "states": STATES, "final_states": FINAL_STATES, **context})


def install(app) -> None:
    """Add the dashboard to the service's app: its routes, its files, the sign-in redirect."""
    from fastapi.staticfiles import StaticFiles

    app.include_router(router)
    app.mount("/ui/static", StaticFiles(directory=str(HERE / "static")), name="ui-static")

    @app.exception_handler(SignIn)
    async def _sign_in(request: Request, exc: SignIn):
        return RedirectResponse(f"/ui/login?next={quote(exc.path)}", status_code=303)

    @app.get("/", include_in_schema=False)
    def _root():
        return RedirectResponse("/ui/", status_code=303)


# ---------------------------------------------------------------------- sign-in
@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, next: str = "/ui/", error: str = ""):
    nonce = secrets.token_urlsafe(16)
    response = page(request, "login.html", None, None, next=_local(next), error=error,
                    nonce=nonce)
    response.set_cookie(LOGIN_NONCE, nonce, httponly=True, samesite="strict", path="/ui",
                        secure=request.url.scheme == "https", max_age=3600)
    return response


@router.post("/login")
def login(request: Request, token: str = Form(..., max_length=500),
          nonce: str = Form(""), next: str = Form("/ui/")):
    expected = request.cookies.get(LOGIN_NONCE)
    if not expected or not hmac.compare_digest(expected, nonce):
        raise HTTPException(403, "the sign-in form expired or came from elsewhere; reload it")
    address = client_address(request)
    user = request.app.state.store.user_for(token.strip())
    if user is None:  # a valid token signs in whatever its address did before
        refused = refuse(request, address, 401, "unknown, revoked or expired token",
                         token.strip())
        return RedirectResponse("/ui/login?error=" + quote(
            "too many failed sign-ins; wait a minute" if refused.status_code == 429
            else "unknown, revoked or expired token"), status_code=303)
    response = RedirectResponse(_local(next), status_code=303)
    response.set_cookie(SESSION, token.strip(), httponly=True, samesite="strict", path="/",
                        secure=request.url.scheme == "https", max_age=SESSION_S)
    response.delete_cookie(LOGIN_NONCE, path="/ui")
    return response


@router.post("/logout")
def logout(request: Request, csrf: str = Form("")):
    _, token = signed_in(request)
    check_csrf(token, csrf)
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(SESSION, path="/")
    return response


def _local(path: str) -> str:
    """Only a path of this dashboard is a place to go after sign-in (no open redirect)."""
    return path if path.startswith("/ui/") and not path.startswith("//") else "/ui/"


# ---------------------------------------------------------------------- jobs
def _filters(user: User, state: str | None, owner: str | None) -> tuple[str | None, str | None]:
    state = state if state in STATES else None
    return state, (owner or None) if user.role == "admin" else None


@router.get("/", response_class=HTMLResponse)
def jobs_page(request: Request, state: str | None = None, owner: str | None = None):
    user, token = signed_in(request)
    state, owner = _filters(user, state, owner)
    svc = request.app.state.services
    query = "&".join(f"{k}={quote(v)}" for k, v in (("state", state), ("owner", owner)) if v)
    return page(request, "jobs.html", user, token, state=state, owner=owner, query=query,
                users=user_names(svc.store) if user.role == "admin" else [],
                jobs=visible_jobs(svc, user, state, owner, newest_first=True))


@router.get("/part/jobs", response_class=HTMLResponse)
def jobs_part(request: Request, state: str | None = None, owner: str | None = None):
    user, token = signed_in(request)
    state, owner = _filters(user, state, owner)
    svc = request.app.state.services
    return page(request, "_jobs.html", user, token,
                jobs=visible_jobs(svc, user, state, owner, newest_first=True))


def _job_context(request: Request, user: User, job_id: str) -> dict:
    svc = request.app.state.services
    measured = svc.accounting.measured()["jobs"]
    with svc.store.session() as s:
        job = visible_job(s, job_id, user)
        shown = job_out(s, job, svc, measured.get(job_id))
        runs = [run_out(r) for r in run_rows.runs_of(s, job_id)]
    log = logs_tail(svc.config, [r.id for r in runs], job_id, 20000)
    return {"job": shown, "runs": runs, "log": log,
            "charts": forecast_charts(svc, shown, time.time())}


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
def job_page(request: Request, job_id: str):
    user, token = signed_in(request)
    try:
        context = _job_context(request, user, job_id)
    except Refused as exc:
        return page(request, "error.html", user, token, status=exc.status, detail=exc.detail)
    return page(request, "job.html", user, token, **context)


@router.get("/part/jobs/{job_id}", response_class=HTMLResponse)
def job_part(request: Request, job_id: str):
    user, token = signed_in(request)
    return page(request, "_job.html", user, token, **_job_context(request, user, job_id))


@router.post("/jobs/{job_id}/cancel")
def cancel(request: Request, job_id: str, csrf: str = Form("")):
    user, token = signed_in(request)
    check_csrf(token, csrf)
    svc = request.app.state.services
    try:
        request_cancel(svc, job_id, user)
    except Refused as exc:
        return page(request, "error.html", user, token, status=exc.status, detail=exc.detail)
    return RedirectResponse(f"/ui/jobs/{quote(job_id)}", status_code=303)


# ---------------------------------------------------------------------- plan and cluster
@router.get("/plan", response_class=HTMLResponse)
def plan_page(request: Request):
    return _plan(request, "plan.html")


@router.get("/part/plan", response_class=HTMLResponse)
def plan_part(request: Request):
    return _plan(request, "_plan.html")


def _plan(request: Request, template: str) -> HTMLResponse:
    user, token = signed_in(request)
    svc = request.app.state.services
    return page(request, template, user, token, info=svc.board.latest,
                plan=plan_view(svc, user, time.time()))


@router.get("/cluster", response_class=HTMLResponse)
def cluster_page(request: Request):
    user, token = signed_in(request)
    svc = request.app.state.services
    return page(request, "cluster.html", user, token,
                cluster=cluster_view(svc, user, time.time()),
                policy=svc.config.policy)


# ---------------------------------------------------------------------- submit
@router.get("/submit", response_class=HTMLResponse)
def submit_form(request: Request):
    user, token = signed_in(request)
    return page(request, "submit.html", user, token, form={}, forecast=None, error="",
                profiles=sorted(request.app.state.config.profiles.table))


def _submission(form: dict) -> JobSubmit:
    """A JobSubmit from the form's fields (text), or Refused(422) naming the field."""
    from ..errors import AndreasError

    def number(name: str, kind=float):
        try:
            return kind(form[name])
        except (KeyError, ValueError):
            raise Refused(422, f"{name}: expected a number, got {form.get(name)!r}") from None

    body: dict[str, Any] = {"epochs": number("epochs"), "profile": form.get("profile") or None,
                            "priority": number("priority", int), "name": form.get("name") or None,
                            "preemptible": "no_preempt" not in form,
                            "start_asap": "asap" in form}
    program = (form.get("program") or "").split()
    if not program:
        raise Refused(422, "program: give a Python script or a command")
    if program[0].endswith(".py"):
        body.update(script=program[0], args=program[1:])
    else:
        body["command"] = program
    try:
        body["deadline_s"] = parse_duration(form.get("deadline") or "", "deadline")
    except AndreasError as exc:
        raise Refused(422, str(exc)) from None
    try:
        return JobSubmit(**body)
    except ValueError as exc:
        raise Refused(422, str(exc).splitlines()[0]) from None


@router.post("/submit", response_class=HTMLResponse)
async def submit(request: Request):
    """Two steps: 'preview' shows the job's forecast with the queue as it is; 'submit'
    (from the preview page) accepts the job and opens its page."""
    user, token = signed_in(request)
    form = {k: str(v) for k, v in (await request.form()).items()}
    check_csrf(token, form.get("csrf"))
    svc = request.app.state.services
    profiles = sorted(svc.config.profiles.table)
    try:
        row = await validated(svc.config, _submission(form), time.time())
        if form.get("action") != "submit":
            row.id, row.owner_id = "preview", user.id
            # in a thread: the forecast may wait behind the scheduler's own in the decision
            # worker, and the event loop must go on serving everyone else meanwhile
            f = await run_in_threadpool(svc.what_if, row, user.name)
            forecast = {"start": iso(f.start or row.submitted_at), "end": iso(f.completion),
                        "cost": f.total_cost, "due": iso(row.due_date),
                        "on_time": f.completion <= row.due_date + 1e-6}
            if f.range is not None:  # how sure it is (sim.forecast.forecast_range)
                forecast.update(end_early=iso(f.range.completion[0]),
                                end_late=iso(f.range.completion[1]),
                                cost_low=f.range.total_cost[0], cost_high=f.range.total_cost[1])
            return page(request, "submit.html", user, token, form=form, forecast=forecast,
                        error="", profiles=profiles)
        job = (await accept(svc, [row], user))[0][0]
    except Refused as exc:
        return page(request, "submit.html", user, token, form=form, forecast=None,
                    error=exc.detail, profiles=profiles)
    return RedirectResponse(f"/ui/jobs/{quote(job.id)}", status_code=303)

