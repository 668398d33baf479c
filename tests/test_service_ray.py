"""The Ray executor on a real local Ray cluster (`ray start --head`), with real jobs."""

import os
import signal
import sys

import psutil
from conftest import (
    all_gone,
    assert_each_epoch_once,
    epoch_lines,
    processes,
    train_job,
    wait_for,
    write_service_files,
)
from fastapi.testclient import TestClient

from andreas.service.api import create_app
from andreas.service.config import read_service_config

ADMIN = {"Authorization": "Bearer admin-secret"}


def test_ray_executor_runs_places_and_cancels_real_jobs(tmp_path, ray_cluster):
    config = read_service_config(write_service_files(
        tmp_path, nodes="", executor="ray", extra=f"ray_address: '{ray_cluster}'\n"))
    with TestClient(create_app(config, admin_token="admin-secret")) as client:
        nodes = client.get("/nodes", headers=ADMIN).json()
        assert [(n["gpu_type"], n["gpus"]) for n in nodes] == [("fast", 2)]
        show_env = client.post("/jobs", headers=ADMIN, json={
            "command": [sys.executable, "-c", "import os; print('GPUS=' + "
                        "os.environ['CUDA_VISIBLE_DEVICES'], 'JOB=' + "
                        "os.environ['ANDREAS_JOB_ID'])"],
            "epochs": 1, "deadline_s": 600, "profile": "one"}).json()["id"]
        train = client.post("/jobs", headers=ADMIN, json=train_job(3, profile="one")).json()["id"]
        wait_for(lambda: all(client.get(f"/jobs/{j}", headers=ADMIN).json()["state"] ==
                             "completed" for j in (show_env, train)), timeout=120,
                 what="both Ray jobs to complete")
        log = client.get(f"/jobs/{show_env}/logs", headers=ADMIN).text
        gpus = log.split("GPUS=")[1].split()[0]
        assert gpus in ("0", "1") and f"JOB={show_env}" in log  # Ray handed it one GPU
        assert epoch_lines(client.get(f"/jobs/{train}/logs", headers=ADMIN).text) == [1, 2, 3]
        runs = client.get(f"/jobs/{train}/runs", headers=ADMIN).json()
        assert runs[0]["node"] == nodes[0]["name"] and runs[0]["exit_code"] == 0

        long = client.post("/jobs", headers=ADMIN, json=train_job(500, profile="one")).json()["id"]
        wait_for(lambda: client.get(f"/jobs/{long}", headers=ADMIN).json()["epochs_done"] >= 1,
                 timeout=60, what="the long job to make progress")
        client.post(f"/jobs/{long}/cancel", headers=ADMIN)
        wait_for(lambda: client.get(f"/jobs/{long}", headers=ADMIN).json()["state"] ==
                 "cancelled", timeout=60, what="cancellation")
        run = client.get(f"/jobs/{long}/runs", headers=ADMIN).json()[-1]
        assert run["stop_reason"] == "cancel" and run["state"] == "ended"
    import ray

    ray.init(address=ray_cluster, namespace="andreas", logging_level="ERROR")
    try:
        from ray.util import list_named_actors

        assert list_named_actors() == []  # every run's actor (and its GPUs) was released
    finally:
        ray.shutdown()


def test_a_killed_ray_actor_takes_its_job_along_and_the_job_resumes(tmp_path, ray_cluster):
    """Ray gives a dead actor's GPUs to the next task: its job must not run on there unseen
    (it did, to its end, and its restarted copies found the job's lock taken). The job stops
    with its actor and resumes from its checkpoint in a new run; no epoch runs twice."""
    config = read_service_config(write_service_files(
        tmp_path, nodes="", executor="ray", extra=f"ray_address: '{ray_cluster}'\n"))
    with TestClient(create_app(config, admin_token="admin-secret")) as client:
        # long enough (400 epochs of about 0.2 s) that an orphan would outlive the waits below
        job_id = client.post("/jobs", headers=ADMIN, json=train_job(
            400, deadline_s=36000, profile="one", samples=80000)).json()["id"]

        def job():
            return client.get(f"/jobs/{job_id}", headers=ADMIN).json()

        def runs():
            return client.get(f"/jobs/{job_id}/runs", headers=ADMIN).json()

        wait_for(lambda: job()["epochs_done"] >= 3 and all(processes(job_id)), timeout=120,
                 what="progress and live processes")
        launchers, trainers = processes(job_id)
        actor = psutil.Process(launchers[0]).ppid()  # the Ray worker that runs the actor
        os.kill(actor, signal.SIGKILL)
        wait_for(lambda: all_gone(launchers + trainers), timeout=30,
                 what="the dead actor's job to stop")

        def log() -> str:
            return client.get(f"/jobs/{job_id}/logs", headers=ADMIN).text

        # a new run resumed from the checkpoint and finished an epoch after it (a run started
        # while the old one was still stopping finds the lock taken, exits 75, and is retried)
        wait_for(lambda: (lambda tail: "resumed from checkpoint" in tail
                          and "done" in tail.split("resumed from checkpoint")[-1])(
                              log().split("--- run ")[-1]),
                 timeout=120, what="a new run to resume and make progress")
        assert runs()[0]["stop_reason"] == "crashed"  # a lost actor: restarted, not failed
        assert max(r["epochs_at_start"] for r in runs()) >= 3
        client.post(f"/jobs/{job_id}/cancel", headers=ADMIN)
        wait_for(lambda: job()["state"] == "cancelled", timeout=60, what="cancellation")
        text = log()
        assert "the process that started this job died" in text
        assert_each_epoch_once(text, None)
