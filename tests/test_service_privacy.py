"""A user never sees another user's job ids (issue 21): /nodes shows them as busy, /metrics has
no per-job series, and progress with a bad token answers the same for any job id."""

import pytest
from conftest import train_job, wait_for, write_service_files
from fastapi.testclient import TestClient

from andreas.service.api import create_app
from andreas.service.config import read_service_config

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = pytest.mark.service

ADMIN = {"Authorization": "Bearer admin-secret"}


def test_other_users_jobs_stay_private(tmp_path):
    config = read_service_config(write_service_files(tmp_path))
    with TestClient(create_app(config, admin_token="admin-secret")) as client:
        tokens = {u: client.post("/tokens", headers=ADMIN, json={"user": u}).json()["token"]
                  for u in ("alice", "bob")}
        alice = {"Authorization": f"Bearer {tokens['alice']}"}
        bob = {"Authorization": f"Bearer {tokens['bob']}"}
        job = client.post("/jobs", headers=alice, json=train_job(60)).json()["id"]
        wait_for(lambda: client.get(f"/jobs/{job}", headers=alice).json()["state"] == "running",
                 what="alice's job to run")

        def holders(headers):
            return {v for n in client.get("/nodes", headers=headers).json()
                    for v in n["busy"].values()}

        assert holders(alice) == {job} and holders(ADMIN) == {job}
        assert holders(bob) == {"busy"}
        assert job not in client.get("/metrics", headers=bob).text
        assert job not in client.get("/plan", headers=bob).text
        # progress with a token that may not report: the same answer whether the job exists
        for target in (job, "job-doesnotexist"):
            r = client.post(f"/jobs/{target}/progress", headers=bob, json={"epochs_done": 1})
            assert r.status_code == 403, r.text
            assert r.json()["detail"] == f"this token may not report progress for job {target!r}"
        assert client.post("/jobs/job-doesnotexist/progress", headers=ADMIN,
                           json={"epochs_done": 1}).status_code == 404
        client.post(f"/jobs/{job}/cancel", headers=alice)
        wait_for(lambda: client.get(f"/jobs/{job}", headers=alice).json()["state"]
                 == "cancelled", what="the job to be cancelled")
