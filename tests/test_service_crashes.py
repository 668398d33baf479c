"""A job survives the death of its own processes (real processes, local executor): a training
process killed from outside (the OOM killer, an operator) restarts from its checkpoint, up to
max_retries; a killed launcher takes its training process with it, so no orphan runs on beside
the copy the service starts next; every epoch runs once."""

import os
import signal

import pytest
from conftest import (
    all_gone,
    assert_each_epoch_once,
    processes,
    train_job,
    wait_for,
    write_service_files,
)
from fastapi.testclient import TestClient

from andreas.service.api import create_app
from andreas.service.config import read_service_config

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = pytest.mark.service

ADMIN = {"Authorization": "Bearer admin-secret"}
ONE_GPU = "nodes:\n  - {name: n1, gpu_type: fast, gpus: 1}\n"


def start_job(client, min_epochs: int) -> str:
    """A 12-epoch job, once it has done `min_epochs` and its processes are alive."""
    job_id = client.post("/jobs", headers=ADMIN, json=train_job(
        12, deadline_s=3600, profile="one", samples=80000)).json()["id"]
    wait_for(lambda: client.get(f"/jobs/{job_id}", headers=ADMIN).json()["epochs_done"]
             >= min_epochs and all(processes(job_id)), timeout=120,
             what="progress and live processes")
    return job_id


def test_a_killed_training_process_restarts_from_its_checkpoint(tmp_path):
    config = read_service_config(write_service_files(tmp_path, nodes=ONE_GPU))
    with TestClient(create_app(config, admin_token="admin-secret")) as client:
        job_id = start_job(client, 3)
        for pid in processes(job_id)[1]:
            os.kill(pid, signal.SIGKILL)
        job = wait_for(lambda: (lambda j: j if j["state"] in ("completed", "failed") else None)(
            client.get(f"/jobs/{job_id}", headers=ADMIN).json()), timeout=180,
            what="the job to end")
        assert job["state"] == "completed", job
        runs = client.get(f"/jobs/{job_id}/runs", headers=ADMIN).json()
        assert runs[0]["stop_reason"] == "crashed" and len(runs) >= 2
        log = client.get(f"/jobs/{job_id}/logs", headers=ADMIN).text
        assert "resumed from checkpoint" in log
        assert_each_epoch_once(log, 12)


def test_a_job_killed_more_often_than_max_retries_fails_with_the_reason(tmp_path):
    config = read_service_config(write_service_files(tmp_path, nodes=ONE_GPU,
                                                     extra="max_retries: 0\n"))
    with TestClient(create_app(config, admin_token="admin-secret")) as client:
        job_id = start_job(client, 1)
        for pid in processes(job_id)[1]:
            os.kill(pid, signal.SIGKILL)
        job = wait_for(lambda: (lambda j: j if j["state"] == "failed" else None)(
            client.get(f"/jobs/{job_id}", headers=ADMIN).json()), timeout=60, what="failure")
        assert "killed by signal 9" in job["message"] and "max_retries (0)" in job["message"]


def test_a_killed_launcher_leaves_no_orphan_and_the_job_runs_once(tmp_path):
    config = read_service_config(write_service_files(tmp_path, nodes=ONE_GPU))
    with TestClient(create_app(config, admin_token="admin-secret")) as client:
        job_id = start_job(client, 3)
        launchers, trainers = processes(job_id)
        for pid in launchers:
            os.kill(pid, signal.SIGKILL)
        # the training process dies with its launcher: it does not run on, unsupervised
        wait_for(lambda: all_gone(trainers), timeout=30,
                 what="the orphaned training process to be gone")
        job = wait_for(lambda: (lambda j: j if j["state"] in ("completed", "failed") else None)(
            client.get(f"/jobs/{job_id}", headers=ADMIN).json()), timeout=180,
            what="the job to end")
        assert job["state"] == "completed", job
        assert_each_epoch_once(client.get(f"/jobs/{job_id}/logs", headers=ADMIN).text, 12)
        runs = client.get(f"/jobs/{job_id}/runs", headers=ADMIN).json()
        for before, after in zip(runs, runs[1:]):
            assert after["started_at"] >= before["ended_at"]  # never two copies at once
