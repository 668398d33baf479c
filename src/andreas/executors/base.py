"""The executor interface: start a job on given GPUs, ask whether it still runs, stop it."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

#: The service's own variables (`ANDREAS_ADMIN_TOKEN`, ...) start with this prefix. A job never
#: inherits one: it gets only the ``ANDREAS_*`` variables its launch request sets for it.
SERVICE_ENV_PREFIX = "ANDREAS_"
#: Variables that carry the service's credentials to other systems; never passed to a job.
SERVICE_SECRET_ENV = frozenset({"PGPASSWORD", "PGPASSFILE", "DATABASE_URL"})


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
    #: the unprivileged OS account the command runs as (executors/identity.py); None: the
    #: executor's own (only where the operator set jobs_as_service_user)
    user: str | None = None
    #: a gang's other nodes, rank 1 on, with their GPU indices (`node` and `gpu_indices` are
    #: rank 0's); empty for a run on one node
    more_nodes: tuple[tuple[str, tuple[int, ...]], ...] = ()

    @property
    def places(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """(node, GPU indices) of every rank, rank 0's first."""
        return ((self.node, self.gpu_indices), *self.more_nodes)

    def launcher_argv(self, exit_with_parent: bool = False,
                      gang: tuple[str, ...] = ()) -> list[str]:
        """The wrapper command line (see `andreas.executors.launch`); `exit_with_parent`: the
        job stops when the process that starts the wrapper dies. A gang's wrapper runs the
        rank launcher (`andreas.executors.gang`) with `gang`'s arguments (where the ranks
        go), which starts the job's command once per node as the job's account."""
        command: tuple[str, ...] = self.command
        user = self.user
        if self.more_nodes:
            command = (sys.executable, "-m", "andreas.executors.gang", *gang,
                       *(("--user", user) if user else ()), "--", *command)
            user = None  # the rank launcher switches; it keeps the wrapper's privileges
        return [sys.executable, "-m", "andreas.executors.launch", "--run-dir", str(self.run_dir),
                "--lock", str(self.lock_path), "--log", str(self.log_path),
                *(["--user", user] if user else []),
                *(["--exit-with-parent"] if exit_with_parent else []), "--", *command]


def job_environment(inherited: Mapping[str, str], job_env: Mapping[str, str],
                    gpu_ids: Sequence[int | str],
                    hidden_values: tuple[str, ...] = ()) -> dict[str, str]:
    """The environment a job starts with: what the executor's process has (PATH, a virtual
    environment, proxies), less every secret of the service, plus the job's own variables.

    Dropped: every inherited ``ANDREAS_*`` variable (the admin token among them), the
    database credentials in `SERVICE_SECRET_ENV`, and any variable whose value contains one of
    `hidden_values` (the admin token read from a variable of another name). A user can print
    their job's environment into a log they may read, so nothing here may be a secret."""
    hidden = tuple(v for v in hidden_values if v)
    env = {name: value for name, value in inherited.items()
           if not name.startswith(SERVICE_ENV_PREFIX) and name not in SERVICE_SECRET_ENV
           and not any(secret in value for secret in hidden)}
    env.update(job_env)
    env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in gpu_ids)
    env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # CUDA's numbers = NVML's and ours
    return env


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


class NodeLost(Exception):
    """A run could not start because its node left the cluster (a Ray node lost): the job is
    planned again on the nodes left, not failed."""


class Executor(Protocol):
    kind: str

    def nodes(self) -> list[NodeInfo]: ...

    def start(self, request: LaunchRequest) -> dict:
        """Start the run; return a JSON-serialisable handle the service stores."""

    def status(self, handle: dict | None, run_dir: Path) -> RunStatus: ...

    def stop(self, runs: list[tuple[dict | None, Path]], grace_s: float) -> None:
        """SIGTERM every run, wait up to `grace_s`, SIGKILL what is left; return when all
        are gone."""

    def foreign_gpus(self) -> dict[str, int]:
        """GPUs per node held by work this service did not start (another Slurm user's
        jobs): the planner treats them as busy. Empty where the service owns the nodes."""

    def release(self, handle: dict | None) -> None:
        """Free what the executor holds for an ended run (nothing for local processes)."""

    def close(self) -> None: ...
