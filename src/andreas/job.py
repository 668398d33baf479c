"""The helper a training script imports to run under the ANDREAS service.

The service (through its executor) starts a job with these environment variables:

- ``ANDREAS_JOB_ID``: the job's id;
- ``ANDREAS_CHECKPOINT_DIR``: a directory that survives pauses, moves and service restarts;
- ``ANDREAS_PROGRESS_URL`` and ``ANDREAS_PROGRESS_TOKEN``: where to report epochs done;
- ``ANDREAS_EPOCHS``: the number of epochs the job was submitted with;
- ``CUDA_VISIBLE_DEVICES``: the GPUs it was given.

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

import json
import os
import signal
import threading
import urllib.request
from pathlib import Path

__all__ = ["job_id", "checkpoint_dir", "epochs", "should_stop", "progress", "resume_epoch",
           "save_bytes", "load_bytes", "install_stop_handler"]

PROGRESS_FILE = "andreas-progress.json"
_stop = threading.Event()
_handler_installed = False


def job_id() -> str:
    return os.environ.get("ANDREAS_JOB_ID", "local")


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
    """Write a checkpoint file atomically: a pause in mid-write leaves the old one intact."""
    target = checkpoint_dir() / name
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


def progress(epochs_done: float) -> bool:
    """Record that `epochs_done` epochs are complete and checkpointed; tell the service.

    The file is written first (the service reads it if the report cannot reach it), then the
    report is posted. Returns whether the service acknowledged it.
    """
    save_bytes(PROGRESS_FILE, json.dumps({"epochs_done": epochs_done}).encode())
    url = os.environ.get("ANDREAS_PROGRESS_URL")
    if not url:
        return False
    body = json.dumps({"epochs_done": epochs_done}).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json",
        "Authorization": f"Bearer {os.environ.get('ANDREAS_PROGRESS_TOKEN', '')}"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return 200 <= response.status < 300
    except OSError:
        return False
