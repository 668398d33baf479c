"""A full disk under the service: clear refusals, nothing half-stored, recovery when space
returns; a read-only folder: a sentence at startup. The folders are small tmpfs of their own
(needs root and mount; skipped, saying so, where the machine does not allow it)."""

import errno
import os
import subprocess
import sys
from contextlib import contextmanager

import pytest
from conftest import wait_for, write_service_files

from andreas.service.sandbox import LocalService

BODY = {"command": ["sleep", "3600"], "epochs": 1, "deadline_s": 86400, "profile": "one"}


@contextmanager
def _tmpfs(folder, options):
    """A tmpfs mounted on `folder` with mount `options` for the block (skips the test, saying
    why, where the machine does not allow mounting)."""
    folder.mkdir(exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()}): run as root")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


@pytest.fixture
def small_disk(tmp_path):
    with _tmpfs(tmp_path / "disk", "size=64m") as disk:
        yield disk


def _fill(path):
    """Write zeros to `path` until the file system says it is full."""
    with open(path, "wb", buffering=0) as f:
        chunk = b"\0" * (1 << 20)
        while True:
            try:
                f.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                chunk = chunk[:len(chunk) // 2]
                if len(chunk) < 512:
                    return


def test_a_full_disk_refuses_clearly_and_recovers(small_disk, tmp_path):
    files = write_service_files(tmp_path / "files").parent
    service = LocalService(small_disk / "svc", (files / "cluster.yaml").read_text(),
                           (files / "profiles.csv").read_text(),
                           options="policy: fifo\nperiod_s: null\ngrace_s: 1\n")
    with service:
        first = service.post("/jobs", json=BODY)
        assert first.status_code == 201
        _fill(small_disk / "filler")
        refused = service.post("/jobs", json=BODY)
        assert refused.status_code == 503, refused.text
        assert "cannot write to its database: the disk is full" in refused.json()["detail"]
        assert refused.headers["Retry-After"]
        health = service.get("/healthz").json()
        assert health["status"] == "degraded" and health["data_dir"]["low"]
        listed = service.get("/jobs")  # reading still works, and nothing half-stored
        assert listed.status_code == 200 and [j["id"] for j in listed.json()] \
            == [first.json()["id"]]

        os.remove(small_disk / "filler")
        again = wait_for(lambda: (lambda r: r if r.status_code == 201 else None)(
            service.post("/jobs", json=BODY)), what="a submission once space is back")
        wait_for(lambda: {j["state"] for j in service.get("/jobs").json()} == {"running"},
                 what="both jobs to start")
        health = wait_for(lambda: (lambda h: h if h["status"] == "ok" else None)(
            service.get("/healthz").json()), what="a healthy service")
        assert not health["data_dir"]["low"] and again.json()["state"] in ("queued", "running")
        for job in service.get("/jobs").json():
            service.post(f"/jobs/{job['id']}/cancel")
        wait_for(lambda: all(j["state"] == "cancelled" for j in service.get("/jobs").json()),
                 what="the jobs to stop")


@pytest.mark.parametrize("where", ["data_dir", "database"])
def test_a_read_only_folder_stops_the_service_with_a_sentence(tmp_path, where):
    # a data folder the service cannot write to started the service anyway (the database
    # elsewhere): every job would then fail on its first log line. On SQLite's folder the
    # error said only "unable to open database file".
    with _tmpfs(tmp_path / "frozen", "size=1m,ro") as frozen:
        config = write_service_files(tmp_path / "files")
        lines = {"data_dir": f"data_dir: {frozen}\n",
                 "database": f"data_dir: state\ndatabase_url: sqlite:///{frozen}/andreas.db\n"}
        config.write_text(config.read_text().replace("data_dir: state\n", lines[where]))
        served = subprocess.run([sys.executable, "-m", "andreas", "serve", "--config",
                                 str(config), "--port", "0"],
                                capture_output=True, text=True, timeout=120)
        assert served.returncode != 0
        assert f"cannot write to {frozen}" in served.stderr
        assert "Read-only file system" in served.stderr, served.stderr
        assert "Traceback" not in served.stderr


def test_a_data_folder_turned_read_only_keeps_jobs_queued_and_says_why(tmp_path):
    """The data folder (logs, checkpoints, run folders) turns read-only while the service
    runs, the database elsewhere: a job that should start stays queued, not failed, with the
    reason on the job and on /healthz; it starts once the folder is writable again."""
    files = write_service_files(tmp_path / "files").parent
    with _tmpfs(tmp_path / "data", "size=16m") as data:
        service = LocalService(tmp_path / "svc", (files / "cluster.yaml").read_text(),
                               (files / "profiles.csv").read_text(),
                               options=f"policy: fifo\nperiod_s: null\ngrace_s: 1\n"
                                       f"data_dir: {data}\n",
                               database_url=f"sqlite:///{tmp_path}/andreas.db")
        with service:
            remounted = subprocess.run(["mount", "-o", "remount,ro", str(data)],
                                       capture_output=True, text=True)
            assert remounted.returncode == 0, remounted.stderr
            job_id = service.post("/jobs", json=BODY).json()["id"]
            job = wait_for(lambda: (lambda j: j if "read-only" in (j["reason"] or "").lower()
                                    else None)(service.get(f"/jobs/{job_id}").json()),
                           what="the job to say why it waits")
            assert job["state"] == "queued" and str(data) in job["reason"], job
            assert job["first_started_at"] is None and job["measured"]["energy_cost"] == 0, job
            runs = service.get(f"/jobs/{job_id}/runs").json()  # none began: none took time
            assert all(r["stop_reason"] == "data-folder" and r["ended_at"] == r["started_at"]
                       for r in runs), runs
            health = service.get("/healthz").json()
            assert health["status"] == "degraded" and str(data) in health["scheduler"], health

            subprocess.run(["mount", "-o", "remount,rw", str(data)], check=True)
            wait_for(lambda: service.get(f"/jobs/{job_id}").json()["state"] == "running",
                     what="the job to start once the folder is writable", timeout=90)
            service.post(f"/jobs/{job_id}/cancel")
            wait_for(lambda: service.get(f"/jobs/{job_id}").json()["state"] == "cancelled",
                     what="the job to stop")
