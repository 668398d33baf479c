"""Run jobs on the nodes of a running Ray cluster.

Each node advertises its GPU type as a custom resource ``gpu_type:<NAME>`` (for example
``ray start --num-gpus 4 --resources '{"gpu_type:V100": 4}'``). A run is a detached, named Ray
actor pinned to the chosen node that holds the chosen number of GPUs (so Ray sets
CUDA_VISIBLE_DEVICES) and starts the job through `andreas.executors.launch` in its own process
group. Named and detached, the actor outlives the service, which re-adopts it by name. The job
dies with its actor (the wrapper's `--exit-with-parent`): Ray gives a dead actor's GPUs to
the next task, and the service restarts the job from its checkpoint.

A gang (a run over several nodes) is one such actor per node, each pinned to its planned node
and running one rank (`andreas.executors.gang --rank`); rank 0's node and a port free there are
the rendezvous. When one rank ends badly the executor stops the others and the run ends as
that rank did (`gang_end`).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from dataclasses import replace
from pathlib import Path

from ..errors import AndreasError
from .base import LaunchRequest, NodeInfo, NodeLost, RunStatus, job_environment, read_exit

NAMESPACE = "andreas"
RESOURCE_PREFIX = "gpu_type:"
NODES_TTL_S = 5.0  # how long the list of alive nodes is trusted before Ray is asked again
GANG_GRACE_S = 10.0  # a failed rank's partners: SIGTERM, then SIGKILL after this


def gang_end(ranks: list[tuple[bool, int | None, bool]]) -> RunStatus:
    """How a run ended, from each rank's (alive, exit code, stop requested), all ended. A
    one-node run: as its one rank did. A gang: as the rank that failed first did (one whose
    stop nobody asked for and that did not exit 0: a lost or killed one, a signal, before
    one that exited with an error, whose partners the executor then stopped); else as
    rank 0 did, asked to stop only if every rank was."""
    failed = [(code is not None and code >= 0, code) for _, code, stop in ranks
              if not stop and code != 0]
    if failed:
        return RunStatus(False, min(failed, key=lambda f: (f[0], f[1] or 0))[1], False)
    return RunStatus(False, ranks[0][1], all(stop for _, _, stop in ranks))


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
        self._addresses: dict[str, str] = {}  # name -> its address (a gang's MASTER_ADDR)
        self._ending: set[str] = set()  # ranks told to stop because a partner ended
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
        found, ids, addresses = [], {}, {}
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
                    addresses[self._names[node_id]] = node["NodeManagerAddress"]
                    gpus = int(amount)
                    found.append(NodeInfo(self._names[node_id], key[len(RESOURCE_PREFIX):],
                                          gpus, tuple(range(gpus))))
        self._nodes, self._node_ids, self._read_at = found, ids, time.monotonic()
        self._addresses = addresses

    def nodes(self) -> list[NodeInfo]:
        """The alive nodes, re-read from Ray at most every NODES_TTL_S: a node whose raylet
        is gone leaves the plan (its runs' actors died with it: the service restarts those
        jobs elsewhere from their checkpoints), and a node that joins is used."""
        if time.monotonic() - self._read_at > NODES_TTL_S:
            self._discover()
        return list(self._nodes)

    def _actor_on(self, name: str, node: str, gpus: int):
        """A job runner actor, detached and named, holding `gpus` GPUs of `node`."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        node_id = self._node_ids.get(node)
        if node_id is None:
            raise NodeLost(f"node {node} is no longer in the Ray cluster")
        return self._runner.options(
            name=name, lifetime="detached", max_restarts=0, num_gpus=gpus,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        ).remote()

    def start(self, request: LaunchRequest) -> dict:
        """One actor per node the run holds (a gang's every node), each pinned to its planned
        node as the plan says: a placement group spread strictly over the nodes would put the
        gang's bundles where Ray likes, not where the plan counted its GPUs."""
        names = [f"andreas-run-{request.run_id}"] + [
            f"andreas-run-{request.run_id}-rank-{i}" for i in range(1, len(request.places))]
        actors: list = []
        try:
            for name, (node, gpus) in zip(names, request.places):
                actors.append(self._actor_on(name, node, len(gpus)))
            master: tuple[str, ...] = ()
            if len(actors) > 1:  # where rank 0 listens: its node, a port free there
                port = self.ray.get(actors[0].free_port.remote(), timeout=60)
                master = ("--master", f"{self._addresses.get(request.node, '127.0.0.1')}:{port}")
            started = []
            for rank, (actor, (node, _)) in enumerate(zip(actors, request.places)):
                own = request if rank == 0 else replace(  # its own exit status and lock
                    request, run_dir=request.run_dir / f"rank-{rank}",
                    lock_path=request.lock_path.with_name(f"{request.lock_path.name}.rank-{rank}"))
                gang = ("--rank", str(rank), "--world", str(len(actors)), *master,
                        "--node", node) if master else ()
                started.append(actor.start.remote(own.launcher_argv(exit_with_parent=True,
                                                                    gang=gang),
                                                  request.env, request.workdir))
            infos: list[dict] = self.ray.get(started, timeout=60)
        except Exception:
            for actor in actors:  # none or all: a rank that started stops with its actor
                self._kill(actor)
            self._discover()
            lost = [node for node, _ in request.places if node not in self._node_ids]
            if lost:  # it died under the actor
                raise NodeLost(f"node {lost[0]} left the Ray cluster as the run "
                               "started") from None
            raise
        return {"actor": names[0], **infos[0],
                **({"ranks": names[1:]} if len(names) > 1 else {})}

    def _kill(self, actor) -> None:
        try:
            self.ray.kill(actor)
        except Exception:  # gone already
            pass

    def _actor(self, name: str):
        try:
            return self.ray.get_actor(name, namespace=NAMESPACE)
        except ValueError:
            return None

    def _actors(self, handle: dict | None) -> list:
        """The run's actors, rank 0's first (None where gone); empty without a handle."""
        if not handle or "actor" not in handle:
            return []
        return [self._actor(name) for name in [handle["actor"], *handle.get("ranks", ())]]

    def _poll(self, actor) -> tuple[bool, int | None, bool]:
        """(alive, exit code, stop requested) of one rank; a dead actor: (False, None, False)."""
        if actor is None:
            return False, None, False
        try:
            code, stop_requested = self.ray.get(actor.poll.remote(), timeout=30)
        except Exception:  # the actor or its node died
            return False, None, False
        return code is None, code, stop_requested

    @staticmethod
    def _ended_as(polled: tuple[bool, int | None, bool], run_dir: Path
                  ) -> tuple[bool, int | None, bool]:
        """A rank that ended, as its wrapper recorded it (the job's own status: -9 for a
        SIGKILL, where the wrapper's exit code says 9); as polled while it runs or without a
        record."""
        alive, code, stop_requested = polled
        if alive:
            return polled
        recorded = read_exit(run_dir)
        if recorded.returncode is None:
            return polled
        return False, recorded.returncode, stop_requested or recorded.stop_requested

    def status(self, handle: dict | None, run_dir: Path) -> RunStatus:
        actors = self._actors(handle)
        if not actors:
            return RunStatus(False, None, False)
        ranks = [self._ended_as(self._poll(a), run_dir if i == 0 else run_dir / f"rank-{i}")
                 for i, a in enumerate(actors)]
        if all(alive for alive, _, _ in ranks):
            return RunStatus(True)
        if any(alive for alive, _, _ in ranks):  # a gang whose rank ended: all or none
            names = [handle["actor"], *handle.get("ranks", ())] if handle else []
            for name, actor, (alive, _, _) in zip(names, actors, ranks):
                if alive and actor is not None and name not in self._ending:
                    self._ending.add(name)  # once: the actor is busy while it stops
                    actor.stop.remote(GANG_GRACE_S)
            return RunStatus(True)  # until every rank has ended
        return gang_end(ranks)

    def stop(self, runs: list[tuple[dict | None, Path]], grace_s: float) -> None:
        refs = [a.stop.remote(grace_s) for h, _ in runs for a in self._actors(h) if a]
        if refs:
            self.ray.get(refs, timeout=grace_s + 30)

    def foreign_gpus(self) -> dict[str, int]:
        return {}  # the service owns these nodes' GPUs

    def release(self, handle: dict | None) -> None:
        for actor in self._actors(handle):
            if actor is not None:
                self._kill(actor)
        if handle:  # its ranks are gone: nothing left to stop
            self._ending.difference_update([handle.get("actor"), *handle.get("ranks", ())])

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

    def free_port(self) -> int:
        """A port free on this node now: rank 0 of a gang listens there."""
        from .gang import free_port

        return free_port()

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
