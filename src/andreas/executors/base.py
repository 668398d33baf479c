"""The executor interface: start a job on given GPUs, ask whether it still runs, stop it."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class NodeInfo:
    """A node the executor can run on. `gpu_indices` are the device numbers jobs see in
    CUDA_VISIBLE_DEVICES (real GPUs), or logical numbers on a machine without GPUs."""

    name: str
    gpu_type: str
    gpus: int
    gpu_indices: tuple[int, ...]


@dataclass(frozen=True)
class LaunchRequest:
    run_id: int
    job_id: str
    node: str
    gpu_indices: tuple[int, ...]
    command: tuple[str, ...]
    workdir: str | None
    env: dict[str, str]
    run_dir: Path
    log_path: Path
    lock_path: Path

    def launcher_argv(self) -> list[str]:
        """The wrapper command line (see `andreas.executors.launch`)."""
        return [sys.executable, "-m", "andreas.executors.launch", "--run-dir", str(self.run_dir),
                "--lock", str(self.lock_path), "--log", str(self.log_path), "--",
                *self.command]


@dataclass(frozen=True)
class RunStatus:
    alive: bool
    returncode: int | None = None  # None once dead = killed before it could say (SIGKILL)
    stop_requested: bool = False


def read_exit(run_dir: Path) -> RunStatus:
    """What the wrapper wrote when its command ended; a dead run without it was killed."""
    try:
        data = json.loads((run_dir / "exit.json").read_text())
    except (OSError, ValueError):
        return RunStatus(False, None, False)
    return RunStatus(False, int(data["returncode"]), bool(data.get("stop_requested")))


class Executor(Protocol):
    kind: str

    def nodes(self) -> list[NodeInfo]: ...

    def start(self, request: LaunchRequest) -> dict:
        """Start the run; return a JSON-serialisable handle the service stores."""

    def status(self, handle: dict | None, run_dir: Path) -> RunStatus: ...

    def stop(self, runs: list[tuple[dict | None, Path]], grace_s: float) -> None:
        """SIGTERM every run, wait up to `grace_s`, SIGKILL what is left; return when all
        are gone."""

    def release(self, handle: dict | None) -> None:
        """Free what the executor holds for an ended run (nothing for local processes)."""

    def close(self) -> None: ...
