"""The wrapper every executor starts a job through: `python -m andreas.executors.launch`.

It exists so that the service can die (even by `kill -9`) without losing track of a job:

- it takes an exclusive lock on the job's lock file, so two copies of one job never run at
  once, whatever the service believed when it started them (exit code 75 if the lock is held);
- it writes its pid to the run directory before it starts the command, and the command's exit
  status to ``exit.json`` after it, so a restarted service learns what happened while it was
  down;
- it starts the command in its own process group (the wrapper is the group's leader) and turns
  SIGTERM into "stop requested": the job gets the same SIGTERM and the wrapper waits for it;
- the command dies with the wrapper (Linux: PR_SET_PDEATHSIG), so a killed wrapper leaves no
  orphan that would run on beside the copy the service starts next;
- with ``--user NAME`` the command runs as that unprivileged OS account (`identity.py`), while
  the wrapper keeps the executor's privileges: the job cannot rewrite its exit status, read
  the service's secrets or signal the service; the account is resolved on the node it runs on;
- with ``--exit-with-parent`` (the Ray executor, whose actor holds the job's GPUs) the wrapper
  stops the command when the process that started it dies: Ray hands a dead actor's GPUs to
  the next task, so the job must not run on there unseen.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from .identity import IdentityError, JobIdentity

LOCKED_EXIT = 75  # EX_TEMPFAIL: another copy of this job holds the lock
PARENT_POLL_S = 0.5  # how often --exit-with-parent looks for its parent
ORPHAN_GRACE_S = 10.0  # SIGTERM first (a checkpoint may be written), then SIGKILL
ORPHANED = "the process that started this job died"  # in the log and exit.json


def write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _dies_with(parent: int):
    """In the child, before the command: on Linux, be killed when the wrapper dies (even by
    SIGKILL), so that no job runs on unsupervised, its lock released, while the service starts
    another copy. Elsewhere the executor kills the wrapper's process group instead."""
    def arrange() -> None:
        try:
            import ctypes

            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            return
        if os.getppid() != parent:  # the wrapper died before we asked
            os._exit(1)
    return arrange


def _account(user: str | None) -> tuple[dict, dict[str, str] | None]:
    """The Popen arguments and environment that start the command as `user` (None: as this
    wrapper); an IdentityError if that account cannot be used here."""
    if user is None:
        return {}, None
    identity = JobIdentity.lookup(user)
    identity.check_switchable()
    return identity.popen_kwargs(), {**os.environ, **identity.environment()}


def stop_when_orphaned(parent: int, child: subprocess.Popen, log, state: dict) -> None:
    """Watch (in a daemon thread) for the death of `parent`, the process that started this
    wrapper; then mark the run orphaned in `state` and stop `child` as a stop request would:
    SIGTERM (it may write a checkpoint), and SIGKILL to the wrapper's whole process group
    after a grace. Polling works wherever the parent ran us from (a thread of a Ray worker
    included, which PR_SET_PDEATHSIG cannot follow)."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        state["orphaned"] = True
        log.write(f"andreas: {ORPHANED}; stopping the job\n".encode())
        try:
            child.send_signal(signal.SIGTERM)
            child.wait(ORPHAN_GRACE_S)
        except (OSError, subprocess.TimeoutExpired):
            end_group()

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def end_group() -> None:
    """SIGKILL to what is left of this wrapper's process group (the job's own children), the
    wrapper included, when the wrapper leads it (it was started in its own session)."""
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpgrp(), signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="andreas-launch")
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("--lock", required=True, type=Path)
    parser.add_argument("--log", required=True, type=Path)
    parser.add_argument("--exit-with-parent", action="store_true",
                        help="stop the job when the process that started this wrapper dies")
    parser.add_argument("--user", default=None,
                        help="run the command as this unprivileged OS user (needs root)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    parent = os.getppid()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    args.run_dir.mkdir(parents=True, exist_ok=True)
    stop = {"requested": False, "orphaned": False}

    lock = open(args.lock, "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        write_json(args.run_dir / "exit.json", {"returncode": LOCKED_EXIT, "stop_requested": False,
                                                "reason": "another copy of this job is running",
                                                "ended_at": time.time()})
        return LOCKED_EXIT

    def on_term(signum, frame):  # the job in our group got the same signal
        stop["requested"] = True

    signal.signal(signal.SIGTERM, on_term)
    write_json(args.run_dir / "pid.json", {"pid": os.getpid(), "started_at": time.time()})
    args.log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(args.log, "ab", buffering=0) as log:
        try:
            as_user, env = _account(args.user)
            child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env, **as_user,
                                     preexec_fn=_dies_with(os.getpid()))
        except (OSError, IdentityError) as exc:
            log.write(f"andreas: cannot start {command!r}: {exc}\n".encode())
            write_json(args.run_dir / "exit.json", {"returncode": 127, "stop_requested": False,
                                                    "reason": str(exc), "ended_at": time.time()})
            return 127
        if args.exit_with_parent:
            stop_when_orphaned(parent, child, log, stop)
        while True:
            try:
                returncode = child.wait()
                break
            except InterruptedError:  # pragma: no cover - PEP 475 retries for us
                continue
    write_json(args.run_dir / "exit.json", {
        "returncode": returncode, "stop_requested": stop["requested"], "ended_at": time.time(),
        **({"reason": ORPHANED} if stop["orphaned"] else {})})
    if stop["orphaned"]:
        end_group()  # nothing the job started runs on
    return 0 if returncode == 0 else min(abs(returncode), 255)


if __name__ == "__main__":
    sys.exit(main())
