"""Start the ranks of a gang (a job over several nodes): `python -m andreas.executors.gang`.

The launch wrapper (`launch.py`) runs this in place of the job's command when a run holds
GPUs on more than one node; it starts the job's command once per node (one *rank* per node)
with the usual rendezvous variables, which ``torch.distributed`` (``init_method="env://"``)
and other collective libraries read:

- ``RANK`` (0 on the first node), ``WORLD_SIZE`` (the nodes), ``LOCAL_RANK`` 0 and
  ``LOCAL_WORLD_SIZE`` 1 (one process per node: a rank that wants one process per GPU starts
  them itself), ``NODE_RANK`` (= ``RANK``);
- ``MASTER_ADDR`` and ``MASTER_PORT``: where rank 0 listens;
- ``CUDA_VISIBLE_DEVICES``, ``ANDREAS_NODE`` and ``ANDREAS_GPU_INDICES``: that node's.

Each rank's output goes to the job's log a whole line at a time. All ranks or none: if one
rank exits with an error (or is killed), the others get SIGTERM,
then SIGKILL after `GRACE_S`, and this process ends as the failed rank did (killed by its
signal, or with its exit status), so the service sees the run crash (and restarts the whole
gang from rank 0's last checkpoint) or fail, as it would a job on one node. A
SIGTERM (pause, move, cancel) reaches every rank, which checkpoint and exit.

Two ways in:

- ``--place NODE=0,1 --place NODE2=0,1``: the local executor's nodes are one machine's, so
  this process starts every rank itself, on 127.0.0.1 and a free port;
- ``--slurm``: on the first node of a Slurm allocation, this picks a free port and hands the
  ranks to ``srun`` (one task per node, ``--kill-on-bad-exit``), whose tasks come back here
  as ``--slurm-task`` and read their rank from Slurm's variables (``SLURM_PROCID``, ...);
  Slurm sets each node's CUDA_VISIBLE_DEVICES;
- ``--rank I --world N --master ADDR:PORT --node NAME``: one rank, the others started on their
  own nodes (the ray executor: an actor per node, each running one of these); the executor
  watches the ranks and ends the gang when one dies.

With ``--user NAME`` the ranks run as that unprivileged account, as the wrapper's ``--user``
runs a one-node job.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from .identity import IdentityError, JobIdentity
from .launch import _dies_with

GRACE_S = 10.0  # a failed rank's partners: SIGTERM (they may checkpoint), then SIGKILL
POLL_S = 0.1


def free_port() -> int:
    """A TCP port free on this machine now, for rank 0 to listen on."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def rank_environment(rank: int, world: int, node: str, gpu_indices: str, master_addr: str,
                     master_port: int, local_rank: int = 0, local_world: int = 1
                     ) -> dict[str, str]:
    """The variables one rank starts with (see the module's docstring)."""
    return {"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(local_rank),
            "LOCAL_WORLD_SIZE": str(local_world), "NODE_RANK": str(rank),
            "MASTER_ADDR": master_addr, "MASTER_PORT": str(master_port),
            "CUDA_VISIBLE_DEVICES": gpu_indices, "ANDREAS_NODE": node,
            "ANDREAS_GPU_INDICES": gpu_indices}


def parse_place(text: str) -> tuple[str, str]:
    """``NODE=0,1`` -> ("NODE", "0,1")."""
    node, sep, indices = text.rpartition("=")
    if not sep or not node:
        raise argparse.ArgumentTypeError(f"expected NODE=GPU,GPU..., got {text!r}")
    return node, indices


def _account(user: str | None) -> tuple[dict, dict[str, str]]:
    if user is None:
        return {}, {}
    identity = JobIdentity.lookup(user)
    identity.check_switchable()
    return identity.popen_kwargs(), identity.environment()


class Ranks:
    """The ranks this process started; `wait` supervises them all-or-none."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []
        self.readers: list[threading.Thread] = []
        self.stopping = False
        self._out = threading.Lock()
        signal.signal(signal.SIGTERM, self._on_term)

    def _on_term(self, signum, frame) -> None:
        self.stopping = True
        self.signal(signal.SIGTERM)  # they may have got it already (one process group)

    def start(self, command: list[str], env: dict[str, str], account: dict) -> None:
        proc = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                preexec_fn=_dies_with(os.getpid()), **account)
        self.procs.append(proc)
        reader = threading.Thread(target=self._copy_lines, args=(proc,), daemon=True)
        reader.start()
        self.readers.append(reader)

    def _copy_lines(self, proc: subprocess.Popen) -> None:
        """A rank's output into this process's (the job's log), whole lines at a time, so
        that two ranks' lines never run into each other."""
        assert proc.stdout is not None
        out = sys.stdout.buffer
        for line in proc.stdout:
            with self._out:
                out.write(line if line.endswith(b"\n") else line + b"\n")
                out.flush()

    def signal(self, sig: int) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    p.send_signal(sig)
                except OSError:
                    pass

    def wait(self) -> int:
        """Wait for every rank; the first failed rank ends the others. Returns 0 when all
        ended well, else that rank's status as `Popen.returncode` gives it (-N: killed by
        signal N). A rank killed by a signal is taken for the cause over a partner that
        failed because its peer vanished (a collective's connection reset)."""
        failed: int | None = None
        deadline: float | None = None
        while any(p.poll() is None for p in self.procs):
            if failed is None:
                bad = [(p.returncode >= 0, i, p.returncode) for i, p in enumerate(self.procs)
                       if p.poll() not in (None, 0)]
                if bad:
                    _, rank, failed = min(bad)
                    print(f"andreas: rank {rank} {_said(failed)}; stopping the gang's other "
                          "ranks", file=sys.stderr, flush=True)
                    self.signal(signal.SIGTERM)
                    deadline = time.monotonic() + GRACE_S
            elif deadline is not None and time.monotonic() > deadline:
                self.signal(signal.SIGKILL)
                deadline = None
            time.sleep(POLL_S)
        for reader in self.readers:  # the last lines, before the wrapper records the end
            reader.join(timeout=5)
        if failed is None:
            bad = [(p.returncode >= 0, p.returncode) for p in self.procs if p.returncode]
            failed = min(bad)[1] if bad else 0
        return failed


def _said(returncode: int) -> str:
    return (f"was killed by signal {-returncode}" if returncode < 0
            else f"exited with status {returncode}")


def end_as(returncode: int) -> int:
    """Exit as the gang's failed rank did: killed by its signal (the wrapper then sees the
    run killed from outside, which restarts from the checkpoint), else with its status."""
    if returncode < 0:
        sys.stdout.flush()
        if -returncode not in (signal.SIGKILL, signal.SIGSTOP):  # those have no handler
            signal.signal(-returncode, signal.SIG_DFL)
        os.kill(os.getpid(), -returncode)
        time.sleep(1)  # a signal whose default is not to end (none of those reach here)
        return 128 - returncode
    return returncode


def run_local(places: list[tuple[str, str]], command: list[str], user: str | None) -> int:
    """Every rank on this machine, rank i on `places[i]`."""
    account, identity_env = _account(user)
    port = free_port()
    ranks = Ranks()
    for rank, (node, indices) in enumerate(places):
        env = {**os.environ, **identity_env,
               **rank_environment(rank, len(places), node, indices, "127.0.0.1", port)}
        ranks.start(command, env, account)
    return ranks.wait()


def run_slurm(command: list[str], user: str | None) -> int:
    """On the allocation's first node: `srun` one task per node, each this module again."""
    tasks = int(os.environ.get("SLURM_NNODES") or os.environ.get("SLURM_JOB_NUM_NODES") or 1)
    argv = ["srun", "--kill-on-bad-exit=1", f"--nodes={tasks}", f"--ntasks={tasks}",
            "--ntasks-per-node=1", "--export=ALL", sys.executable, "-m",
            "andreas.executors.gang", "--slurm-task", f"--port={free_port()}",
            *(["--user", user] if user else []), "--", *command]
    ranks = Ranks()
    ranks.start(argv, dict(os.environ), {})
    returncode = ranks.wait()
    # srun reports a task killed by signal N as status 128 + N: the gang was killed
    if 128 < returncode < 128 + signal.NSIG:
        return -(returncode - 128)
    return returncode


def run_slurm_task(command: list[str], user: str | None, port: int) -> int:
    """One rank, started by `srun`: its rank and the first node's address from Slurm."""
    account, identity_env = _account(user)
    env = dict(os.environ)
    env.update(identity_env)
    env.update(rank_environment(
        int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"]),
        env.get("SLURMD_NODENAME", socket.gethostname()), env.get("CUDA_VISIBLE_DEVICES", ""),
        env.get("SLURM_LAUNCH_NODE_IPADDR", "127.0.0.1"), port,
        local_rank=int(env.get("SLURM_LOCALID", 0))))
    ranks = Ranks()
    ranks.start(command, env, account)
    return ranks.wait()


def run_one_rank(rank: int, world: int, master: str, node: str, command: list[str],
                 user: str | None) -> int:
    """One rank on this node, the others started elsewhere as well (the ray executor: an
    actor per node); this node's CUDA_VISIBLE_DEVICES as the executor set it."""
    account, identity_env = _account(user)
    addr, _, port = master.rpartition(":")
    env = {**os.environ, **identity_env,
           **rank_environment(rank, world, node, os.environ.get("CUDA_VISIBLE_DEVICES", ""),
                              addr, int(port))}
    ranks = Ranks()
    ranks.start(command, env, account)
    return ranks.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="andreas-gang")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--place", action="append", type=parse_place,
                       help="NODE=GPU,GPU...: one rank there (in rank order)")
    where.add_argument("--slurm", action="store_true", help="the ranks through srun")
    where.add_argument("--slurm-task", action="store_true", help=argparse.SUPPRESS)
    where.add_argument("--rank", type=int, help="this node's rank alone (with --world, "
                       "--master and --node): the other ranks start elsewhere")
    parser.add_argument("--world", type=int, default=1, help="with --rank: the ranks")
    parser.add_argument("--master", default="127.0.0.1:0", help="with --rank: ADDR:PORT")
    parser.add_argument("--node", default="", help="with --rank: this node's name")
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--user", default=None, help="run the ranks as this OS user")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("expected the job's command after --")
    try:
        if args.place:
            return end_as(run_local(args.place, command, args.user))
        if args.slurm:
            return end_as(run_slurm(command, args.user))
        if args.rank is not None:
            return end_as(run_one_rank(args.rank, args.world, args.master, args.node, command,
                                       args.user))
        return end_as(run_slurm_task(command, args.user, args.port))
    except (OSError, IdentityError) as exc:
        print(f"andreas: cannot start the gang's ranks: {exc}", file=sys.stderr, flush=True)
        return 127


if __name__ == "__main__":
    sys.exit(main())
