"""Run jobs through Slurm: ANDREAS decides, Slurm executes.

Nodes and their GPUs come from Slurm (`scontrol show node`: GRES ``gpu:TYPE:N``); the GPU type
is the GRES type, catalogued names matched as elsewhere (``v100`` is V100). A start is an
`sbatch` of a one-line batch script that `exec`s the usual launch wrapper
(`andreas.executors.launch`), pinned to the planned node and GPU count (``--nodelist``,
``--gres=gpu:TYPE:k``), so checkpoints, progress posts and exit status work as with the other
executors; Slurm sets CUDA_VISIBLE_DEVICES. A gang is one Slurm job over its planned nodes
(``--nodes=n``, ``--gres`` per node) whose wrapper starts the ranks with ``srun``, one task
per node (`andreas.executors.gang`). A pause or move is ``scancel --signal=TERM
--full`` (every process of the job gets SIGTERM, the job checkpoints), then plain `scancel`
after the grace period. Runs are found again by their Slurm job id (or by their name,
``andreas-run-<run id>``, if the service died between `sbatch` and recording it), so a
restarted service re-adopts what runs and starts nothing twice.

Slurm jobs that ANDREAS did not submit hold GPUs the planner must not count on
(`foreign_gpus`); they are never signalled. See docs/service-executors.md, "In front of Slurm".
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from dataclasses import replace
from pathlib import Path

from ..catalogue import canonical_gpu
from ..errors import AndreasError
from .base import LaunchRequest, NodeInfo, RunStatus, job_environment, read_exit

NAME_PREFIX = "andreas-run-"
COMMENT = "andreas"  # sbatch --comment: with the name, how our jobs are told from others
ALIVE_STATES = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "RESIZING",
                "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "SIGNALING", "STAGE_OUT"}
_GRES = re.compile(r"gpu:(?:(?P<type>[^:(,]+):)?(?P<count>\d+)")


class SlurmError(AndreasError):
    pass


def _run(argv: list[str], *, env: dict[str, str] | None = None, timeout: float = 30.0) -> str:
    """A Slurm command's standard output; SlurmError with its message if it fails."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    except FileNotFoundError:
        raise SlurmError(f"{argv[0]}: not found; the slurm executor needs Slurm's client "
                         "commands (Debian: slurm-client) on the service's machine") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{' '.join(argv[:2])}: no answer from Slurm within "
                         f"{timeout:g} s") from None
    if done.returncode != 0:
        raise SlurmError(f"{' '.join(argv[:2])} failed: {done.stderr.strip() or done.stdout}")
    return done.stdout


def parse_gres(text: str) -> list[tuple[str | None, int]]:
    """GPU entries of a GRES string: "gpu:v100:4,gpu:t4:2(S:0)" -> [("v100", 4), ("t4", 2)];
    an untyped "gpu:2" gives (None, 2); other resources are ignored."""
    out = []
    for part in re.split(r",(?![^(]*\))", text or ""):
        m = _GRES.match(part.strip().removeprefix("gres/").removeprefix("gres:"))
        if m:
            out.append((m.group("type"), int(m.group("count"))))
    return out


def parse_node_line(line: str) -> dict[str, str]:
    """One line of `scontrol show node --oneliner` as key -> value (values have no spaces,
    except the free-text Reason, which comes last)."""
    fields: dict[str, str] = {}
    reason = line.find(" Reason=")
    if reason >= 0:
        fields["Reason"] = line[reason + len(" Reason="):]
        line = line[:reason]
    for token in line.split():
        key, sep, value = token.partition("=")
        if sep:
            fields[key] = value
    return fields


class SlurmExecutor:
    kind = "slurm"

    def __init__(self, nodes: list[NodeInfo] | None = None, *, partition: str | None = None,
                 hidden_values: tuple[str, ...] = (), status_ttl_s: float = 0.5) -> None:
        """`nodes`: the nodes ANDREAS may use (each must be a Slurm node with that many GPUs
        of that type); None: every Slurm node with typed GPUs (of `partition`, if given)."""
        self.partition = partition
        self._hidden = tuple(hidden_values)
        self._ttl = status_ttl_s
        self._queue: tuple[float, dict[str, dict[str, str]]] | None = None
        self._gres_type: dict[str, str] = {}  # node -> the GRES type name Slurm knows
        found = self._discover()
        if nodes:
            by_name = {n.name: n for n in found}
            for n in nodes:
                if n.name not in by_name:
                    raise SlurmError(f"node {n.name!r} is not a Slurm node with typed GPUs "
                                     f"(Slurm has: {', '.join(sorted(by_name)) or 'none'})")
            found = [replace(by_name[n.name], gpu_type=n.gpu_type) for n in nodes]
        if not found:
            raise SlurmError("Slurm reports no node with typed GPUs (GRES gpu:TYPE:N)"
                             + (f" in partition {partition!r}" if partition else ""))
        self._nodes = found

    # ------------------------------------------------------------------ nodes
    def _discover(self) -> list[NodeInfo]:
        out = _run(["scontrol", "show", "node", "--oneliner"])
        found = []
        for line in out.splitlines():
            fields = parse_node_line(line)
            name = fields.get("NodeName")
            if not name:
                continue
            if self.partition and self.partition not in fields.get("Partitions", "").split(","):
                continue
            typed = [(t, c) for t, c in parse_gres(fields.get("Gres", "")) if t]
            if not typed:
                continue
            gres_type, count = typed[0]  # one GPU type per node, as ANDREAS models nodes
            self._gres_type[name] = gres_type
            found.append(NodeInfo(name, canonical_gpu(gres_type) or gres_type, count,
                                  tuple(range(count))))
        return sorted(found, key=lambda n: n.name)

    def nodes(self) -> list[NodeInfo]:
        return list(self._nodes)

    # ------------------------------------------------------------------ jobs
    def _jobs(self, fresh: bool = False) -> dict[str, dict[str, str]]:
        """Every Slurm job Slurm still lists, by id: state, name, comment, node list and
        GPUs per node. Cached for `status_ttl_s`: a tick asks about every run."""
        now = time.monotonic()
        if fresh or self._queue is None or now - self._queue[0] > self._ttl:
            out = _run(["squeue", "--noheader", "--all", "--states=all",
                        "--format=%i|%T|%j|%k|%N|%b"])
            jobs = {}
            for line in out.splitlines():
                parts = line.split("|")
                if len(parts) == 6:
                    jobs[parts[0].strip()] = dict(zip(
                        ("state", "name", "comment", "nodes", "gres"),
                        (p.strip() for p in parts[1:])))
            self._queue = (now, jobs)
        return self._queue[1]

    def _ours(self, job: dict[str, str]) -> bool:
        return job["name"].startswith(NAME_PREFIX) and job["comment"] == COMMENT

    def start(self, request: LaunchRequest) -> dict:
        request.run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        script = request.run_dir / "slurm-batch.sh"
        script.write_text("#!/bin/sh\n# written by ANDREAS: the launch wrapper, as this job\n"
                          "exec " + shlex.join(request.launcher_argv(gang=("--slurm",))) + "\n")
        env = job_environment(os.environ, request.env, request.gpu_indices, self._hidden)
        del env["CUDA_VISIBLE_DEVICES"]  # Slurm sets it to the GPUs it gives the job
        gres_type = self._gres_type.get(request.node)
        gres = f"gpu:{gres_type}:{len(request.gpu_indices)}" if gres_type else \
            f"gpu:{len(request.gpu_indices)}"
        nodes = len(request.places)  # a gang: one task per node, `srun` starts them all
        argv = ["sbatch", "--parsable", f"--job-name={NAME_PREFIX}{request.run_id}",
                f"--comment={COMMENT}",
                f"--nodelist={','.join(node for node, _ in request.places)}",
                f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1",
                "--cpus-per-task=1", f"--gres={gres}", "--no-requeue",
                f"--chdir={request.workdir or request.run_dir}",
                f"--output={request.run_dir / 'slurm.out'}", "--export=ALL"]
        if self.partition:
            argv.append(f"--partition={self.partition}")
        job_id = _run([*argv, str(script)], env=env).strip().split(";")[0]
        self._queue = None
        return {"slurm_job_id": job_id}

    def _job_id(self, handle: dict | None, run_dir: Path) -> str | None:
        if handle and handle.get("slurm_job_id"):
            return str(handle["slurm_job_id"])
        name = f"{NAME_PREFIX}{run_dir.name}"  # died between sbatch and recording the id
        for job_id, job in self._jobs(fresh=True).items():
            if job["name"] == name and self._ours(job):
                return job_id
        return None

    def status(self, handle: dict | None, run_dir: Path) -> RunStatus:
        job_id = self._job_id(handle, run_dir)
        job = self._jobs().get(job_id) if job_id else None
        if job is not None and job["state"] in ALIVE_STATES:
            return RunStatus(True)
        return read_exit(run_dir)  # no exit.json: killed before it could say

    def stop(self, runs: list[tuple[dict | None, Path]], grace_s: float) -> None:
        ids = [i for i in (self._job_id(h, d) for h, d in runs) if i]
        if not ids:
            return

        def alive() -> list[str]:
            jobs = self._jobs(fresh=True)
            return [i for i in ids if i in jobs and jobs[i]["state"] in ALIVE_STATES]

        for job_id in alive():
            self._end(job_id, term=True)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and alive():
            time.sleep(0.1)
        for job_id in alive():
            self._end(job_id, term=False)  # Slurm's KillWait, then SIGKILL
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and alive():
            time.sleep(0.1)
        self._queue = None

    def _end(self, job_id: str, term: bool) -> None:
        """Ask Slurm to end job `job_id`: SIGTERM to its processes (`term`: the launcher lets
        the job checkpoint and exit), else scancel. A job still pending has no process to
        signal (Slurm refuses: exit 229 with no message, or no answer; a tick once failed on
        it) and is cancelled outright; a job that ended meanwhile is not an error."""
        state = self._jobs().get(job_id, {}).get("state")
        argv = ["scancel", "--signal=TERM", "--full", job_id] if term and state != "PENDING" \
            else ["scancel", job_id]
        try:
            _run(argv)
        except SlurmError:
            if self._jobs(fresh=True).get(job_id, {}).get("state") in ALIVE_STATES:
                raise

    def foreign_gpus(self) -> dict[str, int]:
        """GPUs per node held by Slurm jobs ANDREAS did not submit (running, or being
        started or ended): the planner leaves them alone."""
        held: dict[str, int] = {}
        for job in self._jobs().values():
            if self._ours(job) or job["state"] not in ALIVE_STATES - {"PENDING"}:
                continue
            gpus = sum(c for _, c in parse_gres(job["gres"]))
            if not gpus:
                continue
            for node in expand_nodes(job["nodes"]):
                held[node] = held.get(node, 0) + gpus
        return held

    def release(self, handle: dict | None) -> None:
        return None

    def close(self) -> None:
        return None  # Slurm jobs run on; a restarted service re-adopts them


def expand_nodes(nodelist: str) -> list[str]:
    """Slurm's compressed node list ("n[1-3],gpu7") as names; `scontrol show hostnames`
    only when brackets need it."""
    if not nodelist or nodelist in ("(null)", "None"):
        return []
    if "[" not in nodelist:
        return nodelist.split(",")
    return _run(["scontrol", "show", "hostnames", nodelist]).split()
