"""The job wrapper (`andreas.executors.launch`) with real processes: with
`--exit-with-parent` it stops its job when the process that started it dies (a Ray actor
killed under a running job), and without it the job outlives that process (a service killed
by kill -9 re-adopts its jobs)."""

import json
import signal
import subprocess
import sys
import textwrap

import psutil
import pytest
from conftest import all_gone, wait_for

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = pytest.mark.service

STARTER = textwrap.dedent("""
    import subprocess, sys, time
    argv = sys.argv[1:]
    proc = subprocess.Popen(argv, start_new_session=True)
    print(proc.pid, flush=True)
    time.sleep(600)
""")


def start_through_a_parent(tmp_path, *launch_flags):
    """(parent process, launcher pid, job pid): a Python process that starts the wrapper in its
    own session, as the Ray actor does, around a job that sleeps."""
    argv = [sys.executable, "-m", "andreas.executors.launch", "--run-dir", str(tmp_path / "run"),
            "--lock", str(tmp_path / "lock"), "--log", str(tmp_path / "job.log"), *launch_flags,
            "--", sys.executable, "-c", "import time; time.sleep(600)"]
    parent = subprocess.Popen([sys.executable, "-c", STARTER, *argv], stdout=subprocess.PIPE,
                              text=True)
    assert parent.stdout is not None
    launcher = int(parent.stdout.readline())
    job = wait_for(lambda: psutil.Process(launcher).children(), timeout=30,
                   what="the wrapper to start its job")[0].pid
    return parent, launcher, job


def test_the_job_stops_when_the_wrappers_parent_dies(tmp_path):
    parent, launcher, job = start_through_a_parent(tmp_path, "--exit-with-parent")
    parent.kill()
    parent.wait()
    wait_for(lambda: all_gone([launcher, job]), timeout=60,
             what="the wrapper and its job to stop")
    assert "the process that started this job died" in (tmp_path / "job.log").read_text()
    ended = json.loads((tmp_path / "run" / "exit.json").read_text())
    assert ended["reason"] == "the process that started this job died"
    assert ended["returncode"] == -signal.SIGTERM and not ended["stop_requested"]


def test_without_the_flag_the_job_outlives_the_wrappers_parent(tmp_path):
    parent, launcher, job = start_through_a_parent(tmp_path)
    procs = [psutil.Process(launcher), psutil.Process(job)]
    try:
        parent.kill()
        parent.wait()
        wait_for(lambda: procs[0].ppid() != parent.pid, timeout=30,
                 what="the wrapper to be orphaned")
        # what the watch would have seen within half a second; give it six times that
        gone, _ = psutil.wait_procs(procs, timeout=3)
        assert gone == []
    finally:
        for proc in procs:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
