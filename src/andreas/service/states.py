"""The states of a job and of a run, and the one rule for what a job becomes when a run ends.

A job is `queued` until its first run starts, `running` while a run is live, `paused` between
runs, and ends `completed`, `failed`, `cancelled` or `timeout`. A run (one process of a job on
one node) is `starting` from the moment it is recorded (before its process exists, so that a
crash in between loses nothing), `running` once the executor has it, and `ended`.

`after_run` says what a job becomes when one of its runs ends, from what is known at that
moment (`RunEnd`): it is pure, so every branch is tested without a database or a process.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ..executors.launch import LOCKED_EXIT


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"


ACTIVE_STATES = (JobState.QUEUED, JobState.RUNNING, JobState.PAUSED)
WAITING_STATES = (JobState.QUEUED, JobState.PAUSED)  # no live run: may be started, cancelled
FINAL_STATES = (JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT)


class RunState(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    ENDED = "ended"


LIVE_RUN_STATES = (RunState.STARTING, RunState.RUNNING)

CANCELLED_MESSAGE = "cancelled by request"


@dataclass(frozen=True)
class RunEnd:
    """What is known when run `run_id` of a job ends."""

    run_id: int
    returncode: int | None  # None: no exit status (killed with its launcher, actor lost)
    stop_requested: bool  # the launcher was asked to stop (SIGTERM), by us or an operator
    stop_reason: str | None  # why the service stopped it: pause, move, shutdown, cancel, timeout
    all_epochs_done: bool  # every epoch reported
    cancel_requested: bool
    launched: bool  # the executor started its process (it has a handle)
    ever_started: bool  # some run of the job started before
    earlier_crashes: int  # the job's runs killed from outside before this one
    max_retries: int
    max_runtime_s: float | None


@dataclass(frozen=True)
class Outcome:
    """What the job becomes: its `state`; `message` (None: keep the one it has); `ends`: its
    completion time is now (a cancelled job has none); `crashed`: this run was killed from
    outside (its stop reason says so, and it counts against max_retries); `all_epochs`: count
    every epoch done (it exited 0 without reporting them all)."""

    state: JobState
    message: str | None = None
    ends: bool = False
    crashed: bool = False
    all_epochs: bool = False


def after_run(end: RunEnd) -> Outcome:
    """What a job becomes when run `end.run_id` ends. In order: a run that did its work
    completes the job (even if asked to stop); a cancelled job is cancelled; a run stopped at
    its wall-time limit ends the job `timeout`; a run the service paused or moved, or that was
    asked to stop, leaves it paused; exit 0 completes it; a second copy refused by the job's
    lock retries; a run whose process never started puts it back; a run killed from outside
    restarts from its checkpoint up to `max_retries`, then fails; any other exit fails it."""
    if end.returncode == 0 and end.all_epochs_done and end.stop_reason != "cancel":
        return Outcome(JobState.COMPLETED, ends=True)
    if end.stop_reason == "cancel" or end.cancel_requested:
        return Outcome(JobState.CANCELLED, CANCELLED_MESSAGE)
    if end.stop_reason == "timeout":
        return Outcome(JobState.TIMEOUT, f"stopped at its wall-time limit of "
                                         f"{end.max_runtime_s:g} s", ends=True)
    if end.stop_reason in ("pause", "move", "shutdown") or end.stop_requested:
        return Outcome(JobState.PAUSED)
    if end.returncode == 0:
        return Outcome(JobState.COMPLETED, ends=True, all_epochs=True)
    if end.returncode == LOCKED_EXIT:
        return Outcome(JobState.PAUSED, "a previous copy still held the job's lock; will retry")
    if not end.launched and end.returncode is None:
        return Outcome(JobState.PAUSED if end.ever_started else JobState.QUEUED)
    if end.returncode is None or end.returncode < 0:  # the OOM killer, an operator, a lost actor
        crashes = end.earlier_crashes + 1
        how = "by a signal" if end.returncode is None else f"by signal {-end.returncode}"
        if crashes <= end.max_retries:
            return Outcome(JobState.PAUSED, f"run {end.run_id} was killed {how}; restarting from "
                                            f"its checkpoint (retry {crashes} of "
                                            f"{end.max_retries})", crashed=True)
        return Outcome(JobState.FAILED, f"run {end.run_id} was killed {how}; {crashes} runs "
                                        f"were killed, more than max_retries "
                                        f"({end.max_retries})", ends=True, crashed=True)
    return Outcome(JobState.FAILED, f"exited with code {end.returncode}", ends=True)
