"""A real Slurm on this one machine, for the slurm executor's tests and for trying it out:
`slurmctld` and one `slurmd` per node (`slurmd -N NAME`, each on its own port), GPUs declared
as typed GRES backed by stand-in device files (no real GPU needed), munge for authentication.

    with LocalSlurm(folder, [("n1", "fast", 2), ("n2", "slow", 1)]) as slurm:
        os.environ.update(slurm.env)          # SLURM_CONF for sbatch, squeue, scancel
        ... executor: slurm in service.yaml ...

Needs Debian's slurmctld, slurmd, slurm-client and munge (`scripts/install-slurm.sh`, which
`make test` runs) and root (the stand-in GPU device files are made with mknod; slurmd runs
jobs as the submitting user).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol", "munged")


def _free_ports(n: int) -> list[int]:
    """`n` distinct ports free now. All held open until all are chosen: asked for one at a
    time, the kernel may hand out a port it just gave back, and the controller and a node's
    slurmd then met on one port (neither started, a flaky test)."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def missing() -> list[str]:
    """The Slurm and munge commands this machine lacks (empty: LocalSlurm can run)."""
    paths = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    return [d for d in DAEMONS if shutil.which(d, path=paths) is None]


class LocalSlurm:
    def __init__(self, folder: Path, nodes: list[tuple[str, str, int]], *,
                 partition: str = "andreas") -> None:
        """`nodes`: (name, GPU type, GPUs) per node, all on this machine."""
        self.folder = folder.resolve()
        self.nodes = nodes
        self.partition = partition
        self.conf = self.folder / "slurm.conf"
        self.env = {"SLURM_CONF": str(self.conf)}
        self.procs: list[subprocess.Popen] = []

    # ------------------------------------------------------------------ configuration
    def write(self) -> None:
        f = self.folder
        for sub in ("state", "log", "dev", *(f"spool/{n}" for n, _, _ in self.nodes)):
            (f / sub).mkdir(parents=True, exist_ok=True)
        host = socket.gethostname().split(".")[0]
        controller_port, *node_ports = _free_ports(1 + len(self.nodes))
        lines = [
            "ClusterName=andreaslocal", f"SlurmctldHost={host}",
            f"SlurmctldPort={controller_port}", "SlurmUser=root", "SlurmdUser=root",
            "AuthType=auth/munge", f"StateSaveLocation={f}/state",
            f"SlurmdSpoolDir={f}/spool/%n", f"SlurmctldPidFile={f}/slurmctld.pid",
            f"SlurmdPidFile={f}/slurmd-%n.pid", f"SlurmctldLogFile={f}/log/slurmctld.log",
            f"SlurmdLogFile={f}/log/slurmd-%n.log", "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none", "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core", "GresTypes=gpu",
            "ReturnToService=2", "MpiDefault=none", "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none", "MinJobAge=600", "KillWait=5",
            "SchedulerParameters=sched_interval=2",
        ]
        gres = ["AutoDetect=off"]
        for (name, gpu_type, gpus), port in zip(self.nodes, node_ports):
            lines.append(f"NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 "
                         f"Port={port} CPUs={max(2, gpus)} RealMemory=1000 "
                         f"Gres=gpu:{gpu_type}:{gpus} State=UNKNOWN")
            devices = []
            for i in range(gpus):
                dev = f / "dev" / f"{name}-gpu{i}"
                if not dev.exists():  # a stand-in GPU: Slurm wants a character device
                    os.mknod(dev, 0o666 | 0o020000, os.makedev(1, 3))
                devices.append(str(dev))
            gres.append(f"NodeName={name} Name=gpu Type={gpu_type} File={','.join(devices)}")
        lines.append(f"PartitionName={self.partition} Nodes={','.join(n for n, _, _ in self.nodes)}"
                     " Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO")
        self.conf.write_text("\n".join(lines) + "\n")
        (f / "gres.conf").write_text("\n".join(gres) + "\n")

    # ------------------------------------------------------------------ daemons
    def _munge(self) -> None:
        if subprocess.run(["munge", "-n"], capture_output=True).returncode == 0:
            return  # a munged already answers
        run = Path("/run/munge")
        run.mkdir(parents=True, exist_ok=True)
        shutil.chown(run, "munge", "munge")
        subprocess.run(["runuser", "-u", "munge", "--", "munged"], check=True,
                       capture_output=True, timeout=30)
        self._wait(lambda: subprocess.run(["munge", "-n"], capture_output=True).returncode == 0,
                   "munged")

    def _spawn(self, argv: list[str], log: str) -> None:
        out = open(self.folder / "log" / log, "ab")
        self.procs.append(subprocess.Popen(argv, env={**os.environ, **self.env}, stdout=out,
                                           stderr=subprocess.STDOUT, start_new_session=True))

    def _wait(self, ready, what: str, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"local Slurm: {what} not ready in {timeout_s:.0f} s "
                           f"(logs in {self.folder / 'log'})")

    def scontrol(self, *args: str) -> str:
        return subprocess.run(["scontrol", *args], env={**os.environ, **self.env},
                              capture_output=True, text=True, timeout=30).stdout

    def _all_idle(self) -> bool:
        out = subprocess.run(["sinfo", "--noheader", "--Node", "--format=%N %T"],
                             env={**os.environ, **self.env}, capture_output=True, text=True,
                             timeout=30).stdout.split()
        states = dict(zip(out[::2], out[1::2]))
        if any("drain" in s or "inval" in s or "down" in s for s in states.values()):
            self.scontrol("update", f"nodename={','.join(states)}", "state=resume")
        return len(states) == len(self.nodes) and all(s == "idle" for s in states.values())

    def start(self) -> "LocalSlurm":
        lacking = missing()
        if lacking:
            raise RuntimeError(f"local Slurm needs {', '.join(lacking)} (Debian: slurmctld "
                               "slurmd slurm-client munge; scripts/install-slurm.sh)")
        self.write()
        self._munge()
        try:
            self._spawn(["slurmctld", "-D", "-i", "-f", str(self.conf)], "slurmctld.out")
            self._wait(lambda: "is UP" in self.scontrol("ping"), "slurmctld")
            for name, _, _ in self.nodes:
                self._spawn(["slurmd", "-D", "-N", name, "-f", str(self.conf)], f"{name}.out")
            self._wait(self._all_idle, "the nodes")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        subprocess.run(["scancel", f"--partition={self.partition}"],
                       env={**os.environ, **self.env}, capture_output=True, timeout=30)
        for proc in reversed(self.procs):
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        self.procs.clear()

    def __enter__(self) -> "LocalSlurm":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
