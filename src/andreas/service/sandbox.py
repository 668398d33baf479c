"""A real `andreas serve` in a folder of its own, for benchmarks, crash campaigns and
screenshots (bench/service_load.py, bench/chaos.py, scripts/ui_screenshots.py): it writes the
cluster, profiles and service.yaml, picks a free port, starts the service with a fresh admin
token as a child process, and can kill and restart it.

    with LocalService(folder, CLUSTER_YAML, PROFILES_CSV) as service:
        httpx.post(service.url + "/jobs", headers=service.headers, json={...})
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import httpx

# a small cluster for benchmarks: two nodes of one GPU type, 2 + 1 GPUs
THREE_GPUS = """\
energy_price: 0.2
pue: 1.0
restart_overhead_s: 1
gpu_types:
  fast: {node_power_w: [400, 700]}
nodes:
  - {name: n1, gpu_type: fast, gpus: 2}
  - {name: n2, gpu_type: fast, gpus: 1}
"""


# Debian's chromium, headless, for the dashboard's tests and screenshots: no sandbox (as root
# in CI), and none of the background connections a closed network refuses
HEADLESS_CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                          "--disable-component-update", "--disable-sync", "--no-first-run",
                          "--disable-quic"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalService:
    def __init__(self, folder: Path, cluster_yaml: str, profiles_csv: str, *,
                 options: str = "", database_url: str | None = None,
                 cwd: Path | None = None, log: Path | None = None,
                 job_user: str | None = None, serve_args: tuple[str, ...] = ()) -> None:
        """`options`: more service.yaml lines (policy, period_s, ...), after the defaults;
        `log`: a file the service's output is appended to (else it is dropped, as the load
        benchmark wants: uvicorn logs every request); `job_user`: the OS user jobs run as
        (None: the service's own, for the operator's own benchmark jobs); `serve_args`: more
        options of `andreas serve` (--stop-jobs)."""
        self.folder, self.database_url, self.cwd, self.log = folder, database_url, cwd, log
        self.serve_args = tuple(serve_args)
        self.port, self.token = free_port(), secrets.token_urlsafe(24)
        self.url = f"http://127.0.0.1:{self.port}"
        self.headers = {"Authorization": f"Bearer {self.token}"}
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "cluster.yaml").write_text(cluster_yaml)
        (folder / "profiles.csv").write_text(profiles_csv)
        (folder / "service.yaml").write_text(
            "cluster: cluster.yaml\nprofiles: profiles.csv\ndata_dir: state\n"
            f"public_url: {self.url}\n"
            + (f"job_user: {job_user}\n" if job_user else "jobs_as_service_user: true\n")
            + options)
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 120.0) -> "LocalService":
        extra = ["--database-url", self.database_url] if self.database_url else []
        # the child keeps its own copy of the log's file descriptor
        with open(self.log, "a") if self.log else nullcontext(subprocess.DEVNULL) as output:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "andreas", "serve", "--config",
                 str(self.folder / "service.yaml"), "--port", str(self.port), *extra,
                 *self.serve_args],
                env=dict(os.environ, ANDREAS_ADMIN_TOKEN=self.token), cwd=self.cwd,
                stdout=output, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the service stopped at start (exit {self.proc.returncode})"
                                   + (f"; its output is in {self.log}" if self.log else ""))
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the service at {self.url} did not answer in {timeout_s:.0f} s")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=120)

    def get(self, path: str) -> httpx.Response:
        return httpx.get(self.url + path, headers=self.headers, timeout=300)

    def post(self, path: str, **kwargs) -> httpx.Response:
        return httpx.post(self.url + path, headers={**self.headers,
                                                     **kwargs.pop("headers", {})},
                          timeout=300, **kwargs)

    def __enter__(self) -> "LocalService":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
