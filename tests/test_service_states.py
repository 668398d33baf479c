"""What a job becomes when a run ends (`service.states.after_run`), branch by branch, and as
properties over every combination of what can be known then."""

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from andreas.service.states import (
    ACTIVE_STATES,
    FINAL_STATES,
    WAITING_STATES,
    JobState,
    RunEnd,
    after_run,
)

END = RunEnd(run_id=7, returncode=0, stop_requested=False, stop_reason=None,
             all_epochs_done=True, cancel_requested=False, launched=True, ever_started=True,
             earlier_crashes=0, max_retries=3, max_runtime_s=None)


def test_each_way_a_run_can_end():
    assert after_run(END).state == JobState.COMPLETED and after_run(END).ends
    # exit 0 without reporting every epoch: the job's own word that it is done
    early = after_run(replace(END, all_epochs_done=False))
    assert early.state == JobState.COMPLETED and early.all_epochs
    # finished, though asked to stop: its work is done
    assert after_run(replace(END, stop_reason="pause")).state == JobState.COMPLETED
    cancelled = after_run(replace(END, stop_reason="cancel", returncode=-15))
    assert (cancelled.state, cancelled.message) == (JobState.CANCELLED, "cancelled by request")
    assert not cancelled.ends  # as before the states were typed: no completion time
    timeout = after_run(replace(END, stop_reason="timeout", returncode=-15, max_runtime_s=60))
    assert timeout.state == JobState.TIMEOUT and "60 s" in timeout.message and timeout.ends
    for reason in ("pause", "move", "shutdown"):
        assert after_run(replace(END, stop_reason=reason, returncode=-15,
                                 all_epochs_done=False)).state == JobState.PAUSED
    locked = after_run(replace(END, returncode=75, all_epochs_done=False))
    assert locked.state == JobState.PAUSED and "lock" in locked.message
    never = replace(END, returncode=None, launched=False, all_epochs_done=False)
    assert after_run(never).state == JobState.PAUSED
    assert after_run(replace(never, ever_started=False)).state == JobState.QUEUED
    failed = after_run(replace(END, returncode=2, all_epochs_done=False))
    assert (failed.state, failed.message, failed.ends) == (
        JobState.FAILED, "exited with code 2", True)


def test_a_killed_run_restarts_until_max_retries_then_fails():
    killed = replace(END, returncode=-9, all_epochs_done=False, max_retries=2)
    first = after_run(killed)
    assert first.state == JobState.PAUSED and first.crashed
    assert first.message == ("run 7 was killed by signal 9; restarting from its checkpoint "
                             "(retry 1 of 2)")
    assert after_run(replace(killed, earlier_crashes=1)).state == JobState.PAUSED
    third = after_run(replace(killed, earlier_crashes=2))
    assert third.state == JobState.FAILED and third.crashed and third.ends
    assert "3 runs were killed, more than max_retries (2)" in third.message
    lost = after_run(replace(killed, returncode=None))  # no exit status: its actor was lost
    assert "killed by a signal" in lost.message and lost.state == JobState.PAUSED


@given(returncode=st.one_of(st.none(), st.integers(-64, 255)),
       stop_requested=st.booleans(),
       stop_reason=st.sampled_from([None, "pause", "move", "shutdown", "cancel", "timeout"]),
       all_epochs_done=st.booleans(), cancel_requested=st.booleans(), launched=st.booleans(),
       ever_started=st.booleans(), earlier_crashes=st.integers(0, 5),
       max_retries=st.integers(0, 4))
def test_every_end_leads_somewhere_sensible(**facts):
    end = RunEnd(run_id=1, max_runtime_s=30.0, **facts)
    out = after_run(end)
    assert out.state in ACTIVE_STATES + FINAL_STATES
    assert out.state != JobState.RUNNING  # the run is over: nothing runs until the next start
    assert out.ends == (out.state in FINAL_STATES and out.state != JobState.CANCELLED)
    if out.state in WAITING_STATES:
        assert not out.ends  # it will be planned again
    if end.cancel_requested or end.stop_reason == "cancel":  # a cancel is obeyed ...
        assert out.state in (JobState.CANCELLED, JobState.COMPLETED)
        if out.state == JobState.COMPLETED:  # ... unless the work was already done
            assert end.returncode == 0
    if out.crashed:
        assert end.returncode is None or end.returncode < 0
        assert (out.state == JobState.FAILED) == (end.earlier_crashes + 1 > end.max_retries)
