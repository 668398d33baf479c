"""The Ray executor on a real local Ray cluster (`ray start --head`), with real jobs."""

import os
import signal
import sys

import psutil
import pytest
from conftest import (
    ENGINES,
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

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = [pytest.mark.service, ENGINES]

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


class _LongJob:
    """A training job submitted to `client`, long enough (400 epochs of about 0.2 s) that an
    orphan would outlive the tests' waits, and what the API says of it."""

    def __init__(self, client) -> None:
        self.client = client
        self.id = client.post("/jobs", headers=ADMIN, json=train_job(
            400, deadline_s=36000, profile="one", samples=80000)).json()["id"]

    def job(self) -> dict:
        return self.client.get(f"/jobs/{self.id}", headers=ADMIN).json()

    def runs(self) -> list[dict]:
        return self.client.get(f"/jobs/{self.id}/runs", headers=ADMIN).json()

    def log(self) -> str:
        return self.client.get(f"/jobs/{self.id}/logs", headers=ADMIN).text

    def resumed(self) -> bool:
        """Whether the last run resumed from the checkpoint and finished an epoch after it."""
        tail = self.log().split("--- run ")[-1]
        return "resumed from checkpoint" in tail and "done" in tail.split(
            "resumed from checkpoint")[-1]

    def cancel(self) -> None:
        self.client.post(f"/jobs/{self.id}/cancel", headers=ADMIN)
        wait_for(lambda: self.job()["state"] == "cancelled", timeout=60, what="cancellation")


def test_a_killed_ray_actor_takes_its_job_along_and_the_job_resumes(tmp_path, ray_cluster):
    """Ray gives a dead actor's GPUs to the next task: its job must not run on there unseen
    (it did, to its end, and its restarted copies found the job's lock taken). The job stops
    with its actor and resumes from its checkpoint in a new run; no epoch runs twice."""
    config = read_service_config(write_service_files(
        tmp_path, nodes="", executor="ray", extra=f"ray_address: '{ray_cluster}'\n"))
    with TestClient(create_app(config, admin_token="admin-secret")) as client:
        long = _LongJob(client)
        wait_for(lambda: long.job()["epochs_done"] >= 3 and all(processes(long.id)),
                 timeout=120, what="progress and live processes")
        launchers, trainers = processes(long.id)
        actor = psutil.Process(launchers[0]).ppid()  # the Ray worker that runs the actor
        os.kill(actor, signal.SIGKILL)
        wait_for(lambda: all_gone(launchers + trainers), timeout=30,
                 what="the dead actor's job to stop")
        # a new run resumed from the checkpoint and finished an epoch after it (a run started
        # while the old one was still stopping finds the lock taken, exits 75, and is retried)
        wait_for(long.resumed, timeout=120, what="a new run to resume and make progress")
        runs = long.runs()
        assert runs[0]["stop_reason"] == "crashed"  # a lost actor: restarted, not failed
        assert max(r["epochs_at_start"] for r in runs) >= 3
        long.cancel()
        text = long.log()
        assert "the process that started this job died" in text
        assert_each_epoch_once(text, None)


def _own_ray_cluster(workers: int):
    """A Ray cluster of this test's own: a head without GPUs and `workers` nodes of one
    `fast` GPU each, all on this machine (as Ray's own multi-node tests run them). Returns
    (address, session folder); stop it with _stop_ray_cluster."""
    import json
    import socket
    import subprocess

    ray = os.path.join(os.path.dirname(sys.executable), "ray")
    with socket.socket() as s:  # the kernel's ephemeral range: above Ray's worker ports
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    subprocess.run([ray, "start", "--head", f"--port={port}", "--num-cpus=1", "--num-gpus=0",
                    "--include-dashboard=false", "--disable-usage-stats"],
                   check=True, capture_output=True, timeout=180)
    gcs = next(p for p in psutil.process_iter(["cmdline"])
               if f"--gcs_server_port={port}" in " ".join(p.info["cmdline"] or []))
    log_dir = next(a for a in gcs.cmdline() if a.startswith("--log_dir="))
    session = os.path.dirname(log_dir.split("=", 1)[1])
    for _ in range(workers):
        subprocess.run([ray, "start", f"--address=127.0.0.1:{port}", "--num-cpus=1",
                        "--num-gpus=1", "--resources", json.dumps({"gpu_type:fast": 1}),
                        "--disable-usage-stats"], check=True, capture_output=True, timeout=180)
    return f"127.0.0.1:{port}", session


def _stop_ray_cluster(session: str) -> None:
    """Kill every process of the cluster whose session folder is `session` (`ray stop` would
    stop the shared test cluster too)."""
    mine = [p for p in psutil.process_iter(["cmdline"])
            if session in " ".join(p.info["cmdline"] or [])]
    for proc in mine:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(mine, timeout=30)


def test_a_lost_ray_node_takes_its_runs_along_and_they_resume_on_another(tmp_path):
    """A node of the Ray cluster dies whole (its raylet killed): the service stops planning on
    it, and the job that ran there resumes from its checkpoint on the other node; no epoch
    runs twice. (The service kept the dead node in its plan and started jobs there.)"""
    address, session = _own_ray_cluster(workers=2)
    try:
        config = read_service_config(write_service_files(
            tmp_path, nodes="", executor="ray", extra=f"ray_address: '{address}'\n"))
        with TestClient(create_app(config, admin_token="admin-secret")) as client:

            def nodes() -> list[str]:
                return [n["name"] for n in client.get("/nodes", headers=ADMIN).json()]

            assert len(nodes()) == 2
            long = _LongJob(client)
            wait_for(lambda: long.job()["epochs_done"] >= 3 and all(processes(long.id)),
                     timeout=120, what="progress and live processes")
            lost = long.runs()[0]["node"]
            launchers, trainers = processes(long.id)
            actor = psutil.Process(psutil.Process(launchers[0]).ppid())  # the actor's worker
            raylet = psutil.Process(actor.ppid())
            assert "raylet" in " ".join(raylet.cmdline())
            raylet.kill()  # the whole node: its raylet, and with it its workers
            wait_for(lambda: all_gone(launchers + trainers), timeout=120,
                     what="the lost node's job to stop")
            wait_for(lambda: nodes() and lost not in nodes(), timeout=120,
                     what="the lost node to leave the cluster")
            wait_for(long.resumed, timeout=180, what="a new run to resume and make progress")
            runs = long.runs()
            assert runs[0]["stop_reason"] == "crashed"
            assert runs[-1]["node"] != lost and max(r["epochs_at_start"] for r in runs) >= 3
            long.cancel()
            assert_each_epoch_once(long.log(), None)
    finally:
        _stop_ray_cluster(session)
