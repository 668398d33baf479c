"""Per-job controls in the live service, with real processes: a non-preemptible job is never
paused for an urgent one, a wall-time limit stops a job as `timeout`, a hard deadline the
forecast misses is refused at submission, and the controls show in the API."""

import pytest
from conftest import train_job, wait_for, write_service_files
from fastapi.testclient import TestClient

from andreas.service.api import create_app
from andreas.service.config import read_service_config

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = pytest.mark.service

ADMIN = {"Authorization": "Bearer admin-secret"}
ONE_NODE = "nodes:\n  - {name: n1, gpu_type: fast, gpus: 2}\n"


def get(client, job_id):
    return client.get(f"/jobs/{job_id}", headers=ADMIN).json()


def test_an_urgent_arrival_does_not_pause_non_preemptible_jobs(tmp_path):
    """test_service_jobs' case (an urgent job pauses a relaxed one), with relaxed jobs that
    may not be paused: the urgent job waits for one to finish."""
    config = read_service_config(write_service_files(tmp_path, nodes=ONE_NODE))
    with TestClient(create_app(config, admin_token="admin-secret")) as client:
        relaxed = [client.post("/jobs", headers=ADMIN, json=train_job(
            30, deadline_s=3600, profile="one", priority=1, preemptible=False)).json()["id"]
            for _ in range(2)]
        wait_for(lambda: all(get(client, j)["epochs_done"] >= 2 for j in relaxed),
                 what="both relaxed jobs to make progress")
        urgent = client.post("/jobs", headers=ADMIN, json=train_job(
            3, deadline_s=4, profile="one", weight=10.0)).json()["id"]
        wait_for(lambda: all(j["state"] == "completed"
                             for j in client.get("/jobs", headers=ADMIN).json()),
                 timeout=180, what="all jobs to complete")
        for job_id in relaxed:
            runs = client.get(f"/jobs/{job_id}/runs", headers=ADMIN).json()
            assert len(runs) == 1 and runs[0]["stop_reason"] is None, runs
            assert get(client, job_id)["preemptible"] is False
        first_end = min(get(client, j)["completed_at"] for j in relaxed)
        assert get(client, urgent)["first_started_at"] >= first_end - 1e-6


def test_a_wall_time_limit_stops_the_job_as_timeout(tmp_path):
    config = read_service_config(write_service_files(tmp_path))
    with TestClient(create_app(config, admin_token="admin-secret")) as client:
        r = client.post("/jobs", headers=ADMIN, json={
            "command": ["sleep", "600"], "epochs": 1, "deadline_s": 3600, "profile": "one",
            "max_runtime_s": 1.5})
        assert r.status_code == 201 and r.json()["max_runtime_s"] == 1.5
        job_id = r.json()["id"]
        job = wait_for(lambda: (lambda j: j if j["state"] == "timeout" else None)(
            get(client, job_id)), timeout=60, what="the time-out")
        assert "wall-time limit of 1.5 s" in job["message"] and job["completed_at"]
        runs = client.get(f"/jobs/{job_id}/runs", headers=ADMIN).json()
        assert runs[-1]["stop_reason"] == "timeout"
        ran = sum(r["ended_at"] - r["started_at"] for r in runs)
        assert ran >= 1.5
        listed = client.get("/jobs", params={"state": "timeout"}, headers=ADMIN).json()
        assert [j["id"] for j in listed] == [job_id]


def test_a_hard_deadline_the_forecast_misses_is_refused_with_the_forecast(tmp_path):
    config = read_service_config(write_service_files(tmp_path))
    with TestClient(create_app(config, admin_token="admin-secret", run_scheduler=False)) as c:
        # 1000 epochs at 0.2 s each at best: 200 s, due in 60 s
        late = {"command": ["true"], "epochs": 1000, "deadline_s": 60, "profile": "mlp"}
        r = c.post("/jobs", headers=ADMIN, json={**late, "hard_deadline": True})
        assert r.status_code == 409, r.text
        detail = r.json()["detail"]
        assert detail.startswith("hard_deadline: the forecast ends the job at ")
        assert "after its due date" in detail and "not accepted" in detail
        assert c.get("/jobs", headers=ADMIN).json() == []  # nothing stored
        # in a batch, the whole batch is refused and the culprit named
        r = c.post("/jobs/batch", headers=ADMIN,
                   json=[{**late, "deadline_s": 600}, {**late, "hard_deadline": True}])
        assert r.status_code == 409 and r.json()["detail"].startswith("job [1]: hard_deadline")
        assert c.get("/jobs", headers=ADMIN).json() == []
        # a job that can make it is accepted; without the flag the late one is too
        ok = c.post("/jobs", headers=ADMIN, json={**late, "deadline_s": 600,
                                                  "hard_deadline": True})
        assert ok.status_code == 201 and ok.json()["hard_deadline"] is True
        assert c.post("/jobs", headers=ADMIN, json=late).status_code == 201


def test_the_controls_are_stored_and_shown(tmp_path, database_url):
    config = read_service_config(write_service_files(tmp_path)).with_database(database_url)
    with TestClient(create_app(config, admin_token="admin-secret", run_scheduler=False)) as c:
        body = {**train_job(2), "preemptible": False, "start_asap": True, "max_runtime_s": 60}
        job = c.post("/jobs", headers=ADMIN, json=body).json()
        assert (job["preemptible"], job["start_asap"], job["max_runtime_s"],
                job["hard_deadline"]) == (False, True, 60, False)
        plain = c.post("/jobs", headers=ADMIN, json=train_job(2)).json()
        assert (plain["preemptible"], plain["start_asap"], plain["max_runtime_s"]) == \
            (True, False, None)
        for bad in ({"max_runtime_s": 0}, {"max_runtime_s": -1}, {"preemptible": "maybe"}):
            assert c.post("/jobs", headers=ADMIN, json={**train_job(2), **bad}).status_code \
                == 422
