"""What the service does with jobs, apart from HTTP: validate and accept submissions, decide
who may see a job, cancel, and show a job with its runs, forecast and reason. The REST routes
(api.py) and the web dashboard (andreas/ui) both call these; a refusal is a `Refused` with the
HTTP status and the sentence the caller shows."""

from __future__ import annotations

import asyncio
import functools
import sys
import uuid
from pathlib import Path, PurePosixPath

from sqlalchemy.exc import IntegrityError
from starlette.concurrency import run_in_threadpool

from ..catalogue import canonical_gpu
from ..clock import iso_utc
from ..io import feasible_configs
from ..model import config_key
from .config import ServiceConfig
from .db import JobRow, RunRow, User, run_places
from .plan_board import PlanBoard, PlanInfo
from .refused import Refused
from .schemas import MAX_RUN_S, MIN_RUN_S, JobOut, JobSubmit, RankPlace, RunOut
from .services import Services
from .states import (
    CANCELLED_MESSAGE,
    FINAL_STATES,
    LIVE_RUN_STATES,
    WAITING_STATES,
    JobState,
    RunState,
)
from .store import jobs as job_rows
from .store import runs as run_rows
from .uploads import find


def visible_job(s, job_id: str, user: User) -> JobRow:
    job = s.get(JobRow, job_id)
    if job is None:
        raise Refused(404, f"no job {job_id!r}")
    if user.role != "admin" and job.owner_id != user.id:
        raise Refused(403, f"job {job_id!r} belongs to another user")
    return job

def visible_jobs(svc: Services, user: User, state: str | None = None,
                 owner: str | None = None, newest_first: bool = False) -> list[JobOut]:
    """The jobs `user` may see, with what they cost so far, oldest first (or newest):
    filtered by state, and for an admin by the owner's name."""
    measured = svc.accounting.measured()["jobs"]
    with svc.store.session() as s:
        jobs = job_rows.jobs_for(s, user, state, owner, newest_first)
        # every job's runs and owner in two queries, not two per job: on a long queue those
        # held the database from every other request
        runs = job_rows.runs_by_job(s, [j.id for j in jobs])
        owners = job_rows.user_names_by_id(s)
        return [job_out(s, j, svc, measured.get(j.id), runs=runs[j.id],
                        owner=owners.get(j.owner_id, "?")) for j in jobs]


def request_cancel(svc: Services, job_id: str, user: User) -> None:
    """Cancel a job: a queued or paused one at once, a running one at the next tick (stopped
    like a pause). Refused (409) for a job that has ended."""
    with svc.store.session() as s:
        job = visible_job(s, job_id, user)
        if job.state in FINAL_STATES:
            raise Refused(409, f"job {job_id!r} is already {job.state}")
        job.cancel_requested = True
        if job.state in WAITING_STATES:
            job.state, job.message = JobState.CANCELLED, CANCELLED_MESSAGE
    svc.wake("cancel")


async def accept(svc: Services, rows: list[JobRow], user: User,
                 idempotency_key: str | None = None) -> tuple[list[JobOut], bool]:
    """Store validated submissions in one transaction, wake the scheduler, show them.
    A job with a hard deadline that the forecast ends late is refused (409), and with it
    the whole submission. With an `idempotency_key` this user used before, nothing is stored
    and the job made then is shown. Returns the jobs and whether they are new.

    The common submission (no hard deadline, no upload, no queue quota) never leaves the
    event loop: it waits for its commit in a transaction shared with the submissions that
    arrive with it (group_commit.py). A thread per request, and a transaction per request,
    made every concurrent request wait its turn for the interpreter and the database
    (bench/service-load.md). The rest is prepared in a worker thread."""
    limit = svc.config.quotas.of(user.name).max_queued
    costly = any(row.hard_deadline or row.upload is not None for row in rows)
    prepare = functools.partial(_prepare, svc, rows, user, idempotency_key, limit,
                                costly)
    earlier = await run_in_threadpool(prepare) if costly or limit is not None else prepare()
    if earlier is not None:
        return [earlier], False

    def insert(s) -> None:  # run by the group commit, with others' submissions
        s.add_all(rows)  # flushed with the group's: one INSERT for all of them

    try:
        await asyncio.wrap_future(svc.store.group.submit(insert))
    except IntegrityError:  # the unique (owner, key) index: a retry, or a concurrent one
        if idempotency_key is None:
            raise
        earlier = await run_in_threadpool(submitted_with, svc, user, idempotency_key)
        if earlier is None:
            raise
        return [earlier], False
    svc.wake("submit")
    return [job_out(None, row, svc, None, runs=[], owner=user.name) for row in rows], True


def _prepare(svc: Services, rows: list[JobRow], user: User,
             idempotency_key: str | None, limit: int | None, costly: bool) -> JobOut | None:
    """Give `rows` their ids and owner, after the checks that need the database, the forecast
    or the disk; returns the job made earlier when this is the retry of a `costly` submission
    (one with a hard deadline or an upload), which must not be forecast or unpacked again."""
    if idempotency_key is not None and costly:
        if (out := submitted_with(svc, user, idempotency_key)) is not None:
            return out
    refuse_over_queue(svc, limit, len(rows), user)
    for i, row in enumerate(rows):
        row.id = "job-" + uuid.uuid4().hex[:12]
        row.owner_id = user.id
        row.idempotency_key = idempotency_key
        if row.hard_deadline:
            refuse_if_late(svc, row, user.name, f"job [{i}]: " if len(rows) > 1 else "")
    for row in rows:
        if row.upload is not None:  # the upload's one unpacked folder, shared by its jobs
            row.workdir = str(row.upload)
    return None


def submitted_with(svc: Services, user: User, key: str) -> JobOut | None:
    """The API's view of the job `user` submitted with Idempotency-Key `key`, if any."""
    with svc.store.session() as s:
        job = job_rows.with_idempotency_key(s, user, key)
        return None if job is None else job_out(s, job, svc, None)


def refuse_over_queue(svc: Services, limit: int | None, adding: int, user: User) -> None:
    """409 when `adding` more jobs would give `user` more than `limit` waiting (queued or
    paused) jobs (quotas.max_queued in service.yaml)."""
    if limit is None:
        return
    with svc.store.session() as s:
        waiting = job_rows.waiting_count(s, user)
    if waiting + adding > limit:
        raise Refused(409, f"over quota: {user.name} has {waiting} waiting job(s) and may have "
                           f"at most {limit} (quotas in service.yaml); this submission adds "
                           f"{adding}")


def refuse_if_late(svc: Services, row: JobRow, owner: str, prefix: str) -> None:
    """409 when the forecast, with the queue as it is (and `owner`'s quota), ends `row` after
    its due date."""
    try:
        f = svc.what_if(row, owner)
    except Exception as exc:  # no forecast, no promise: refuse, and say why
        raise Refused(409, f"{prefix}hard_deadline: no forecast could be made "
                                 f"({type(exc).__name__}: {exc})") from None
    late = f.completion - row.due_date
    if late > 1e-6:
        raise Refused(409, f"{prefix}hard_deadline: the forecast ends the job at "
                                 f"{iso(f.completion)}, {late:.0f} s after its due date "
                                 f"{iso(row.due_date)} (it would start at "
                                 f"{iso(f.start or row.submitted_at)}); not accepted")

def confined(config: ServiceConfig, field: str, path: Path) -> None:
    """Refuse (400) a path outside every folder of `allowed_roots` (service.yaml), judged on
    its real path: no '..' and no symbolic link leads out. No roots: no confinement."""
    if not config.allowed_roots:
        return
    real = path.resolve()
    if not any(real == root or root in real.parents for root in config.allowed_roots):
        raise Refused(400, f"{field}: {str(path)!r} is outside the folders jobs may use "
                           f"(allowed_roots in service.yaml: "
                           f"{', '.join(str(r) for r in config.allowed_roots)})")


def validate_submission(config: ServiceConfig, body: JobSubmit, now: float,
                        owner_id: int | None = None) -> JobRow:
    def bad(message: str):
        raise Refused(400, message)

    if (body.command is None) == (body.script is None):
        bad("give exactly one of 'command' (argv list) or 'script' (a Python file)")
    upload = None
    if body.working_dir is not None:
        if body.workdir:
            bad("give 'workdir' (a folder on the service's machine) or 'working_dir' (an "
                "upload), not both")
        upload, names = find(config.data_dir, body.working_dir, owner_id or -1)
    if body.command is not None:
        command = list(body.command)
    elif upload is not None:
        assert body.script is not None
        inside = str(PurePosixPath(body.script))
        if PurePosixPath(body.script).is_absolute() or inside not in names:
            bad(f"script: {body.script!r} is not a file of the uploaded folder "
                f"{body.working_dir!r}")
        command = [sys.executable, inside, *body.args]
    else:
        assert body.script is not None  # exactly one of the two, checked above
        script = Path(body.script)
        if body.workdir:
            script = Path(body.workdir) / script if not script.is_absolute() else script
        if not script.is_file():
            bad(f"script: no such file {str(script)!r} on the service's machine")
        confined(config, "script", script)
        command = [sys.executable, str(script.resolve()), *body.args]
    if body.workdir and not Path(body.workdir).is_dir():
        bad(f"workdir: no such directory {body.workdir!r}")
    if body.workdir:
        confined(config, "workdir", Path(body.workdir))
        if Path(body.workdir).resolve().is_relative_to(config.data_dir):
            raise Refused(422, f"workdir: {body.workdir!r} is inside the service's data folder "
                               "(its database, other jobs' checkpoints and uploads); expected "
                               "a folder of yours, or working_dir for an upload")
    if (body.due_date is None) == (body.deadline_s is None):
        bad("give exactly one of 'due_date' (Unix time) or 'deadline_s' (seconds from now)")
    due = body.due_date if body.due_date is not None else now + float(body.deadline_s or 0.0)
    if body.weight is not None and body.priority is not None:
        bad("give 'weight' or 'priority', not both")
    weight = body.weight if body.weight is not None else config.priority_weights[
        body.priority or 3]
    if (body.profile is None) == (body.inline_profile is None):
        bad("give exactly one of 'profile' (a name) or 'inline_profile' (rows)")
    cluster = config.cluster
    if body.profile is not None:
        if body.profile not in config.profiles.table:
            known = ", ".join(sorted(config.profiles.table)) or "none configured"
            bad(f"profile: unknown profile {body.profile!r}; expected one of {known}")
        configs: dict = {**config.profiles.configs(body.profile),
                         **config.profiles.gangs.get(body.profile, {})}
        inline: list[dict] | None = None
    else:
        assert body.inline_profile is not None  # exactly one of the two, checked above
        inline, configs = [], {}
        for i, row in enumerate(body.inline_profile):
            gpu_type = canonical_gpu(row.gpu_type) or row.gpu_type
            if gpu_type not in cluster.gpu_types:
                bad(f"inline_profile[{i}].gpu_type: unknown GPU type {row.gpu_type!r}; "
                    f"expected one of {', '.join(sorted(cluster.gpu_types))}")
            configs[config_key(gpu_type, row.gpus, row.nodes)] = row.seconds_per_epoch
            if row.nodes > 1 and cluster.nodes and not feasible_configs(
                    cluster, [(gpu_type, row.gpus, row.nodes)]):
                bad(f"inline_profile[{i}].nodes: no {row.nodes} nodes of {gpu_type} with "
                    f"{row.gpus} GPUs each in the cluster; expected a gang it can hold")
            inline.append({"gpu_type": gpu_type, "gpus": row.gpus,
                           **({"nodes": row.nodes} if row.nodes > 1 else {}),
                           "seconds_per_epoch": row.seconds_per_epoch,
                           **{k: v for k, v in (("power_w", row.power_w),
                                                ("startup_s", row.startup_s)) if v is not None}})
    if cluster.nodes and not feasible_configs(cluster, configs):
        bad("no node of the cluster can run any configuration of this job's profile")
    check_run_times(body, configs)
    if body.due_date is not None and body.due_date < now:
        raise Refused(422, f"due_date: {body.due_date:.0f} is before the submission "
                           f"({now:.0f}); expected a Unix time to come")
    default_name = Path(command[-1] if body.script is None else body.script).name[:200]
    if upload is not None:
        row = _row(body, command, due, weight, inline, now, default_name)
        row.upload = upload  # its unpacked folder: the job's workdir once it has an id
        return row
    return _row(body, command, due, weight, inline, now, default_name)


def check_run_times(body: JobSubmit, configs: dict) -> None:
    """Every configuration's whole run (epochs x seconds per epoch) is a time the planner can
    divide by and a forecast can date: between MIN_RUN_S and MAX_RUN_S; else a 422 naming the
    fields. Each field alone may be in range and their product not (0.001 epochs of 5e-324 s
    is a run of exactly 0 s, which once stopped every user's planning)."""
    where = "profile" if body.profile is not None else "inline_profile"
    for key, spe in configs.items():
        gpu_type, gpus, nodes = (*key, 1)[:3]
        run = body.epochs * spe
        on = f"{gpus} {gpu_type}" + (f" on each of {nodes} nodes" if nodes > 1 else "")
        if not MIN_RUN_S <= run <= MAX_RUN_S:
            raise Refused(422, f"epochs x {where} seconds_per_epoch: {body.epochs:g} epochs of "
                               f"{spe:g} s on {on} is a run of {run:g} s; expected "
                               f"{MIN_RUN_S:g} s to {MAX_RUN_S:g} s (ten years)")


async def validated(config: ServiceConfig, body: JobSubmit, now: float,
                    owner_id: int | None = None) -> JobRow:
    """`validate_submission`, in a worker thread when it looks at files (a script, a working
    folder, an upload), which may be slow (a network file system); at once otherwise."""
    if body.script is None and body.workdir is None and body.working_dir is None:
        return validate_submission(config, body, now, owner_id)
    return await run_in_threadpool(validate_submission, config, body, now, owner_id)


def _row(body: JobSubmit, command: list[str], due: float, weight: float, inline,
         now: float, default_name: str) -> JobRow:
    return JobRow(name=body.name or default_name,
                  command=command, workdir=body.workdir, epochs=body.epochs, submitted_at=now,
                  due_date=due, weight=weight, profile_name=body.profile, inline_profile=inline,
                  state=JobState.QUEUED, epochs_done=0.0, cancel_requested=False, speed_factor=1.0,
                  preemptible=body.preemptible, start_asap=body.start_asap,
                  max_runtime_s=body.max_runtime_s, hard_deadline=body.hard_deadline)


def run_out(r: RunRow) -> RunOut:
    return RunOut(id=r.id, node=r.node, gpu_type=r.gpu_type, gpu_indices=r.gpu_indices,
                  more_nodes=[RankPlace(node=n, gpu_indices=i) for n, i in run_places(r)[1:]],
                  state=r.state, started_at=r.started_at, ended_at=r.ended_at,
                  epochs_at_start=r.epochs_at_start, epochs_at_end=r.epochs_at_end,
                  stop_reason=r.stop_reason, exit_code=r.exit_code)


def job_out(s, job: JobRow, svc: Services, measured: dict | None, *,
            runs: list[RunRow] | None = None, owner: str | None = None) -> JobOut:
    """The API's view of `job`; `runs` and `owner` are read unless the caller has them."""
    if runs is None:
        runs = run_rows.runs_of(s, job.id)
    live = next((r for r in runs if r.state in LIVE_RUN_STATES), None)
    if owner is None:
        user = s.get(User, job.owner_id)
        owner = user.name if user else "?"
    return JobOut(id=job.id, name=job.name, owner=owner, state=job.state,
                  command=job.command, epochs=job.epochs, epochs_done=job.epochs_done,
                  submitted_at=job.submitted_at, due_date=job.due_date, weight=job.weight,
                  profile=job.profile_name or ("inline" if job.inline_profile else None),
                  first_started_at=job.first_started_at, completed_at=job.completed_at,
                  message=job.message, running_on=run_out(live) if live else None,
                  restarts=max(0, sum(1 for r in runs
                                      if r.handle or r.state != RunState.ENDED) - 1),
                  speed_factor=job.speed_factor, startup_s=job.startup_s,
                  predicted=job.predicted,
                  forecast=svc.board.latest.forecast.get(job.id, job.forecast),
                  measured=measured,
                  preemptible=job.preemptible, start_asap=job.start_asap,
                  max_runtime_s=job.max_runtime_s, hard_deadline=job.hard_deadline,
                  **why_waiting(job, svc.board))


def why_waiting(job: JobRow, board: PlanBoard) -> dict:
    """`reason` and `held_until` of a job that waits (from the latest decision)."""
    if job.state not in WAITING_STATES:
        return {"reason": None, "reason_code": None, "held_until": None,
                "queue_position": None}
    return {**_why(job, board), "queue_position": queue_position(job.id, board.latest)}


def queue_position(job_id: str, plan: PlanInfo) -> int | None:
    """1 + how many waiting jobs (anyone's) the latest forecast starts before this one, those
    starting at the same moment in submission order; None until it is forecast. With energy
    and due dates deciding, "ahead" is the plan's order, not the order of submission."""
    return _positions(plan.waiting, plan.forecast).get(job_id)


# (waiting, forecast, positions): one tuple, swapped whole, so that API threads reading it
# never mix two plans
_positions_cache: tuple[dict, dict, dict[str, int]] = ({}, {}, {})


def _positions(waiting: dict, forecast: dict) -> dict[str, int]:
    """Every forecast waiting job's position, computed once per plan (a job list asks for
    each of its jobs)."""
    global _positions_cache
    cached = _positions_cache
    if cached[0] is waiting and cached[1] is forecast:
        return cached[2]
    order = list(waiting)  # the snapshot's order: submission
    known = [(forecast[j]["start"], i, j) for i, j in enumerate(order)
             if forecast.get(j, {}).get("start") is not None]
    positions = {j: rank + 1 for rank, (_, _, j) in enumerate(sorted(known))}
    _positions_cache = (waiting, forecast, positions)
    return positions


def _why(job: JobRow, board: PlanBoard) -> dict:
    plan, failed = board.latest, board.last_error
    why = plan.waiting.get(job.id)
    if why is None:
        if failed is not None:
            return {"reason": "not planned: the scheduler's latest decision failed "
                              f"({failed}; see the service log)",
                    "reason_code": "decision_failed", "held_until": None}
        if job.id in plan.assignments:
            return {"reason": f"starting on {plan.assignments[job.id]['node']}",
                    "reason_code": "starting", "held_until": None}
        return {"reason": "not planned yet", "reason_code": "not_planned", "held_until": None}
    return {"reason": why["text"], "reason_code": why["reason"], "held_until": why["until"]}


def logs_tail(config: ServiceConfig, run_ids: list[int], job_id: str, tail_bytes: int) -> str:
    """The last `tail_bytes` of a job's logs, every run's, oldest first, each under a header."""
    parts, left = [], tail_bytes
    for run_id in reversed(run_ids):  # newest first, reading only the tail of each file
        if left <= 0:
            break
        path = config.job_dir(job_id) / "logs" / f"run-{run_id}.log"
        text = read_tail(path, left)
        part = f"--- run {run_id} ---\n{text}"
        parts.append(part)
        left -= len(part.encode())
    return last_bytes("".join(reversed(parts)), tail_bytes)


def last_bytes(text: str, limit: int) -> str:
    """The end of `text` that is at most `limit` bytes as UTF-8 (a character cut at the start
    is dropped). Bytes that were not UTF-8 decode to U+FFFD, three bytes each: a 50 MB log of
    such bytes became a 150 MB answer when the tail was cut in characters."""
    data = text.encode("utf-8")
    return text if len(data) <= limit else data[-limit:].decode("utf-8", errors="ignore")


def iso(t: float) -> str:
    return iso_utc(t)


def read_tail(path: Path, max_bytes: int) -> str:
    """The last `max_bytes` bytes of a file as text, read from the end: a log of hundreds of
    megabytes costs the service no more memory than the tail asked for."""
    try:
        with path.open("rb") as f:
            size = f.seek(0, 2)
            f.seek(max(0, size - max_bytes))
            return last_bytes(f.read(max_bytes).decode("utf-8", errors="replace"), max_bytes)
    except FileNotFoundError:
        return ""
