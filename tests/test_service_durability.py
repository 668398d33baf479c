"""`kill -9` of the service at several moments, then a restart: nothing is lost, nothing runs
twice at once. Real processes: the service (uvicorn) and the training jobs."""

import os
import signal
import subprocess
import sys
import time

import httpx
import psutil
import pytest
from conftest import epoch_lines, train_job, wait_for, write_service_files

from andreas.service.sandbox import free_port

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = pytest.mark.service

TOKEN = "durable-admin"
H = {"Authorization": f"Bearer {TOKEN}"}
EPOCHS = 30
HELD_AFTER = 3  # the jobs wait after this epoch until the test lets them go on: whatever the
# machine's speed, both still run when the service is killed mid-run (moment 2)


class Service:
    def __init__(self, config, port, database_url=None):
        self.config, self.port, self.database_url = config, port, database_url
        self.url = f"http://127.0.0.1:{port}"
        self.proc = None

    def start(self):
        env = dict(os.environ, ANDREAS_ADMIN_TOKEN=TOKEN)
        self.starts = getattr(self, "starts", 0) + 1
        with open(self.config.parent / "service.log", "a") as log:  # kept for a failure
            log.write(f"--- start {self.starts}\n")
            log.flush()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "andreas", "serve", "--config", str(self.config),
                 "--port", str(self.port),
                 *(["--database-url", self.database_url] if self.database_url else [])],
                env=env, stdout=log, stderr=subprocess.STDOUT)
        try:  # (a start loads the compiled kernels: over a minute on a machine loaded 2.5x)
            wait_for(self._up, timeout=120, what="the service to answer")
        except AssertionError:
            self.stop()  # a failed start leaves no server behind
            raise

    def why(self) -> str:
        """The jobs as the service sees them and the end of its log: what a failed wait
        reports, since a campaign's failure on a loaded machine is rarely reproduced."""
        try:
            jobs = [(j["id"], j["state"], j["epochs_done"], j["running_on"], j.get("reason"))
                    for j in self.get("/jobs")]
        except Exception as exc:  # the service itself may be what failed
            jobs = [f"GET /jobs failed: {exc!r}"]
        tail = (self.config.parent / "service.log").read_text()[-4000:]
        return f"jobs: {jobs}\nservice log (end):\n{tail}"

    def _up(self):
        try:
            return httpx.get(self.url + "/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def get(self, path):
        return httpx.get(self.url + path, headers=H, timeout=10).json()

    def post(self, path, body=None):
        return httpx.post(self.url + path, headers=H, json=body, timeout=10).json()

    def get_text(self, path):
        return httpx.get(self.url + path, headers=H, timeout=10).text


def live(pid: int) -> bool:
    """Running, not a zombie (an orphan's exit may wait for init to reap it)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def job_pids(data_dir):
    """Processes of our launcher that are alive, by job id (from the command lines)."""
    out = {}
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        if "andreas.executors.launch" in cmd and str(data_dir) in " ".join(cmd):
            job = cmd[cmd.index("--lock") + 1].split("/")[-2]
            out.setdefault(job, []).append(proc.pid)
    return out


def test_kill_minus_9_at_any_moment_loses_nothing(tmp_path):
    config = write_service_files(tmp_path, extra="public_url: http://127.0.0.1:{port}\n")
    port = free_port()
    config.write_text(config.read_text().replace("{port}", str(port)))
    service = Service(config, port)
    service.start()
    try:
        # moment 1: right after the submissions, before or while the first plan is applied
        go = tmp_path / "go"
        held = ["--hold-after", str(HELD_AFTER), "--hold-file", str(go)]
        ids = [service.post("/jobs", train_job(EPOCHS, samples=80000, priority=p,
                                               extra_args=held))["id"]
               for p in (2, 4)]
        service.kill9()
        service.start()
        assert {j["id"] for j in service.get("/jobs")} == set(ids)
        # moment 2: mid-run, once both jobs made progress and one runs, its process alive (on
        # a loaded machine a replan may be pausing or moving a job just then)
        wait_for(lambda: all(j["epochs_done"] >= 2 for j in service.get("/jobs"))
                 and any(j["state"] == "running" for j in service.get("/jobs"))
                 and job_pids(tmp_path / "state"),
                 timeout=120, what=lambda: f"progress, and a job running; {service.why()}")
        service.kill9()
        alive = job_pids(tmp_path / "state")
        assert alive, "no job outlived the service"  # jobs run on without it
        service.start()
        # re-adopted: a job whose process lived through the restart was not started again
        # (the policy may have paused or moved a job just before the kill: that one is not
        # alive, and the restarted service starts it afresh)
        for job_id, pids in job_pids(tmp_path / "state").items():
            assert len(pids) == 1, f"two copies of {job_id}"
            if job_id in alive and live(alive[job_id][0]):
                assert pids == alive[job_id]
        running = [j for j in service.get("/jobs") if j["running_on"]]
        assert {j["id"] for j in running} >= {j for j in alive if live(alive[j][0])}
        # moment 3: a kill just after a progress report; then let everything finish
        go.touch()
        time.sleep(0.3)
        service.kill9()
        service.start()
        wait_for(lambda: all(j["state"] == "completed" for j in service.get("/jobs")),
                 timeout=120, what=lambda: f"completion; {service.why()}")
        for job_id in ids:
            runs = service.get(f"/jobs/{job_id}/runs")
            spans = sorted((r["started_at"], r["ended_at"]) for r in runs)
            for (_s1, e1), (s2, _) in zip(spans, spans[1:]):
                assert e1 is not None and s2 >= e1, "two runs of one job overlapped"
            log = httpx.get(f"{service.url}/jobs/{job_id}/logs", headers=H, timeout=10).text
            assert sorted(set(epoch_lines(log))) == list(range(1, EPOCHS + 1))
            assert len(epoch_lines(log)) == EPOCHS, "an epoch ran twice"
    finally:
        if service.proc and service.proc.poll() is None:
            service.proc.terminate()
            service.proc.wait(timeout=30)
        for pids in job_pids(tmp_path / "state").values():
            for pid in pids:
                os.killpg(pid, signal.SIGKILL)
