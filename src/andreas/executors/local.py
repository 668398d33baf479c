"""Run jobs as processes on this machine, each in its own process group.

Processes outlive the service on purpose: after a restart the service re-adopts them by pid
(checked against the process start time, so a reused pid is never mistaken for a job).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil

from .base import LaunchRequest, NodeInfo, RunStatus, job_environment, read_exit


class LocalExecutor:
    kind = "local"

    def __init__(self, nodes: list[NodeInfo], hidden_values: tuple[str, ...] = ()) -> None:
        self._nodes = list(nodes)
        self._children: dict[int, subprocess.Popen] = {}
        self._hidden = tuple(hidden_values)  # secrets no job's environment may contain

    def nodes(self) -> list[NodeInfo]:
        return list(self._nodes)

    def start(self, request: LaunchRequest) -> dict:
        request.run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        env = job_environment(os.environ, request.env, request.gpu_indices, self._hidden)
        places = tuple(f"--place={node}={','.join(map(str, gpus))}"
                       for node, gpus in request.places)  # a gang's ranks: processes here
        proc = subprocess.Popen(request.launcher_argv(gang=places), cwd=request.workdir or None,
                                env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        self._children[proc.pid] = proc
        return {"pid": proc.pid, "create_time": _create_time(proc.pid)}

    def _handle(self, handle: dict | None, run_dir: Path) -> dict | None:
        if handle and handle.get("pid"):
            return handle
        try:  # the service died between starting the wrapper and recording it
            pid = int(json.loads((run_dir / "pid.json").read_text())["pid"])
        except (OSError, ValueError, KeyError):
            return None
        return {"pid": pid, "create_time": _create_time(pid)}

    def _alive(self, handle: dict | None) -> bool:
        if not handle:
            return False
        pid = handle["pid"]
        child = self._children.get(pid)
        if child is not None:
            if child.poll() is None:
                return True
            del self._children[pid]
            return False
        try:
            proc = psutil.Process(pid)
            if handle.get("create_time") and abs(proc.create_time() - handle["create_time"]) > 0.5:
                return False  # the pid was reused by another process
            return proc.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def status(self, handle: dict | None, run_dir: Path) -> RunStatus:
        handle = self._handle(handle, run_dir)
        if self._alive(handle):
            return RunStatus(True)
        status = read_exit(run_dir)
        if status.returncode is None and handle is not None:
            _kill_orphans(handle)  # the wrapper was killed: nothing of the job may run on
        return status

    def stop(self, runs: list[tuple[dict | None, Path]], grace_s: float) -> None:
        handles = [h for h in (self._handle(h, d) for h, d in runs)
                   if h is not None and self._alive(h)]
        for h in handles:
            _signal_group(h["pid"], signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(self._alive(h) for h in handles):
            time.sleep(0.05)
        for h in handles:
            if self._alive(h):
                _signal_group(h["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(self._alive(h) for h in handles):
            time.sleep(0.02)

    def foreign_gpus(self) -> dict[str, int]:
        return {}  # the service owns these nodes' GPUs

    def release(self, handle: dict | None) -> None:
        return None

    def close(self) -> None:
        self._children.clear()  # jobs keep running; a restarted service re-adopts them


def _create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _kill_orphans(handle: dict) -> None:
    """SIGKILL what is left of a dead wrapper's process group (its pid is the group's id),
    sparing any process older than the wrapper (a pid reused since)."""
    pid, born = handle["pid"], handle.get("create_time") or 0.0
    for proc in psutil.process_iter(["pid", "create_time"]):
        try:
            if os.getpgid(proc.info["pid"]) == pid and proc.info["create_time"] >= born - 0.5:
                proc.kill()
        except (psutil.Error, ProcessLookupError, PermissionError):
            continue


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
