"""Views never fail on a job's values: a forecast thousands of years ahead (before run times
were bounded, 1e9 epochs of 1e9 s) made `/ui/` answer 500 and `andreas jobs --all` crash for
every admin, even after the job was cancelled."""

import math
import re
import threading
import time

import httpx
import pytest
import uvicorn
from conftest import wait_for, write_service_files
from typer.testing import CliRunner

from andreas.cli import app as client_app
from andreas.clock import iso_utc, local_time, moment
from andreas.service.api import create_app
from andreas.service.config import read_service_config
from andreas.service.sandbox import free_port

ADMIN = {"Authorization": "Bearer admin-secret"}
FAR = 1e18  # seconds: some 3e10 years ahead


def test_times_past_what_a_date_can_show_are_held_not_raised():
    now = time.time()
    assert local_time(FAR, now) == "after 9999"
    assert local_time(-FAR, now).startswith("1-01-0")  # the first days a date can show
    assert local_time(math.inf, now) == "after 9999" and local_time(math.nan, now) == "-"
    assert iso_utc(FAR).startswith("9999-12-30T") and iso_utc(-math.inf).startswith("0001-01-02")
    assert moment(math.nan) is None


def _sign_in(client) -> None:
    form = client.get("/ui/login").text
    nonce = re.search(r'name="nonce" value="([^"]+)"', form).group(1)
    answer = client.post("/ui/login", data={"token": "admin-secret", "nonce": nonce,
                                            "next": "/ui/"}, follow_redirects=False)
    assert answer.status_code == 303 and "error" not in answer.headers["location"]


@pytest.mark.service
def test_a_forecast_past_the_year_9999_breaks_no_view(tmp_path, monkeypatch):
    port = free_port()
    config = read_service_config(write_service_files(
        tmp_path, extra=f"public_url: http://127.0.0.1:{port}\n"))
    application = create_app(config, admin_token="admin-secret")
    server = uvicorn.Server(uvicorn.Config(application, host="127.0.0.1", port=port,
                                           log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, timeout=60, what="the service to start")
        # plain HTTP to the one running app (a TestClient would start its lifespan again)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            job = client.post("/jobs", headers=ADMIN, json={
                "command": ["sleep", "600"], "epochs": 1, "deadline_s": 600,
                "profile": "one"}).json()["id"]
            wait_for(lambda: client.get(f"/jobs/{job}", headers=ADMIN).json()["state"] ==
                     "running", timeout=60, what="the job to start")
            scheduler = application.state.scheduler
            # hold the published plan still: on a loaded machine a tick published a fresh
            # forecast between the one set here and the views reading it
            monkeypatch.setattr(scheduler.board, "publish", lambda info: None)
            plan = scheduler.board.latest
            plan.forecast[job] = {**plan.forecast.get(job, {}), "start": FAR, "completion": FAR}
            scheduler.board.set_forecast_points(job, [(time.time(), FAR, 1.0)])
            assert client.get(f"/jobs/{job}", headers=ADMIN).status_code == 200
            _sign_in(client)
            for page in ("/ui/", f"/ui/jobs/{job}", "/ui/plan"):
                assert client.get(page).status_code == 200, page
            result = CliRunner().invoke(client_app, ["jobs", "--all", "--wide", "--url",
                                                     f"http://127.0.0.1:{port}", "--token",
                                                     "admin-secret"])
            assert result.exit_code == 0, result.output
            # the cell may fold over two lines in a narrow table: its words, not its layout
            assert "after" in result.output and "9999" in result.output, result.output
            client.post(f"/jobs/{job}/cancel", headers=ADMIN)
            wait_for(lambda: client.get(f"/jobs/{job}", headers=ADMIN).json()["state"] ==
                     "cancelled", timeout=60, what="the job to be stopped")  # none left over
    finally:
        server.should_exit = True
        thread.join(timeout=60)


def test_a_log_tail_of_bytes_that_are_not_utf8_stays_within_its_byte_limit(tmp_path):
    from andreas.service.jobs import last_bytes, read_tail

    log = tmp_path / "run-1.log"
    log.write_bytes(b"\xff" * 300_000)  # each decodes to U+FFFD, three bytes as UTF-8
    text = read_tail(log, 100_000)
    assert len(text.encode("utf-8")) <= 100_000 and set(text) == {"\ufffd"}
    # "aé" is 3 bytes: the last 5 bytes are "éaé"; the last 4 cut an "é", which is dropped
    assert last_bytes("aé" * 10, 5) == "éaé" and last_bytes("aé" * 10, 4) == "aé"


def test_a_job_name_cannot_write_to_an_admins_terminal():
    import io

    from rich.console import Console

    from andreas.client import Job
    from andreas.client_cli import jobs_table

    name = "x\x1b]0;owned\x07\x1b[31m[link=http://evil.example]click[/link]"
    job = Job.of({"id": "job-1", "name": name, "owner": "eve\x1b[2J", "state": "queued",
                  "epochs": 1.0, "epochs_done": 0.0, "submitted_at": time.time(),
                  "due_date": time.time() + 60, "weight": 1.0,
                  "reason": "[bold]urgent[/bold]"})
    out = io.StringIO()
    Console(file=out, force_terminal=True, width=300).print(jobs_table([job], time.time()))
    shown = out.getvalue()
    assert "owned" in shown and "\x1b]0;" not in shown and "\x1b[2J" not in shown
    assert "evil.example" in shown and "\x1b]8;" not in shown  # shown as text, not a link
    assert "[bold]urgent[/bold]" in shown


def _job(**fields):
    from andreas.client import Job

    now = time.time()
    base = {"id": "job-1", "name": "n", "owner": "u", "state": "queued", "epochs": 1.0,
            "epochs_done": 0.0, "submitted_at": now - 100, "due_date": now + 100, "weight": 1.0}
    return Job.of({**base, **fields})


def test_a_finished_job_shows_what_happened_not_its_last_forecast():
    now = time.time()
    stale = {"completion": now + 50, "total_cost": 0.0001}
    done = _job(state="completed", completed_at=now - 4, due_date=now - 8, forecast=stale,
                measured={"total_cost": 0.0019})
    # before: 0.0001 EUR (the forecast) and "on time" for a job that ended 4 s late
    assert done.predicted_cost == 0.0019 and done.on_time is False
    cancelled = _job(state="cancelled", forecast=stale, measured={"total_cost": 0.0})
    # before: an end time and "on time" for a job that never ran
    assert cancelled.predicted_completion is None and cancelled.on_time is None
    # running past its due date: late, whatever the last forecast said
    assert _job(state="running", due_date=now - 4, forecast=stale).on_time is False
    assert _job(state="running", forecast=stale).on_time is True


def test_the_job_list_fits_80_columns_and_wide_shows_everything():
    import io

    from rich.console import Console

    from andreas.client_cli import jobs_table

    jobs = [_job(id=f"job-{i:012x}", name="a-rather-long-training-run-name-" * 3,
                 owner="a-user-with-a-long-name", state="queued",
                 reason="waiting for GPUs on node ws-big-0042 until the running job ends",
                 forecast={"start": time.time() + 60, "completion": time.time() + 600,
                           "total_cost": 0.12}) for i in range(3)]

    def shown(wide: bool, width: int) -> list[str]:
        out = io.StringIO()
        Console(file=out, width=width).print(jobs_table(jobs, time.time(), wide=wide))
        return out.getvalue().splitlines()
    narrow = shown(False, 80)
    assert max(len(line) for line in narrow) <= 80, narrow
    assert len(narrow) == 4  # a header and one line a job: nothing wrapped
    for i, line in enumerate(narrow[1:]):  # each job's whole id, state, progress, verdict
        assert line.startswith(f"job-{i:012x}") and " queued " in line and " 0/1 " in line
        assert "LATE" in line and "waiting for" in line, line  # forecast end > due date
    assert "USER" not in narrow[0] and "REASON" in narrow[0]
    wide = shown(True, 250)
    assert all(h in wide[0] for h in ("USER", "NODE", "START", "DUE", "COST EUR"))
