"""The helper a training script imports to run under the ANDREAS service.

The service (through its executor) starts a job with these environment variables:

- ``ANDREAS_JOB_ID``: the job's id;
- ``ANDREAS_CHECKPOINT_DIR``: a directory that survives pauses, moves and service restarts;
- ``ANDREAS_PROGRESS_URL`` and ``ANDREAS_PROGRESS_TOKEN``: where to report epochs done;
- ``ANDREAS_EPOCHS``: the number of epochs the job was submitted with;
- ``CUDA_VISIBLE_DEVICES``: the GPUs it was given;
- for a gang over several nodes, the usual rendezvous variables ``RANK``, ``WORLD_SIZE``,
  ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` (what ``torch.distributed``'s
  ``env://`` reads; `andreas.executors.gang` sets them): `rank()` and `world_size()` give
  them, 0 and 1 for a one-node job (examples/train_ddp.py). Rank 0 alone writes checkpoints
  and reports progress (`save_bytes` and `progress` do nothing on the other ranks); every
  rank resumes from rank 0's checkpoint.

A script checkpoints after each epoch, reports progress, and stops between steps once
`should_stop()` is true (the service sends SIGTERM to pause or move it, then SIGKILL after a
grace period). Started again, it resumes from its last checkpoint::

    from andreas import job

    state = job.load("state.npz")            # None on the first start
    for epoch in range(job.resume_epoch(), job.epochs()):
        train_one_epoch()
        if job.should_stop():                 # the partial epoch is dropped
            break
        job.save_bytes("state.npz", data)     # atomic
        job.progress(epoch + 1)

Outside the service every call still works: the checkpoint directory defaults to
``./checkpoints`` and progress is only written to a file.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import signal
import sys
import threading
import time
import urllib.request
from pathlib import Path

__all__ = ["job_id", "checkpoint_dir", "epochs", "should_stop", "progress", "resume_epoch",
           "save_bytes", "load_bytes", "install_stop_handler", "rank", "world_size",
           "local_rank", "is_main"]

PROGRESS_FILE = "andreas-progress.json"
_stop = threading.Event()
_handler_installed = False


def job_id() -> str:
    return os.environ.get("ANDREAS_JOB_ID", "local")


def _int_env(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    try:
        return int(value) if value else default
    except ValueError:
        raise RuntimeError(f"{name}={value!r}: expected a whole number") from None


def rank() -> int:
    """This process's rank in its gang (``RANK``); 0 for a one-node job."""
    return _int_env("RANK", 0)


def world_size() -> int:
    """How many ranks the gang has (``WORLD_SIZE``); 1 for a one-node job."""
    return _int_env("WORLD_SIZE", 1)


def local_rank() -> int:
    """This process's rank on its node (``LOCAL_RANK``); 0 for a one-node job."""
    return _int_env("LOCAL_RANK", 0)


def is_main() -> bool:
    """Whether this process is rank 0: the one that writes checkpoints and reports progress."""
    return rank() == 0


def checkpoint_dir() -> Path:
    path = Path(os.environ.get("ANDREAS_CHECKPOINT_DIR", "checkpoints"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def epochs(default: int | None = None) -> int:
    value = os.environ.get("ANDREAS_EPOCHS")
    if value is None:
        if default is None:
            raise RuntimeError("ANDREAS_EPOCHS is not set; pass a default")
        return default
    return int(float(value))


def install_stop_handler() -> None:
    """Turn SIGTERM into a flag (`should_stop`) so the script can stop at a step boundary."""
    global _handler_installed
    if _handler_installed or threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGTERM, lambda signum, frame: _stop.set())
    _handler_installed = True


def should_stop() -> bool:
    install_stop_handler()
    return _stop.is_set()


def resume_epoch() -> int:
    """Epochs already done according to the last progress report of this job (0 at first)."""
    install_stop_handler()
    try:
        data = json.loads((checkpoint_dir() / PROGRESS_FILE).read_text())
        return int(data.get("epochs_done", 0))
    except (OSError, ValueError):
        return 0


def save_bytes(name: str, data: bytes) -> Path:
    """Write a checkpoint file atomically: a pause in mid-write leaves the old one intact.
    On a rank other than 0 nothing is written (rank 0 writes the gang's checkpoint)."""
    target = checkpoint_dir() / name
    if not is_main():
        return target
    tmp = target.with_name(target.name + ".tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, target)
    return target


def load_bytes(name: str) -> bytes | None:
    try:
        return (checkpoint_dir() / name).read_bytes()
    except FileNotFoundError:
        return None


def progress(epochs_done: float) -> None:
    """Record that `epochs_done` epochs are complete and checkpointed; tell the service.

    The file is written first (the service reads it if a report cannot reach it); the report
    is then posted by a background thread, so the training loop never waits for the service.
    Reports still queued when the script ends are sent before it exits (up to 2 s). Only rank
    0 reports (`is_main`): the other ranks of a gang return at once."""
    if not is_main():
        return
    save_bytes(PROGRESS_FILE, json.dumps({"epochs_done": epochs_done}).encode())
    if os.environ.get("ANDREAS_PROGRESS_URL"):
        _reporter().send(epochs_done)


RETRIES = 3  # attempts per progress report
BACKOFF_S = 0.25  # first wait between attempts, doubling, at most 2 s


class _Reporter:
    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.last_error = ""  # each distinct failure is said once
        self.queue: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._run, name="andreas-progress", daemon=True)
        self.thread.start()
        atexit.register(self.flush)

    def send(self, epochs_done: float) -> None:
        self.queue.put(epochs_done)

    def _run(self) -> None:
        while True:
            value = self.queue.get()
            try:
                self._post(value)
            finally:
                self.queue.task_done()

    def _post(self, value: float) -> None:
        """Post one report, retrying with capped backoff while no newer report is queued; say
        on stderr (the job's log) when the service cannot be reached: the service then learns
        the progress only from the progress file, later, and its predictions suffer."""
        body = json.dumps({"epochs_done": value}).encode()
        error: Exception | None = None
        for attempt in range(RETRIES):
            request = urllib.request.Request(self.url, data=body, method="POST", headers={
                "Content-Type": "application/json", "Authorization": f"Bearer {self.token}"})
            try:
                with urllib.request.urlopen(request, timeout=5):
                    return
            except OSError as exc:
                error = exc
            if not self.queue.empty():
                break  # a newer report supersedes this one
            time.sleep(min(BACKOFF_S * 2 ** attempt, 2.0))
        if str(error) != self.last_error:
            self.last_error = str(error)
            print(f"andreas: cannot report progress to {self.url}: {error} (the service will "
                  "read the progress file instead; check public_url in service.yaml)",
                  file=sys.stderr, flush=True)

    def flush(self, timeout: float = 2.0) -> None:
        deadline = time.monotonic() + timeout
        while self.queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)


_REPORTER: _Reporter | None = None


def _reporter() -> _Reporter:
    global _REPORTER
    if _REPORTER is None:
        _REPORTER = _Reporter(os.environ["ANDREAS_PROGRESS_URL"],
                              os.environ.get("ANDREAS_PROGRESS_TOKEN", ""))
    return _REPORTER
