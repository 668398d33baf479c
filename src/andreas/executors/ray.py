"""Run jobs on the nodes of a running Ray cluster.

Each node advertises its GPU type as a custom resource ``gpu_type:<NAME>`` (for example
``ray start --num-gpus 4 --resources '{"gpu_type:V100": 4}'``). A run is a detached, named Ray
actor pinned to the chosen node that holds the chosen number of GPUs (so Ray sets
CUDA_VISIBLE_DEVICES) and starts the job through `andreas.executors.launch` in its own process
group. Named and detached, the actor outlives the service, which re-adopts it by name. The job
dies with its actor (the wrapper's `--exit-with-parent`): Ray gives a dead actor's GPUs to
the next task, and the service restarts the job from its checkpoint.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from pathlib import Path

from ..errors import AndreasError
from .base import LaunchRequest, NodeInfo, NodeLost, RunStatus, job_environment

NAMESPACE = "andreas"
RESOURCE_PREFIX = "gpu_type:"
NODES_TTL_S = 5.0  # how long the list of alive nodes is trusted before Ray is asked again


class RayExecutor:
    kind = "ray"

    def __init__(self, nodes: list[NodeInfo] | None = None, address: str = "auto") -> None:
        import ray

        self.ray = ray
        try:
            ray.init(address=address, namespace=NAMESPACE, logging_level=logging.ERROR,
                     log_to_driver=False, ignore_reinit_error=True)
        except (ConnectionError, RuntimeError) as exc:
            raise AndreasError(f"cannot connect to the Ray cluster at {address!r}: {exc}; "
                               f"start one with `ray start --head --num-gpus N --resources "
                               f"'{{\"gpu_type:TYPE\": N}}'`") from None
        self._names: dict[str, str] = {}  # Ray node id -> our name for it, kept for good
        self._node_ids: dict[str, str] = {}  # name -> Ray node id, of the alive nodes
        self._discover()
        if not self._nodes:
            raise AndreasError("the Ray cluster has no node with a 'gpu_type:<NAME>' resource; "
                               "expected e.g. --resources '{\"gpu_type:V100\": 4}'")
        self._runner = ray.remote(num_cpus=0)(_JobRunner)

    def _discover(self) -> None:
        """Read the alive nodes that advertise a GPU type into `_nodes` and `_node_ids`, and
        when into `_read_at`. A node keeps the name it was first seen with (its node name, or
        address; with the node id's start when another node has it already, as for several
        nodes on one machine): runs record it."""
        found, ids = [], {}
        for node in sorted(self.ray.nodes(), key=lambda n: n["NodeID"]):
            if not node.get("Alive"):
                continue
            for key, amount in node["Resources"].items():
                if key.startswith(RESOURCE_PREFIX):
                    node_id = node["NodeID"]
                    if node_id not in self._names:
                        name = node.get("NodeName") or node["NodeManagerAddress"]
                        if name in self._names.values():
                            name = f"{name}-{node_id[:8]}"
                        self._names[node_id] = name
                    ids[self._names[node_id]] = node_id
                    gpus = int(amount)
                    found.append(NodeInfo(self._names[node_id], key[len(RESOURCE_PREFIX):],
                                          gpus, tuple(range(gpus))))
        self._nodes, self._node_ids, self._read_at = found, ids, time.monotonic()

    def nodes(self) -> list[NodeInfo]:
        """The alive nodes, re-read from Ray at most every NODES_TTL_S: a node whose raylet
        is gone leaves the plan (its runs' actors died with it: the service restarts those
        jobs elsewhere from their checkpoints), and a node that joins is used."""
        if time.monotonic() - self._read_at > NODES_TTL_S:
            self._discover()
        return list(self._nodes)

    def start(self, request: LaunchRequest) -> dict:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        name = f"andreas-run-{request.run_id}"
        node_id = self._node_ids.get(request.node)
        if node_id is None:
            raise NodeLost(f"node {request.node} is no longer in the Ray cluster")
        try:
            actor = self._runner.options(
                name=name, lifetime="detached", max_restarts=0,
                num_gpus=len(request.gpu_indices),
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            ).remote()
            info: dict = self.ray.get(actor.start.remote(  # type: ignore[attr-defined,assignment]
                request.launcher_argv(exit_with_parent=True), request.env, request.workdir),
                timeout=60)
        except Exception:
            self._discover()
            if request.node not in self._node_ids:  # it died under the actor
                raise NodeLost(f"node {request.node} left the Ray cluster as the run "
                               "started") from None
            raise
        return {"actor": name, **info}

    def _actor(self, handle: dict | None):
        if not handle or "actor" not in handle:
            return None
        try:
            return self.ray.get_actor(handle["actor"], namespace=NAMESPACE)
        except ValueError:
            return None

    def status(self, handle: dict | None, run_dir: Path) -> RunStatus:
        actor = self._actor(handle)
        if actor is None:
            return RunStatus(False, None, False)
        try:
            code, stop_requested = self.ray.get(actor.poll.remote(), timeout=30)
        except Exception:  # the actor or its node died
            return RunStatus(False, None, False)
        return RunStatus(code is None, code, stop_requested)

    def stop(self, runs: list[tuple[dict | None, Path]], grace_s: float) -> None:
        refs = [a.stop.remote(grace_s) for a in (self._actor(h) for h, _ in runs) if a]
        if refs:
            self.ray.get(refs, timeout=grace_s + 30)

    def foreign_gpus(self) -> dict[str, int]:
        return {}  # the service owns these nodes' GPUs

    def release(self, handle: dict | None) -> None:
        actor = self._actor(handle)
        if actor is not None:
            self.ray.kill(actor)

    def close(self) -> None:
        self.ray.shutdown()


class _JobRunner:
    """Lives on the chosen node, holding its GPUs, for as long as the job runs."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.stop_requested = False

    def start(self, argv: list[str], env: dict[str, str], workdir: str | None) -> dict:
        import ray

        gpu_ids = [str(i) for i in ray.get_gpu_ids()]
        full_env = job_environment(os.environ, env, gpu_ids)
        self.proc = subprocess.Popen(argv, cwd=workdir or None, env=full_env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        return {"pid": self.proc.pid, "gpu_ids": gpu_ids,
                "node_id": ray.get_runtime_context().get_node_id()}

    def poll(self) -> tuple[int | None, bool]:
        assert self.proc is not None
        return self.proc.poll(), self.stop_requested

    def stop(self, grace_s: float) -> int | None:
        assert self.proc is not None
        self.stop_requested = True
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
            if self.proc.poll() is not None:
                break
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait
            while self.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        return self.proc.poll()
