"""Progress never fails silently: the service's default public_url is where it listens, and a job
that cannot reach the service says so in its log (issue 20, point 6)."""

import os
import subprocess
import sys

import pytest
from conftest import train_job, wait_for, write_service_files
from test_service_durability import Service, free_port

from andreas.service.config import public_url_for, read_service_config

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = pytest.mark.service


def test_public_url_defaults_to_the_bound_address(tmp_path):
    config = read_service_config(write_service_files(tmp_path))
    assert config.public_url is None
    assert public_url_for(config, "127.0.0.1", 18123) == "http://127.0.0.1:18123"
    assert public_url_for(config, "0.0.0.0", 9000) == "http://127.0.0.1:9000"
    assert public_url_for(config, "::1", 9000) == "http://[::1]:9000"
    named = read_service_config(write_service_files(
        tmp_path / "b", extra="public_url: http://gpu-head:8000/\n"))
    assert public_url_for(named, "0.0.0.0", 9000) == "http://gpu-head:8000"


def test_a_job_that_cannot_reach_the_service_says_so(tmp_path):
    script = ("from andreas.job import progress, _reporter\n"
              "progress(1.0)\n_reporter().flush(10.0)\n")
    env = dict(os.environ, ANDREAS_PROGRESS_URL=f"http://127.0.0.1:{free_port()}/jobs/j/progress",
               ANDREAS_PROGRESS_TOKEN="t", ANDREAS_CHECKPOINT_DIR=str(tmp_path))
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "andreas: cannot report progress to http://127.0.0.1:" in run.stderr
    assert run.stderr.count("cannot report progress") == 1  # said once, not per attempt


def test_jobs_reach_a_service_on_any_port(tmp_path):
    # no public_url in service.yaml, a port that is not 8000: progress must still arrive
    port = free_port()
    service = Service(write_service_files(tmp_path), port)
    service.start()
    try:
        show = "import os; print('url', os.environ['ANDREAS_PROGRESS_URL'])"
        told = service.post("/jobs", {"command": [sys.executable, "-c", show], "epochs": 1,
                                      "deadline_s": 600, "profile": "mlp"})["id"]
        job = service.post("/jobs", train_job(4, samples=20000))["id"]
        for j in (told, job):
            wait_for(lambda j=j: service.get(f"/jobs/{j}")["state"] in ("completed", "failed"),
                     timeout=120, what="the jobs to end")
        assert f"url http://127.0.0.1:{port}/jobs/{told}/progress" in service.get_text(
            f"/jobs/{told}/logs")
        log = service.get_text(f"/jobs/{job}/logs")
        assert "epoch 4 done" in log
        assert "cannot report progress" not in log, log
    finally:
        service.proc.terminate()
        service.proc.wait(timeout=30)


def test_the_example_service_reports_progress_on_any_port():
    # `andreas serve --config examples/service/service.yaml --port 18123` (issue 20): the
    # example must not pin public_url to port 8000
    from pathlib import Path

    example = Path(__file__).resolve().parent.parent / "examples" / "service" / "service.yaml"
    config = read_service_config(example)
    assert public_url_for(config, "127.0.0.1", 18123) == "http://127.0.0.1:18123"
