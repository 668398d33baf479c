"""The client (andreas.client) and the client commands (andreas submit/jobs/...), end to end
against a real `andreas serve` process on SQLite and on a real PostgreSQL, and the token
lifecycle (create, list, revoke, expire) through the API."""

import json
import socket
import time

import pytest
from conftest import epoch_lines, train_job, wait_for, write_service_files
from fastapi.testclient import TestClient
from test_service_durability import TOKEN, Service, free_port
from typer.testing import CliRunner

from andreas.cli import app
from andreas.client import ApiError, Client, _new_text, resolve_settings
from andreas.clock import parse_due, parse_duration
from andreas.errors import AndreasError
from andreas.service.api import create_app
from andreas.service.config import read_service_config

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = pytest.mark.service

ADMIN = {"Authorization": "Bearer admin-secret"}


# ---------------------------------------------------------------------- parsing and settings
@pytest.mark.parametrize("text, seconds", [("90", 90), ("90s", 90), ("45m", 2700),
                                           ("2h", 7200), ("1d12h", 129600), ("1.5h", 5400)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "2 hours", "h", "-5", "0", "2h30", "5y"])
def test_bad_durations_say_what_was_expected(text):
    with pytest.raises(AndreasError, match="--deadline: expected a"):
        parse_duration(text)


def test_due_dates_are_iso_times():
    assert parse_due("2026-12-24T18:00:00+00:00") == 1798135200.0
    with pytest.raises(AndreasError, match="--due: expected an ISO date"):
        parse_due("tomorrow")


def test_settings_come_from_arguments_then_environment_then_the_client_file(
        tmp_path, monkeypatch):
    path = tmp_path / "client.yaml"
    path.write_text("url: http://from-file:1/\ntoken: file-token\n")
    monkeypatch.setenv("ANDREAS_CLIENT_CONFIG", str(path))
    monkeypatch.delenv("ANDREAS_URL", raising=False)
    monkeypatch.delenv("ANDREAS_TOKEN", raising=False)
    assert resolve_settings() == ("http://from-file:1", "file-token")
    monkeypatch.setenv("ANDREAS_TOKEN", "env-token")
    assert resolve_settings() == ("http://from-file:1", "env-token")
    assert resolve_settings("http://arg:2", "arg-token") == ("http://arg:2", "arg-token")
    path.write_text("url: http://x\ntokn: typo\n")
    with pytest.raises(AndreasError, match=r"client.yaml: unknown key\(s\) tokn"):
        resolve_settings()
    path.unlink()
    monkeypatch.delenv("ANDREAS_TOKEN")
    with pytest.raises(AndreasError, match="no API token"):
        Client()


def test_following_a_log_prints_each_piece_once():
    assert _new_text("", "a\nb\n") == "a\nb\n"
    assert _new_text("a\nb\n", "a\nb\nc\n") == "c\n"
    # the tail window moved on: the overlap is found from the end of what was seen
    seen = "".join(f"line {i}\n" for i in range(2000))
    later = seen[5000:] + "line 2000\n"
    assert _new_text(seen, later) == "line 2000\n"


def test_an_unreachable_service_is_retried_with_capped_backoff_then_named():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    delays = []
    client = Client(f"http://127.0.0.1:{port}", "t", retries=5, backoff_s=0.5,
                    max_backoff_s=2.0, sleep=delays.append)
    with pytest.raises(AndreasError, match=f"cannot reach the service at http://127.0.0.1:{port}"):
        client.jobs()
    assert delays == [0.5, 1.0, 2.0, 2.0, 2.0]


# ---------------------------------------------------------------------- tokens through the API
def test_tokens_are_listed_revoked_and_expire(tmp_path, database_url):
    config = read_service_config(write_service_files(tmp_path)).with_database(database_url)
    with TestClient(create_app(config, admin_token="admin-secret",
                               run_scheduler=False)) as api:
        made = {}
        for user in ("alice", "bob"):
            r = api.post("/tokens", headers=ADMIN, json={"user": user})
            assert r.status_code == 201 and r.json()["valid"] and r.json()["expires_at"] is None
            made[user] = r.json()
        alice = {"Authorization": f"Bearer {made['alice']['token']}"}
        bob = {"Authorization": f"Bearer {made['bob']['token']}"}
        # an admin lists every token, a user their own; no listing shows a secret
        listed = api.get("/tokens", headers=ADMIN).json()
        assert {t["user"] for t in listed} == {"admin", "alice", "bob"}
        assert all("token" not in t for t in listed)
        assert [t["id"] for t in api.get("/tokens", headers=alice).json()] == \
            [made["alice"]["id"]]
        # a user may not revoke another's token (it is not found for them), but their own
        r = api.post(f"/tokens/{made['bob']['id']}/revoke", headers=alice)
        assert r.status_code == 404
        assert api.get("/whoami", headers=bob).status_code == 200
        r = api.post(f"/tokens/{made['alice']['id']}/revoke", headers=alice)
        assert r.status_code == 200 and r.json()["revoked"] and not r.json()["valid"]
        r = api.get("/whoami", headers=alice)  # refused at once
        assert r.status_code == 401 and "revoked" in r.json()["detail"]
        # an admin revokes anyone's
        assert api.post(f"/tokens/{made['bob']['id']}/revoke", headers=ADMIN).status_code == 200
        assert api.get("/whoami", headers=bob).status_code == 401
        # expiry: valid until expires_at, then refused
        r = api.post("/tokens", headers=ADMIN, json={"user": "carol", "expires_in_s": 3600})
        assert r.json()["expires_at"] == pytest.approx(time.time() + 3600, abs=60)
        r = api.post("/tokens", headers=ADMIN, json={"user": "carol", "expires_in_s": 0.2})
        carol = {"Authorization": f"Bearer {r.json()['token']}"}
        wait_for(lambda: api.get("/whoami", headers=carol).status_code == 401, timeout=30,
                 what="the token to expire")
        entry = next(t for t in api.get("/tokens", headers=ADMIN).json()
                     if t["id"] == r.json()["id"])
        assert not entry["valid"] and not entry["revoked"]
        for body in ({"user": "d", "expires_in_s": 0}, {"user": "d", "expires_in_s": -1}):
            assert api.post("/tokens", headers=ADMIN, json=body).status_code == 422


# ---------------------------------------------------------------------- the CLI, end to end
def cli(*args, token, url):
    """Run one `andreas` client command in-process against the real service."""
    args = list(args)
    at = args.index("--") if "--" in args else len(args)  # the program's own arguments follow
    result = CliRunner().invoke(app, [*args[:at], "--url", url, "--token", token, *args[at:]])
    return result.exit_code, result.output


def test_the_client_commands_against_a_real_service(tmp_path, database_url):
    config = write_service_files(tmp_path, extra="public_url: http://127.0.0.1:{port}\n")
    port = free_port()
    config.write_text(config.read_text().replace("{port}", str(port)))
    service = Service(config, port, database_url)
    service.start()
    try:
        url = service.url
        code, out = cli("tokens", "create", "alice", token=TOKEN, url=url)
        assert code == 0, out
        alice = out.strip()
        code, out = cli("whoami", token=alice, url=url)
        assert code == 0 and out.startswith("alice (user)")
        # the names --profile may give, with their configurations (conftest's profiles.csv)
        code, out = cli("profiles", token=alice, url=url)
        assert code == 0 and "fast x1: 0.3, fast x2: 0.2, slow x1: 0.5" in out, out
        code, out = cli("profiles", "--json", token=alice, url=url)
        assert [p["name"] for p in json.loads(out)] == ["mlp", "one"]

        # submit: a script with its arguments after --, answered with the forecast
        body = train_job(4, samples=20000)
        code, out = cli("submit", body["script"], "--epochs", "4", "--deadline", "10m",
                        "--profile", "mlp", "--priority", "4", "--json", "--", *body["args"],
                        token=alice, url=url)
        assert code == 0, out
        job = json.loads(out)
        assert job["state"] in ("queued", "running") and job["owner"] == "alice"
        assert job["command"][-2:] == body["args"] and job["weight"] > 0
        code, out = cli("submit", "sleep", "600", "--epochs", "1", "--deadline", "1d",
                        "--profile", "one", "--name", "sleeper", token=alice, url=url)
        assert code == 0 and "submitted job-" in out
        sleeper = out.split()[1]

        # jobs --all --json lists both (the first may have finished); plain `jobs` shows the
        # sleeper, which waits or runs, with its forecast
        code, out = cli("jobs", "--all", "--json", token=alice, url=url)
        assert {j["id"] for j in json.loads(out)} == {job["id"], sleeper}
        code, out = cli("jobs", "--json", token=alice, url=url)
        active = {j["id"]: j for j in json.loads(out)}
        assert sleeper in active and active[sleeper]["forecast"] is not None
        assert all(j["state"] in ("queued", "running", "paused") for j in active.values())
        code, out = cli("jobs", "--all", token=alice, url=url)
        assert code == 0 and job["id"] in out and "sleeper" in out and "REASON" in out

        # logs -f follows the job to its end: every epoch once
        code, out = cli("logs", job["id"], "-f", token=alice, url=url)
        assert code == 0 and sorted(epoch_lines(out)) == [1, 2, 3, 4]
        code, out = cli("show", job["id"], "--json", token=alice, url=url)
        shown = json.loads(out)
        assert shown["state"] == "completed" and len(shown["runs"]) >= 1

        # cancel, and a second cancel is refused with the service's sentence
        code, out = cli("cancel", sleeper, token=alice, url=url)
        assert code == 0 and sleeper in out
        wait_for(lambda: json.loads(cli("show", sleeper, "--json", token=alice, url=url)[1])
                 ["state"] == "cancelled", timeout=60, what="the cancel")
        code, out = cli("cancel", sleeper, token=alice, url=url)
        assert code == 2 and "already cancelled" in out

        # others' jobs: bob sees none of alice's
        code, out = cli("tokens", "create", "bob", "--json", token=TOKEN, url=url)
        bob = json.loads(out)
        assert json.loads(cli("jobs", "--all", "--json", token=bob["secret"], url=url)[1]) == []
        code, out = cli("show", job["id"], token=bob["secret"], url=url)
        assert code == 2 and "belongs to another user" in out

        # tokens: list, revoke, and the revoked one is refused at once
        code, out = cli("tokens", "list", "--json", token=TOKEN, url=url)
        assert {t["user"] for t in json.loads(out)} >= {"admin", "alice", "bob"}
        code, out = cli("tokens", "revoke", str(bob["id"]), token=TOKEN, url=url)
        assert code == 0 and "revoked" in out
        code, out = cli("whoami", token=bob["secret"], url=url)
        assert code == 2 and "invalid or revoked token (give a valid token" in out, out
        code, out = cli("plan", "--json", token=alice, url=url)
        assert code == 0 and "waiting" in json.loads(out)
        code, out = cli("nodes", token=alice, url=url)
        assert code == 0 and "n1" in out and "n2" in out
    finally:
        service.stop()


def test_api_errors_carry_the_status_and_the_services_sentence(tmp_path):
    port = free_port()
    service = Service(write_service_files(tmp_path), port)
    service.start()
    try:
        with Client(service.url, TOKEN) as client:
            # in plain words for a person (before: "GET /jobs/nope: 404: no job 'nope'"); the
            # HTTP particulars stay on the error for programs
            with pytest.raises(ApiError, match="^no job 'nope'$") as info:
                client.job("nope")
            assert (info.value.status, info.value.method, info.value.path) == (
                404, "GET", "/jobs/nope")
            with Client(service.url, "not-a-token") as stranger:
                with pytest.raises(ApiError, match=r"invalid or revoked token \(give a valid "
                                                   r"token: --token, ANDREAS_TOKEN"):
                    stranger.jobs()
            with pytest.raises(ApiError, match="^epochs: Input should be greater") as info:
                client.submit(epochs=-1, command=["true"], deadline_s=60, profile="one")
            assert info.value.status == 422
            # a retried submission (the same key) is the same job, not a second one
            a = client.submit(epochs=1, command=["true"], deadline_s=60, profile="one",
                              idempotency_key="k1")
            b = client.submit(epochs=1, command=["true"], deadline_s=60, profile="one",
                              idempotency_key="k1")
            assert a.id == b.id and len(client.jobs()) == 1
    finally:
        service.stop()
