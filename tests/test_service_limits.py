"""Input limits: non-finite and absurd numbers, bad text, huge bodies and log tails are refused
or bounded with a clear answer, never a 500 (issue 21)."""

import json

import pytest
from conftest import write_service_files
from fastapi.testclient import TestClient

from andreas.service.api import create_app
from andreas.service.config import ScenarioError, read_service_config
from andreas.service.jobs import read_tail

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = pytest.mark.service

ADMIN = {"Authorization": "Bearer admin-secret", "Content-Type": "application/json"}
GOOD = {"command": ["true"], "epochs": 3, "deadline_s": 600, "profile": "mlp"}


@pytest.fixture
def client(tmp_path):
    path = write_service_files(tmp_path, extra="max_body_bytes: 200000\n")
    config = read_service_config(path)
    with TestClient(create_app(config, admin_token="admin-secret", run_scheduler=False)) as c:
        yield c


def post(client, body: dict | list, path="/jobs"):
    # json.dumps writes NaN and Infinity as such, as a careless client would
    return client.post(path, headers=ADMIN, content=json.dumps(body))


@pytest.mark.parametrize("change, field", [
    ({"epochs": float("inf")}, "epochs"),
    ({"epochs": 1e308}, "epochs"),
    ({"epochs": 1e-7}, "epochs"),
    ({"epochs": float("nan")}, "epochs"),
    ({"deadline_s": None, "due_date": float("-inf")}, "due_date"),
    ({"deadline_s": None, "due_date": float("nan")}, "due_date"),
    ({"deadline_s": None, "due_date": 1e15}, "due_date"),
    ({"deadline_s": 1e300}, "deadline_s"),
    ({"weight": 1e308}, "weight"),
    ({"command": ["echo", "a\x00b"]}, "command.1"),
    ({"command": ["echo", "\ud800"]}, "command.1"),
    ({"command": ["x" * 5000]}, "command.0"),
    ({"command": ["echo"] * 1001}, "command"),
])
def test_bad_numbers_and_text_get_422_naming_the_field(client, change, field):
    body = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    r = post(client, body)
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith(field), r.json()


def test_a_long_last_word_makes_a_name_of_200_characters(client):
    r = post(client, {**GOOD, "command": ["echo", "w" * 300]})
    assert r.status_code == 201, r.text
    assert r.json()["name"] == "w" * 200


def test_a_body_over_the_limit_gets_413(client):
    big = {**GOOD, "command": ["echo"] + ["a" * 4000] * 60}  # about 240 kB
    r = post(client, big)
    assert r.status_code == 413 and "request body over 200000 bytes" in r.json()["detail"]
    assert post(client, [GOOD] * 1001, "/jobs/batch").status_code in (413, 422)
    assert client.get("/jobs", headers=ADMIN).json() == []  # nothing half-accepted


def test_log_tails_are_read_from_the_end(tmp_path):
    log = tmp_path / "run.log"
    log.write_bytes(b"x" * 1_000_000 + "tail é".encode())
    assert read_tail(log, 7) == "tail é"
    assert read_tail(tmp_path / "none.log", 10) == ""


def test_every_response_carries_security_headers(client):
    for r in (client.get("/healthz"), client.get("/jobs"), post(client, {"epochs": "x"}),
              client.get("/jobs", headers=ADMIN)):
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["x-frame-options"] == "DENY"
        assert r.headers["cache-control"] == "no-store"
        assert "default-src 'none'" in r.headers["content-security-policy"]
    assert "access-control-allow-origin" not in client.get(
        "/jobs", headers={**ADMIN, "Origin": "https://evil.example"}).headers  # no CORS
    docs = client.get("/docs")  # Swagger UI loads its own files, from here only
    assert docs.status_code == 200
    assert "script-src 'self' 'unsafe-inline'" in docs.headers["content-security-policy"]
    assert "http" not in docs.text.replace("/openapi.json", "")  # no CDN
    assert client.get("/docs/static/swagger-ui-bundle.js").status_code == 200


def test_failed_logins_from_one_address_are_rate_limited(tmp_path):
    from andreas.service.ratelimit import FailureLimiter

    # the limiter by hand, on its own clock
    now = [0.0]
    limiter = FailureLimiter(max_failures=3, window_s=10.0, clock=lambda: now[0])
    for t in (0.0, 1.0, 2.0):
        now[0] = t
        assert limiter.retry_after("a") == 0.0
        limiter.failed("a")
    assert limiter.retry_after("a") == pytest.approx(8.0)  # until the failure at 0 s expires
    assert limiter.retry_after("b") == 0.0  # another address is not affected
    now[0] = 10.5
    assert limiter.retry_after("a") == 0.0
    # the service: a window long enough that a loaded machine cannot make this test flaky
    path = write_service_files(tmp_path, extra="auth_max_failures: 5\nauth_window_s: 3600\n")
    config = read_service_config(path)
    with TestClient(create_app(config, admin_token="admin-secret", run_scheduler=False)) as c:
        assert c.get("/jobs", headers=ADMIN).status_code == 200  # successes do not count
        codes = [c.get("/jobs", headers={"Authorization": f"Bearer guess{i}"}).status_code
                 for i in range(5)]
        assert codes == [401] * 5
        blocked = c.get("/jobs", headers={"Authorization": "Bearer guess5"})
        assert blocked.status_code == 429 and int(blocked.headers["retry-after"]) > 3000
        assert "too many failed logins" in blocked.json()["detail"]
        # a valid token from the same address is never locked out (before: 429 for an hour,
        # every user and job behind one address with it)
        assert c.get("/jobs", headers=ADMIN).status_code == 200
        assert c.get("/healthz").status_code == 200  # no token needed, not limited


def test_the_schema_documents_the_error_answers_the_api_gives(client):
    from andreas.service.schemas import ErrorOut

    spec = client.app.openapi()
    for path, operations in spec["paths"].items():
        for method, op in operations.items():
            for code in ("401", "422"):
                ref = op["responses"][code]["content"]["application/json"]["schema"]["$ref"]
                assert ref.endswith("/ErrorOut"), (method, path, code)
    for r in (post(client, {"epochs": float("nan")}), client.get("/jobs"),
              client.get("/jobs/none", headers=ADMIN)):
        assert r.status_code in (401, 404, 422)
        ErrorOut.model_validate(r.json())  # the documented shape: {"detail": "a sentence"}


def test_unknown_state_filters_and_malformed_json_get_plain_sentences(client):
    r = client.get("/jobs?state=bogus", headers=ADMIN)
    assert r.status_code == 422 and r.json()["detail"].startswith("query.state:")
    assert client.get("/jobs?state=queued", headers=ADMIN).status_code == 200
    r = client.post("/jobs", headers=ADMIN, content='{"epochs": 3,')
    assert r.status_code == 422
    assert r.json()["detail"].startswith("the request body is not valid JSON (at character")
    plain = client.post("/jobs", headers={"Authorization": ADMIN["Authorization"]},
                        content=json.dumps(GOOD))  # no Content-Type
    assert plain.status_code == 422
    assert "send it with Content-Type: application/json" in plain.json()["detail"]


def test_a_retried_submission_with_the_same_idempotency_key_makes_one_job(tmp_path,
                                                                          database_url):
    config = read_service_config(write_service_files(tmp_path)).with_database(database_url)
    with TestClient(create_app(config, admin_token="admin-secret", run_scheduler=False)) as c:
        key = {**ADMIN, "Idempotency-Key": "retry-1"}
        first = c.post("/jobs", headers=key, json=GOOD)
        again = c.post("/jobs", headers=key, json=GOOD)
        assert first.status_code == 201 and again.status_code == 200
        assert again.json()["id"] == first.json()["id"]
        other = c.post("/jobs", headers={**ADMIN, "Idempotency-Key": "retry-2"}, json=GOOD)
        assert other.status_code == 201 and other.json()["id"] != first.json()["id"]
        # keys are per user: another user's same key makes that user's own job
        bob = {"Authorization": "Bearer " + c.post("/tokens", headers=ADMIN, json={
            "user": "bob"}).json()["token"], "Idempotency-Key": "retry-1"}
        assert c.post("/jobs", headers=bob, json=GOOD).status_code == 201
        assert len(c.get("/jobs", headers=ADMIN).json()) == 3
        bad = c.post("/jobs", headers={**ADMIN, "Idempotency-Key": "x" * 201}, json=GOOD)
        assert bad.status_code == 422 and "idempotency-key" in bad.json()["detail"]


def test_retries_that_arrive_together_in_one_group_commit_make_one_job(tmp_path):
    """Submissions share a transaction (group commit) and check their key only through the
    unique index: a group holding the same key twice fails as a whole, is committed piece by
    piece, and every retry gets the one job made."""
    import asyncio
    import threading
    import time

    from andreas.service.jobs import accept, validate_submission
    from andreas.service.schemas import JobSubmit
    from andreas.service.states import JobState

    config = read_service_config(write_service_files(tmp_path))
    with TestClient(create_app(config, admin_token="admin-secret", run_scheduler=False)) as c:
        svc = c.app.state.services
        user = svc.store.user_for("admin-secret")
        holding, release = threading.Event(), threading.Event()

        def hold(s):  # keeps the writer busy, so the submissions queue into one group
            holding.set()
            release.wait(timeout=30)

        async def submit_all():
            busy = svc.store.group.submit(hold)
            assert holding.wait(timeout=30)
            rows = [validate_submission(config, JobSubmit(**GOOD), 0.0, user.id)
                    for _ in range(4)]
            calls = [asyncio.ensure_future(accept(svc, [row], user,
                                                  "same-key" if i < 3 else "other-key"))
                     for i, row in enumerate(rows)]
            deadline = time.monotonic() + 30
            while svc.store.group._queue.qsize() < len(calls) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert svc.store.group._queue.qsize() == len(calls)
            release.set()
            busy.result(timeout=30)
            return await asyncio.gather(*calls)

        answers = asyncio.run(submit_all())
        same = [(shown[0].id, new) for shown, new in answers[:3]]
        assert len({job_id for job_id, _ in same}) == 1
        assert sorted(new for _, new in same) == [False, False, True]
        assert answers[3][1] is True and answers[3][0][0].id != same[0][0]
        listed = c.get("/jobs", headers=ADMIN).json()
        assert sorted(j["id"] for j in listed) == sorted({same[0][0], answers[3][0][0].id})
        assert all(j["state"] == JobState.QUEUED for j in listed)


def test_scripts_and_workdirs_stay_inside_the_allowed_roots(tmp_path):
    import os

    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    (allowed / "proj").mkdir(parents=True)
    outside.mkdir()
    (allowed / "proj" / "train.py").write_text("print('ok')\n")
    (outside / "evil.py").write_text("print('evil')\n")
    os.symlink(outside / "evil.py", allowed / "proj" / "link.py")  # a link that leads out
    path = write_service_files(tmp_path / "svc", extra=f"allowed_roots: [{allowed}]\n")
    config = read_service_config(path)
    assert config.allowed_roots == (allowed.resolve(),)
    with TestClient(create_app(config, admin_token="admin-secret", run_scheduler=False)) as c:
        def submit(**fields):
            return c.post("/jobs", headers=ADMIN, json={"epochs": 1, "deadline_s": 60,
                                                        "profile": "one", **fields})

        assert submit(script=str(allowed / "proj" / "train.py")).status_code == 201
        assert submit(script="train.py", workdir=str(allowed / "proj")).status_code == 201
        for fields in ({"script": str(outside / "evil.py")},
                       {"script": str(allowed / "proj" / "link.py")},
                       {"script": str(allowed / "proj" / ".." / ".." / "outside" / "evil.py")},
                       {"command": ["true"], "workdir": str(outside)}):
            r = submit(**fields)
            assert r.status_code == 400, (fields, r.text)
            assert "is outside the folders jobs may use" in r.json()["detail"]
    bad = write_service_files(tmp_path / "bad", extra="allowed_roots: [/no/such/folder]\n")
    with pytest.raises(ScenarioError, match=r"allowed_roots\[0\]"):
        read_service_config(bad)
