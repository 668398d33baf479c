"""The client commands of the `andreas` command line, in the habits of Slurm and Ray Jobs:
`submit`, `jobs` (with a REASON column), `show`, `cancel`, `logs [-f]`, `plan`, `nodes`,
`whoami` and `tokens list|create|revoke`. Each is a thin wrapper on `andreas.client.Client`;
the server URL and token come from `--url/--token`, `ANDREAS_URL/ANDREAS_TOKEN` or the client
file (see `andreas.client`)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from .client import Client, Job, Token
from .clock import local_time, parse_due, parse_duration
from .console import console, plain, user_errors
from .errors import AndreasError
from .service.states import WAITING_STATES

URL = typer.Option(None, "--url", envvar="ANDREAS_URL", show_envvar=True,
                   help="The service, e.g. http://gpu-head:8000 (else the client file's, or "
                        "http://127.0.0.1:8000).")
TOKEN = typer.Option(None, "--token", envvar="ANDREAS_TOKEN", show_envvar=True,
                     help="Your API token (else the client file's).")
AS_JSON = typer.Option(False, "--json", help="Print the service's JSON answer instead.")

def _client(url: str | None, token: str | None) -> Client:
    return Client(url, token)


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _eur(value: float | None) -> str:
    if value is None:
        return "-"
    return "<0.0001" if 0 < abs(value) < 1e-4 else f"{value:.4f}"


def _timing(job: Job) -> str:
    if job.on_time is None:
        return "-"
    return "on time" if job.on_time else "LATE"


NARROW = ("ID", "NAME", "STATE", "EPOCHS", "", "REASON")  # fits 80 columns
MIN_WIDTH = {"ID": 16, "STATE": 9, "EPOCHS": 6, "": 7}  # never squeezed out of a narrow view


def jobs_table(jobs: list[Job], now: float, wide: bool = True) -> Table:
    """The jobs as a table: every column (`wide`), or those that fit 80 columns, with names and
    reasons cut short (an ellipsis) and ids never wrapped."""
    t = Table(box=None, header_style="bold", pad_edge=False)
    columns = ("ID", "NAME", "USER", "STATE", "EPOCHS", "NODE", "START", "END", "END RANGE",
               "DUE", "COST EUR", "KG CO2EQ", "", "REASON")
    carbon = any(j.emissions_kg is not None for j in jobs)  # the grid's intensity is known
    shown = [(c in NARROW or wide) and (c != "KG CO2EQ" or carbon) for c in columns]
    for name, show in zip(columns, shown):
        if not show:
            continue
        if name in ("NAME", "REASON") and not wide:
            t.add_column(name, no_wrap=True, overflow="ellipsis",
                         max_width=12 if name == "NAME" else None)
        else:
            t.add_column(name, overflow="fold", no_wrap=not wide or name == "ID",
                         min_width=MIN_WIDTH.get(name))
    for j in jobs:
        cells = (j.id, plain(j.name), plain(j.owner), j.state,
                 f"{j.epochs_done:g}/{j.epochs:g}", plain(j.node or "-"),
                 local_time(j.predicted_start if j.state in WAITING_STATES
                            else j.raw.get("first_started_at"), now),
                 local_time(j.predicted_completion, now), _end_range(j, now),
                 local_time(j.due_date, now),
                 _eur(j.predicted_cost),
                 "-" if j.emissions_kg is None else f"{j.emissions_kg:.3f}", _timing(j),
                 plain(j.reason or ""))
        t.add_row(*(c for c, show in zip(cells, shown) if show))
    return t


def _end_range(job: Job, now: float) -> str:
    """The forecast completion's range, `early-late` ('-' for none)."""
    bounds = job.completion_range
    if bounds is None:
        return "-"
    return f"{local_time(bounds[0], now)}-{local_time(bounds[1], now)}"


def register(app: typer.Typer) -> None:
    """Add the client commands to the `andreas` command line."""
    panel = "Client: talk to a running service"
    app.command("submit", rich_help_panel=panel,
                context_settings={"allow_extra_args": True,
                                  "ignore_unknown_options": True})(submit_cmd)
    for name, fn in (("jobs", jobs_cmd), ("show", show_cmd), ("cancel", cancel_cmd),
                     ("logs", logs_cmd), ("plan", plan_cmd), ("nodes", nodes_cmd),
                     ("profiles", profiles_cmd),
                     ("drain", drain_cmd), ("undrain", undrain_cmd), ("whoami", whoami_cmd)):
        app.command(name, rich_help_panel=panel)(fn)
    tokens = typer.Typer(no_args_is_help=True, help="List, create and revoke API tokens.")
    tokens.command("list")(tokens_list_cmd)
    tokens.command("create")(tokens_create_cmd)
    tokens.command("revoke")(tokens_revoke_cmd)
    app.add_typer(tokens, name="tokens", rich_help_panel=panel)


def _inline_row(profile: str | None, gpu_type: str | None, gpus: int | None, nodes: int,
                seconds_per_epoch: float | None) -> list[dict] | None:
    """The one-row inline profile that --gpu-type, --gpus, --nodes and --seconds-per-epoch
    give, or None for --profile; an error naming the option that is missing or extra."""
    given = {"--gpu-type": gpu_type, "--gpus": gpus,
             "--seconds-per-epoch": seconds_per_epoch}
    if profile is not None:
        extra = [k for k, v in given.items() if v is not None] + (
            ["--nodes"] if nodes != 1 else [])
        if extra:
            raise AndreasError(f"give --profile or {', '.join(extra)}, not both (a profile "
                               "names its configurations)")
        return None
    missing = [k for k, v in given.items() if v is None]
    if missing:
        raise AndreasError(f"give --profile NAME, or --gpu-type, --gpus and "
                           f"--seconds-per-epoch (missing: {', '.join(missing)})")
    return [{"gpu_type": gpu_type, "gpus": gpus, "seconds_per_epoch": seconds_per_epoch,
             **({"nodes": nodes} if nodes > 1 else {})}]


@user_errors
def submit_cmd(
    ctx: typer.Context,
    program: str = typer.Argument(..., help="A Python script (run with the service's "
                                  "interpreter) or a program; its arguments follow."),
    epochs: float = typer.Option(..., "--epochs", help="Epochs the job trains."),
    deadline: Optional[str] = typer.Option(None, "--deadline", help="Due this long after "
                                           "submission: 90, 45m, 2h, 1d12h."),
    due: Optional[str] = typer.Option(None, "--due", help="Due at this time (ISO 8601, local "
                                      "unless a zone is given)."),
    priority: Optional[int] = typer.Option(None, "--priority", min=1, max=5,
                                           help="1 (low) to 5 (high): the tardiness weight."),
    weight: Optional[float] = typer.Option(None, "--weight", help="Tardiness cost in EUR per "
                                           "second late (instead of --priority)."),
    profile: Optional[str] = typer.Option(None, "--profile", help="A profile name from the "
                                          "service's profiles.csv."),
    gpu_type: Optional[str] = typer.Option(None, "--gpu-type", help="Instead of --profile: "
                                           "the GPU type the job runs on."),
    gpus: Optional[int] = typer.Option(None, "--gpus", min=1, help="With --gpu-type: GPUs "
                                       "(per node, with --nodes)."),
    nodes: int = typer.Option(1, "--nodes", min=1, help="With --gpu-type: above 1, a gang "
                              "over that many nodes, every rank started together."),
    seconds_per_epoch: Optional[float] = typer.Option(
        None, "--seconds-per-epoch", help="With --gpu-type: the job's seconds per epoch in "
        "that configuration (what the planner predicts with)."),
    name: Optional[str] = typer.Option(None, "--name", help="A name to show (default: the "
                                       "program's)."),
    workdir: Optional[str] = typer.Option(None, "--workdir", help="The folder the job runs "
                                          "in, on the service's machine."),
    working_dir: Optional[Path] = typer.Option(
        None, "--working-dir", help="A folder here to send with the job (as a gzipped tar, "
        "at most the service's max_upload_bytes): the job runs in it, unpacked once per "
        "upload; the script is a path inside it."),
    no_preempt: bool = typer.Option(False, "--no-preempt", help="Once started, never pause or "
                                    "move it (for jobs that cannot resume from a checkpoint)."),
    asap: bool = typer.Option(False, "--asap", help="Never hold it back to save energy."),
    time_limit: Optional[str] = typer.Option(None, "--time-limit", help="Stop it after it has "
                                             "run this long in all (e.g. 4h): state timeout."),
    hard_deadline: bool = typer.Option(False, "--hard-deadline", help="Refuse the job, with "
                                       "the forecast, unless it is forecast to end in time."),
    no_wait: bool = typer.Option(False, "--no-wait", help="Answer at once, without waiting "
                                 "(up to 15 s) for the scheduler to plan the job."),
    url: Optional[str] = URL, token: Optional[str] = TOKEN, as_json: bool = AS_JSON,
) -> None:
    """Submit a job and print its id and forecast:
    andreas submit train.py --epochs 20 --deadline 2h --profile mlp -- --lr 0.1
    andreas submit train_ddp.py --epochs 20 --deadline 2h --gpu-type V100 --gpus 8 --nodes 2
    --seconds-per-epoch 30   (a gang: 8 GPUs on each of 2 nodes)"""
    if (deadline is None) == (due is None):
        raise AndreasError("give one of --deadline (e.g. 2h) or --due (e.g. 2026-12-24T18:00)")
    inline = _inline_row(profile, gpu_type, gpus, nodes, seconds_per_epoch)
    args = list(ctx.args[1:] if ctx.args[:1] == ["--"] else ctx.args)
    local = Path(program)
    script = command = None
    if program.endswith(".py"):
        if working_dir is not None:
            script = _inside(working_dir, local)
        else:  # a script here is sent by its absolute path (the service runs it where it lies)
            script = str(local.resolve()) if local.is_file() else program
    else:
        command = [program, *args]
    with _client(url, token) as client:
        upload = client.upload_dir(working_dir)["id"] if working_dir is not None else None
        job = client.submit(epochs=epochs, script=script, args=args if script else (),
                            working_dir=upload,
                            command=command,
                            deadline_s=parse_duration(deadline) if deadline else None,
                            due_date=parse_due(due) if due else None, priority=priority,
                            weight=weight, profile=profile, name=name, workdir=workdir,
                            preemptible=not no_preempt, start_asap=asap,
                            max_runtime_s=parse_duration(time_limit, "--time-limit")
                            if time_limit else None, hard_deadline=hard_deadline,
                            inline_profile=inline)
        if not no_wait:
            job = client.wait_planned(job.id)
    if as_json:
        _print_json(job.raw)
        return
    now = time.time()
    console.print(f"submitted {job.id} ({plain(job.name)}): {job.state}", highlight=False)
    if job.predicted_completion is not None:
        console.print(f"forecast: start {local_time(job.predicted_start, now)}, end "
                      f"{local_time(job.predicted_completion, now)} ({_timing(job)}, due "
                      f"{local_time(job.due_date, now)}), cost {_eur(job.predicted_cost)} EUR",
                      highlight=False)
        if job.completion_range:
            console.print(f"range: end {_end_range(job, now)}", highlight=False)
    if job.reason:
        console.print(f"waiting: {plain(job.reason)}", highlight=False)


def _inside(folder: Path, script: Path) -> str:
    """`script` as a path inside `folder` (given relative to it, or as a path to a file in it)."""
    root = folder.resolve()
    if not script.is_absolute() and (root / script).is_file():
        return script.as_posix()
    try:
        return script.resolve().relative_to(root).as_posix()
    except ValueError:
        raise AndreasError(f"the script {str(script)!r} is not inside --working-dir "
                           f"{str(folder)!r}") from None


@user_errors
def jobs_cmd(
    state: Optional[str] = typer.Option(None, "--state", help="Only jobs in this state: "
                                        "queued, running, paused, completed, failed, "
                                        "cancelled, timeout."),
    show_all: bool = typer.Option(False, "--all", "-a", help="Finished jobs too (default: "
                                  "queued, running and paused only)."),
    wide: bool = typer.Option(False, "--wide", "-w", help="Every column (user, node, start, "
                              "due, cost): a wide terminal; the default fits 80 columns."),
    url: Optional[str] = URL, token: Optional[str] = TOKEN, as_json: bool = AS_JSON,
) -> None:
    """Your jobs (all jobs with an admin token), with why each waits and its forecast."""
    with _client(url, token) as client:
        jobs = client.jobs(state)
    if not (state or show_all):
        jobs = [j for j in jobs if not j.final]
    if as_json:
        _print_json([j.raw for j in jobs])
    elif not jobs:
        console.print("no jobs" + ("" if state or show_all else " waiting or running "
                                   "(--all shows finished ones)"))
    else:
        console.print(jobs_table(jobs, time.time(), wide=wide))


@user_errors
def show_cmd(job_id: str = typer.Argument(..., help="A job id."),
             url: Optional[str] = URL, token: Optional[str] = TOKEN,
             as_json: bool = AS_JSON) -> None:
    """One job: its state, why it waits, its forecast, what it cost so far, and its runs."""
    with _client(url, token) as client:
        job = client.job(job_id)
        runs = client.runs(job_id)
    if as_json:
        _print_json({**job.raw, "runs": runs})
        return
    now = time.time()
    raw = job.raw
    measured = raw.get("measured") or {}
    lines = [
        ("job", f"{job.id} ({plain(job.name)}), user {plain(job.owner)}"),
        ("state", job.state + (f": {plain(job.message)}" if job.message else "")),
        ("progress", f"{job.epochs_done:g} of {job.epochs:g} epochs"),
        ("command", " ".join(raw.get("command", []))),
        ("due", f"{local_time(job.due_date, now)}, {job.weight:g} EUR per second late"),
        ("forecast", f"start {local_time(job.predicted_start, now)}, end "
                     f"{local_time(job.predicted_completion, now)}, {_eur(job.predicted_cost)} EUR "
                     f"({_timing(job)})"),
        ("cost so far", ", ".join(f"{k.removesuffix('_cost')} {_eur(v)} EUR"
                                  for k, v in measured.items()
                                  if k.endswith("_cost") and isinstance(v, (int, float)))
         or "-"),
    ]
    if job.completion_range and job.cost_range:
        lines.insert(5, ("range", f"end {_end_range(job, now)}, {_eur(job.cost_range[0])} to "
                                  f"{_eur(job.cost_range[1])} EUR (jobs faster, or slower "
                                  f"with arrivals)"))
    if job.emissions_kg is not None:
        lines.append(("emissions", f"{job.emissions_kg:.3f} kg CO2eq (so far"
                      + ("" if job.final else ", and as forecast") + ")"))
    if job.reason:
        held = f" (held until {local_time(job.held_until, now)})" if job.held_until else ""
        position = job.raw.get("queue_position")
        ahead = "" if position is None else f" ({position - 1} job(s) start before it)"
        lines.insert(2, ("waiting", plain(job.reason) + held + ahead))
    for label, text in lines:
        console.print(f"[bold]{label:>12}[/bold]  {text}", highlight=False)
    if runs:
        t = Table(title="runs", box=None, header_style="bold")
        for name in ("RUN", "NODE", "GPUS", "START", "END", "EPOCHS", "STOPPED"):
            t.add_column(name)
        for r in runs:
            epochs = f"{r['epochs_at_start']:g}->" + (
                "" if r["epochs_at_end"] is None else f"{r['epochs_at_end']:g}")
            t.add_row(str(r["id"]), ", ".join([r["node"], *(p["node"] for p in
                                                        r.get("more_nodes") or ())]),
                      f"{r['gpu_type']} {r['gpu_indices']}"
                      + (" per node" if r.get("more_nodes") else ""),
                      local_time(r["started_at"], now), local_time(r["ended_at"], now), epochs,
                      r["stop_reason"] or (f"exit {r['exit_code']}" if r["exit_code"]
                                           is not None else r["state"]))
        console.print(t)


@user_errors
def cancel_cmd(job_ids: list[str] = typer.Argument(..., help="One or more job ids."),
               url: Optional[str] = URL, token: Optional[str] = TOKEN) -> None:
    """Cancel jobs (a running one is stopped as for a pause, then marked cancelled)."""
    failed = 0
    with _client(url, token) as client:
        for job_id in job_ids:
            try:
                job = client.cancel(job_id)
            except AndreasError as exc:
                failed += 1
                console.print(f"{job_id}: {exc}", highlight=False, markup=False)
                continue
            console.print(f"{job.id}: {'cancelled' if job.state == 'cancelled' else 'stopping'}",
                          highlight=False)
    if failed:
        raise typer.Exit(2)


@user_errors
def logs_cmd(job_id: str = typer.Argument(..., help="A job id."),
             follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing as the "
                                         "log grows, until the job ends."),
             tail: int = typer.Option(65536, "--tail-bytes", min=1, help="Show at most this "
                                      "many bytes of the end of the log."),
             url: Optional[str] = URL, token: Optional[str] = TOKEN) -> None:
    """The job's output, every run's, newest last."""
    with _client(url, token) as client:
        if not follow:
            sys.stdout.write(client.logs(job_id, tail))
            return
        try:
            for piece in client.follow_logs(job_id, tail_bytes=tail):
                sys.stdout.write(piece)
                sys.stdout.flush()
        except KeyboardInterrupt:
            pass


@user_errors
def plan_cmd(url: Optional[str] = URL, token: Optional[str] = TOKEN,
             as_json: bool = AS_JSON) -> None:
    """The latest decision: who runs where, who waits and why, and the forecast."""
    with _client(url, token) as client:
        plan = client.plan()
    if as_json:
        _print_json(plan)
        return
    now = time.time()
    console.print(f"decision {plan['decisions']} at {local_time(plan['time'], now)} by "
                  f"{plan['policy']} ({plan['source']}, {plan['decision_seconds'] or 0:.3f} s); "
                  f"predicted cost of the jobs shown: {plan['predicted_total_cost']:.4f} EUR",
                  highlight=False)
    t = Table(box=None, header_style="bold")
    for name in ("JOB", "NODE", "GPUS", "START", "END", "COST EUR", "WHY WAITING"):
        t.add_column(name, overflow="fold")
    forecast = plan.get("forecast", {})
    for job_id in sorted(set(forecast) | set(plan["assignments"]) | set(plan["waiting"])):
        a, f, w = (plan["assignments"].get(job_id), forecast.get(job_id, {}),
                   plan["waiting"].get(job_id))
        t.add_row(job_id, ", ".join([a["node"], *a.get("more_nodes", ())]) if a else "-",
                  (f"{a['gpus']} per node" if a.get("more_nodes") else str(a["gpus"]))
                  if a else "-",
                  local_time(f.get("start"), now), local_time(f.get("completion"), now),
                  _eur(f.get("total_cost")), w["text"] if w else "")
    console.print(t)
    if plan.get("revisit_at"):
        console.print(f"revisits held jobs at {local_time(plan['revisit_at'], now)}",
                      highlight=False)


@user_errors
def nodes_cmd(url: Optional[str] = URL, token: Optional[str] = TOKEN,
              as_json: bool = AS_JSON) -> None:
    """Nodes, their GPUs, and which job holds each (others' jobs show as busy)."""
    with _client(url, token) as client:
        nodes = client.nodes()
    if as_json:
        _print_json(nodes)
        return
    t = Table(box=None, header_style="bold")
    for name in ("NODE", "GPU TYPE", "GPUS", "FREE", "STATE", "HELD BY"):
        t.add_column(name, overflow="fold")
    for n in nodes:
        holders = sorted(set(n["busy"].values()))
        t.add_row(n["name"], n["gpu_type"], str(n["gpus"]), str(n["gpus"] - len(n["busy"])),
                  "drained" if n.get("drained") else "up", ", ".join(holders) or "-")
    console.print(t)


@user_errors
def profiles_cmd(url: Optional[str] = URL, token: Optional[str] = TOKEN,
                 as_json: bool = AS_JSON) -> None:
    """The service's named profiles: what --profile may say, and each one's configurations
    (GPU type x GPUs) with their seconds per epoch."""
    with _client(url, token) as client:
        profiles = client.profiles()
    if as_json:
        _print_json(profiles)
        return
    if not profiles:
        console.print("no named profiles: a submission gives its own (inline_profile)",
                      highlight=False)
        return
    t = Table(box=None, header_style="bold")
    for name in ("PROFILE", "CONFIGURATIONS (seconds per epoch)"):
        t.add_column(name, overflow="fold")
    for p in profiles:
        t.add_row(plain(p["name"]), ", ".join(
            f"{c['gpu_type']} x{c['gpus']}"
            + (f" on {c['nodes']} nodes" if c.get("nodes", 1) > 1 else "")
            + f": {c['seconds_per_epoch']:g}"
            for c in p["configurations"]))
    console.print(t)


@user_errors
def drain_cmd(nodes: list[str] = typer.Argument(..., help="Node names."),
              url: Optional[str] = URL, token: Optional[str] = TOKEN) -> None:
    """Drain nodes (admin): their jobs finish or move, nothing new starts there."""
    with _client(url, token) as client:
        for node in nodes:
            client.drain(node)
            console.print(f"{node}: drained", highlight=False)


@user_errors
def undrain_cmd(nodes: list[str] = typer.Argument(..., help="Node names."),
                url: Optional[str] = URL, token: Optional[str] = TOKEN) -> None:
    """Put drained nodes back in service (admin)."""
    with _client(url, token) as client:
        for node in nodes:
            client.undrain(node)
            console.print(f"{node}: up", highlight=False)


@user_errors
def whoami_cmd(url: Optional[str] = URL, token: Optional[str] = TOKEN) -> None:
    """The user and role your token belongs to, and the service it reached."""
    with _client(url, token) as client:
        me = client.whoami()
        console.print(f"{me['user']} ({me['role']}) at {client.url}", highlight=False)


def tokens_table(tokens: list[Token], now: float) -> Table:
    t = Table(box=None, header_style="bold")
    for name in ("ID", "USER", "ROLE", "CREATED", "EXPIRES", "STATUS"):
        t.add_column(name)
    for tok in tokens:
        status = "revoked" if tok.revoked else ("valid" if tok.valid else "expired")
        t.add_row(str(tok.id), plain(tok.user), tok.role, local_time(tok.created_at, now),
                  local_time(tok.expires_at, now) if tok.expires_at else "never", status)
    return t


@user_errors
def tokens_list_cmd(url: Optional[str] = URL, token: Optional[str] = TOKEN,
                    as_json: bool = AS_JSON) -> None:
    """Every token (admin) or your own; never their secrets."""
    with _client(url, token) as client:
        tokens = client.tokens()
    if as_json:
        _print_json([{k: v for k, v in vars(t).items() if k != "secret"} for t in tokens])
    else:
        console.print(tokens_table(tokens, time.time()))


@user_errors
def tokens_create_cmd(
    user: str = typer.Argument(..., help="The user (created if new)."),
    role: str = typer.Option("user", "--role", help="user or admin."),
    expires_in: Optional[str] = typer.Option(None, "--expires-in", help="Valid this long: "
                                             "30d, 12h (default: until revoked)."),
    url: Optional[str] = URL, token: Optional[str] = TOKEN, as_json: bool = AS_JSON,
) -> None:
    """Create a token for a user (admin only) and print it: it is shown this once."""
    expires = parse_duration(expires_in, "--expires-in") if expires_in else None
    with _client(url, token) as client:
        created = client.create_token(user, role, expires)
    if as_json:
        _print_json(vars(created))
    else:
        sys.stdout.write(f"{created.secret}\n")


@user_errors
def tokens_revoke_cmd(token_ids: list[int] = typer.Argument(..., help="Token ids (tokens "
                                                            "list shows them)."),
                      url: Optional[str] = URL, token: Optional[str] = TOKEN) -> None:
    """Revoke tokens (an admin: any; a user: their own). Refused from the next request on."""
    with _client(url, token) as client:
        for token_id in token_ids:
            revoked = client.revoke_token(token_id)
            console.print(f"token {revoked.id} of {plain(revoked.user)}: revoked", highlight=False)
