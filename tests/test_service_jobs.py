"""Real processes under the local executor: pause by a higher-pressure arrival, resume from the
checkpoint, the launcher's lock, and the job helper."""

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import TRAIN, epoch_lines, train_job, wait_for, write_service_files
from fastapi.testclient import TestClient

from andreas.executors.launch import LOCKED_EXIT
from andreas.service.api import create_app
from andreas.service.config import read_service_config

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = pytest.mark.service

ADMIN = {"Authorization": "Bearer admin-secret"}
ONE_NODE = "nodes:\n  - {name: n1, gpu_type: fast, gpus: 2}\n"


def test_higher_pressure_arrival_pauses_a_job_that_resumes_from_its_checkpoint(tmp_path):
    config = read_service_config(write_service_files(tmp_path, nodes=ONE_NODE))
    with TestClient(create_app(config, admin_token="admin-secret")) as client:
        # two relaxed jobs fill both GPUs (the profile "one" allows one GPU per job) ...
        # (long enough that both still run when the urgent one arrives, however slow the CI)
        relaxed = [client.post("/jobs", headers=ADMIN, json=train_job(
            60, deadline_s=3600, profile="one", priority=1)).json()["id"] for _ in range(2)]
        wait_for(lambda: all(client.get(f"/jobs/{j}", headers=ADMIN).json()["epochs_done"] >= 2
                             for j in relaxed), what="both relaxed jobs to make progress")
        assert all(client.get(f"/jobs/{j}", headers=ADMIN).json()["state"] == "running"
                   for j in relaxed)
        # ... then an urgent, heavily weighted job arrives: one of them must make room
        urgent = client.post("/jobs", headers=ADMIN, json=train_job(
            3, deadline_s=4, profile="one", weight=10.0)).json()["id"]
        wait_for(lambda: client.get(f"/jobs/{urgent}", headers=ADMIN).json()["state"]
                 in ("running", "completed"), what="the urgent job to start")
        wait_for(lambda: all(j["state"] == "completed"
                             for j in client.get("/jobs", headers=ADMIN).json()),
                 timeout=120, what="all jobs to complete")
        jobs = {j["id"]: j for j in client.get("/jobs", headers=ADMIN).json()}
        paused = [j for j in relaxed if jobs[j]["restarts"] >= 1]
        assert paused, "no relaxed job was paused for the urgent one"
        for job_id in relaxed + [urgent]:
            runs = client.get(f"/jobs/{job_id}/runs", headers=ADMIN).json()
            log = client.get(f"/jobs/{job_id}/logs", headers=ADMIN).text
            epochs = jobs[job_id]["epochs"]
            # every epoch done exactly once: none lost, none repeated past a checkpoint
            assert sorted(epoch_lines(log)) == list(range(1, int(epochs) + 1)), log
            for before, after in zip(runs, runs[1:]):
                assert before["stop_reason"] in ("pause", "move")
                assert after["epochs_at_start"] == before["epochs_at_end"]
                assert after["started_at"] >= before["ended_at"]  # never two at once
                if after["epochs_at_start"] > 0:
                    assert f"resumed from checkpoint at epoch {int(after['epochs_at_start'])}" \
                        in log


def test_launcher_refuses_a_second_copy_of_a_running_job(tmp_path):
    lock = tmp_path / "lock"
    first = subprocess.Popen([sys.executable, "-m", "andreas.executors.launch", "--run-dir",
                              str(tmp_path / "r1"), "--lock", str(lock), "--log",
                              str(tmp_path / "r1.log"), "--", sys.executable, "-c",
                              "import time; time.sleep(30)"], start_new_session=True)
    try:
        wait_for(lambda: (tmp_path / "r1" / "pid.json").exists(), what="the first copy")
        second = subprocess.run([sys.executable, "-m", "andreas.executors.launch", "--run-dir",
                                 str(tmp_path / "r2"), "--lock", str(lock), "--log",
                                 str(tmp_path / "r2.log"), "--", "true"], timeout=30)
        assert second.returncode == LOCKED_EXIT
        assert json.loads((tmp_path / "r2" / "exit.json").read_text())["returncode"] == LOCKED_EXIT
        assert not (tmp_path / "r2.log").exists()  # the command never started
    finally:
        os.killpg(first.pid, 15)
        first.wait(timeout=30)
    exit_info = json.loads((tmp_path / "r1" / "exit.json").read_text())
    assert exit_info["stop_requested"] is True


def test_job_helper_checkpoints_atomically_and_reports_progress_to_a_file(tmp_path):
    env = dict(os.environ, ANDREAS_CHECKPOINT_DIR=str(tmp_path / "ck"), ANDREAS_EPOCHS="3")
    env.pop("ANDREAS_PROGRESS_URL", None)
    out = subprocess.run([sys.executable, str(TRAIN), "--samples", "2000"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert epoch_lines(out.stdout) == [1, 2, 3]
    progress = json.loads((tmp_path / "ck" / "andreas-progress.json").read_text())
    assert progress == {"epochs_done": 3}
    assert not list((tmp_path / "ck").glob("*.tmp"))
    # started again with more epochs, it resumes where it stopped
    env["ANDREAS_EPOCHS"] = "5"
    out = subprocess.run([sys.executable, str(TRAIN), "--samples", "2000"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert "resumed from checkpoint at epoch 3" in out.stdout
    assert epoch_lines(out.stdout) == [4, 5]


def test_sigterm_stops_the_example_between_steps(tmp_path):
    env = dict(os.environ, ANDREAS_CHECKPOINT_DIR=str(tmp_path / "ck"), ANDREAS_EPOCHS="1000")
    proc = subprocess.Popen([sys.executable, str(TRAIN), "--samples", "20000"], env=env,
                            stdout=subprocess.PIPE, text=True)
    wait_for(lambda: (tmp_path / "ck" / "andreas-progress.json").exists(), what="an epoch")
    time.sleep(0.1)
    proc.terminate()
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "stop requested" in out
    done = json.loads((tmp_path / "ck" / "andreas-progress.json").read_text())["epochs_done"]
    assert done == max(epoch_lines(out)) < 1000


def test_pytorch_example_runs_under_the_service(tmp_path):
    try:
        import torch  # noqa: F401
    except ImportError:  # make test installs the CPU build when the machine carries its wheel
        import pytest

        pytest.skip("torch is not installed: the PyTorch example cannot run here")
    from conftest import EXAMPLES

    config = read_service_config(write_service_files(tmp_path))
    with TestClient(create_app(config, admin_token="admin-secret")) as client:
        job = client.post("/jobs", headers=ADMIN, json={
            "script": str(EXAMPLES / "train_pytorch.py"), "args": ["--samples", "1024"],
            "epochs": 3, "deadline_s": 600, "profile": "one"}).json()["id"]
        wait_for(lambda: client.get(f"/jobs/{job}", headers=ADMIN).json()["state"]
                 in ("completed", "failed"), timeout=120, what="the PyTorch job")
        shown = client.get(f"/jobs/{job}", headers=ADMIN).json()
        log = client.get(f"/jobs/{job}/logs", headers=ADMIN).text
        assert shown["state"] == "completed", log
        assert epoch_lines(log) == [1, 2, 3] and shown["epochs_done"] == 3
