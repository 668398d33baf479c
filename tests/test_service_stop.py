"""Stopping the service: by default its jobs run on and the next start re-adopts them (as
slurmd's jobs outlive slurmctld); `andreas serve --stop-jobs` stops every running job on the
way out, each resuming from its checkpoint at the next start."""

import pytest
from conftest import all_gone, processes, wait_for, write_service_files

from andreas.service.sandbox import LocalService

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = pytest.mark.service

BODY = {"command": ["sleep", "600"], "epochs": 1, "deadline_s": 86400, "profile": "one"}


def _service(tmp_path, *serve_args) -> LocalService:
    files = write_service_files(tmp_path / "files").parent
    return LocalService(tmp_path / "svc", (files / "cluster.yaml").read_text(),
                        (files / "profiles.csv").read_text(),
                        options="period_s: null\npoll_s: 0.1\ngrace_s: 2\n",
                        serve_args=serve_args)


def _running_job(service) -> tuple[str, list[int]]:
    job = service.post("/jobs", json=BODY).json()["id"]
    wait_for(lambda: service.get(f"/jobs/{job}").json()["state"] == "running", timeout=60,
             what="the job to run")
    launchers, trainers = wait_for(lambda: (lambda p: p if p[0] and p[1] else None)(
        processes(job)), timeout=60, what="the job's processes")
    return job, launchers + trainers


def test_serve_with_stop_jobs_stops_every_running_job_on_exit(tmp_path):
    service = _service(tmp_path, "--stop-jobs")
    with service:
        job, pids = _running_job(service)
    # the service has exited (SIGTERM, as systemd stops it): its job with it
    assert wait_for(lambda: all_gone(pids), timeout=60, what="the job's processes to end")
    with service:  # the next start plans it again
        state = service.get(f"/jobs/{job}").json()["state"]
        assert state in ("queued", "paused", "running"), state
        service.post(f"/jobs/{job}/cancel")


def test_by_default_jobs_outlive_the_service(tmp_path):
    service = _service(tmp_path)
    with service:
        job, pids = _running_job(service)
    assert not all_gone(pids)  # still running, for the next start to adopt
    with service:
        assert service.get(f"/jobs/{job}").json()["state"] == "running"
        service.post(f"/jobs/{job}/cancel")
        wait_for(lambda: all_gone(pids), timeout=60, what="the cancelled job to end")
