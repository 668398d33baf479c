"""PostgreSQL stopped while a job runs, then started again (a real server of its own): the API
answers 503 with a sentence meanwhile, /healthz says so, the job runs on, and afterwards the
service plans again and nothing is lost."""

import psutil
import pytest
from conftest import psycopg_url, train_job, wait_for, write_service_files
from fastapi.testclient import TestClient

from andreas.service.api import create_app
from andreas.service.config import read_service_config

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = pytest.mark.service

ADMIN = {"Authorization": "Bearer admin-secret"}


@pytest.fixture
def own_postgres(tmp_path):
    import pgserver

    data = tmp_path / "pg"
    server = pgserver.get_server(data, cleanup_mode="stop")
    server.psql("CREATE DATABASE outage;")
    yield server
    server.cleanup()
    # pgserver stops only the server it started; the test started it a second time, so that
    # one is stopped here (it outlived every test run before)
    left = [p for p in psutil.process_iter(["cmdline"])
            if str(data) in " ".join(p.info["cmdline"] or [])]
    for p in left:
        p.terminate()
    psutil.wait_procs(left, timeout=30)


def test_the_service_rides_out_a_database_outage(tmp_path, own_postgres):
    url = psycopg_url(own_postgres, "outage")
    config = read_service_config(write_service_files(tmp_path / "svc")).with_database(url)
    with TestClient(create_app(config, admin_token="admin-secret")) as client:
        job = client.post("/jobs", headers=ADMIN, json=train_job(
            40, deadline_s=3600, samples=80000)).json()["id"]
        wait_for(lambda: client.get(f"/jobs/{job}", headers=ADMIN).json()["epochs_done"] >= 2,
                 timeout=120, what="the job to run")
        pid = client.get(f"/jobs/{job}/runs", headers=ADMIN).json()[-1]
        own_postgres.cleanup()  # PostgreSQL stops
        r = client.get("/jobs", headers=ADMIN)
        assert r.status_code == 503 and r.headers["retry-after"] == "5"
        assert r.json()["detail"].startswith("the database is unreachable")
        health = client.get("/healthz")
        assert health.status_code == 503 and health.json()["database"].startswith("error")
        launchers = [p for p in psutil.process_iter(["cmdline"])
                     if f"/jobs/{job}/" in " ".join(p.info["cmdline"] or [])]
        assert launchers and all(p.is_running() for p in launchers)  # the job runs on
        own_postgres.ensure_postgres_running()  # and starts again
        wait_for(lambda: client.get("/healthz").status_code == 200, timeout=60,
                 what="the service to see the database again")
        done = wait_for(lambda: (lambda j: j if j["state"] in ("completed", "failed") else None)(
            client.get(f"/jobs/{job}", headers=ADMIN).json()), timeout=180, what="completion")
        assert done["state"] == "completed" and done["epochs_done"] == 40
        assert pid["id"] in [r["id"] for r in client.get(f"/jobs/{job}/runs",
                                                         headers=ADMIN).json()]
