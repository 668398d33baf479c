"""No input can stop the cluster: every submission the API accepts can be planned (derived
quantities bounded, not only raw fields), a job the policy still cannot plan fails alone with
the reason, and draining a node plans the rest over the remaining nodes."""

import math

import pytest
from conftest import scheduler_with_queued_jobs, wait_for, write_service_files
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from andreas.service.api import create_app
from andreas.service.config import read_service_config
from andreas.service.db import JobRow
from andreas.service.learning import FACTOR_BOUNDS, speed_factor
from andreas.service.planner import minimal_failing

ADMIN = {"Authorization": "Bearer admin-secret"}
ZERO_RUN = {"command": ["true"], "epochs": 0.001, "deadline_s": 600,
            "inline_profile": [{"gpu_type": "fast", "gpus": 1, "seconds_per_epoch": 5e-324}]}


def app(tmp_path, extra=""):
    return create_app(read_service_config(write_service_files(tmp_path, extra=extra)),
                      admin_token="admin-secret")


@pytest.mark.service
def test_a_run_of_zero_seconds_is_refused_naming_the_fields(tmp_path):
    # each field is in range; their product, 0.001 epochs of 5e-324 s, is a run of exactly
    # 0 s, which the ATC order divides by: once accepted, it stopped every user's planning
    with TestClient(app(tmp_path)) as client:
        answer = client.post("/jobs", headers=ADMIN, json=ZERO_RUN)
        assert answer.status_code == 422
        assert answer.json()["detail"].startswith(
            "epochs x inline_profile seconds_per_epoch: 0.001 epochs of 4.94066e-324 s on 1 "
            "fast is a run of 0 s; expected 0.01 s to")
        ten_thousand_years = {**ZERO_RUN, "epochs": 1e9, "inline_profile": [
            {"gpu_type": "fast", "gpus": 1, "seconds_per_epoch": 1e9}]}
        answer = client.post("/jobs", headers=ADMIN, json=ten_thousand_years)
        assert answer.status_code == 422 and "a run of 1e+18 s" in answer.json()["detail"]
        named = client.post("/jobs", headers=ADMIN, json={
            "command": ["true"], "epochs": 0.001, "deadline_s": 600, "profile": "mlp"})
        assert named.status_code == 422 and "epochs x profile seconds_per_epoch" in \
            named.json()["detail"]


@pytest.mark.service
def test_a_due_date_before_the_submission_is_refused(tmp_path):
    with TestClient(app(tmp_path)) as client:
        answer = client.post("/jobs", headers=ADMIN, json={
            "command": ["true"], "epochs": 1, "due_date": 1000.0, "profile": "mlp"})
        assert answer.status_code == 422
        assert answer.json()["detail"].startswith("due_date: 1000 is before the submission")


def test_a_job_that_posts_progress_as_fast_as_it_can_keeps_a_run_time(tmp_path):
    class Report:
        def __init__(self, time, done):
            self.run_id, self.time, self.epochs_done = 1, time, done
    # 1e6 epochs reported done a microsecond apart: measured 1e-12 of the profile's time
    fast = speed_factor([Report(0.0, 0.0), Report(1e-6, 1e6)], {1: 1.0})
    slow = speed_factor([Report(0.0, 0.0), Report(1e9, 1.0)], {1: 1.0})
    assert (fast, slow) == FACTOR_BOUNDS


def test_a_profile_so_fast_its_expected_seconds_underflow_learns_nothing_and_does_not_fail():
    """5e-324 s per epoch (a row from before run times were bounded) times half an epoch is
    0.0: the pair says nothing. It used to divide the speed's spread by zero at every report."""
    from andreas.service.learning import speed_evidence

    class Report:
        def __init__(self, time, done):
            self.run_id, self.time, self.epochs_done = 1, time, done
    reports = [Report(float(t), 0.5 * t) for t in range(5)]
    evidence = speed_evidence(reports, {1: 5e-324})
    assert (evidence.factor, evidence.spread, evidence.pairs) == (None, None, 0)


def _poisoned(tmp_path):
    """A scheduler with jobs a and b queued, a late job (due at t=1 s: a quarter of the queue
    is past hope, so the order turns to ATC, which divides by run times) and a job whose run
    is 0 s, as the API accepted before it bounded run times (a database from then)."""
    config = read_service_config(write_service_files(tmp_path, extra="decide_in: thread\n"))
    scheduler = scheduler_with_queued_jobs(config, ["a", "b"])
    with scheduler.store.session() as s:
        common = dict(owner_id=1, command=["true"], submitted_at=0.0, weight=1.0,
                      state="queued", epochs_done=0.0, cancel_requested=False, speed_factor=1.0)
        s.add(JobRow(id="late", name="late", epochs=3.0, due_date=1.0, profile_name="mlp",
                     **common))
        s.add(JobRow(id="zero", name="zero", epochs=0.001, due_date=1e10, profile_name=None,
                     inline_profile=[{"gpu_type": "fast", "gpus": 1,
                                      "seconds_per_epoch": 5e-324}], **common))
    return scheduler


@pytest.mark.service
def test_a_job_the_policy_cannot_plan_fails_alone_and_the_others_run(tmp_path):
    scheduler = _poisoned(tmp_path)
    try:
        scheduler.tick()  # before: ZeroDivisionError, every tick, until the job was cancelled
        with scheduler.store.session() as s:
            states = {j.id: (j.state, j.message or "") for j in s.query(JobRow)}
        assert states["zero"][0] == "failed"
        assert states["zero"][1].startswith("the scheduler cannot plan this job "
                                            "(ZeroDivisionError: float division by zero)")
        assert {states[j][0] for j in ("a", "late")} == {"running"}
        assert states["b"][0] == "queued"  # the fast node's two GPUs are taken
        assert scheduler.board.last_error is None and scheduler.planner.forecast_cut is None
    finally:
        scheduler.shutdown(stop_jobs=True)


@given(st.integers(2, 60).flatmap(lambda n: st.tuples(
    st.just(n), st.sets(st.integers(0, n - 1), min_size=1, max_size=3))))
@settings(max_examples=200, deadline=None)
def test_the_reduction_finds_exactly_the_jobs_that_fail_together(case):
    n, culprits = case
    calls = []

    def fails(part):
        calls.append(len(part))
        return culprits <= set(part)
    assert set(minimal_failing(list(range(n)), fails)) == culprits
    assert len(calls) <= 4 * len(culprits) * n  # bounded, and far less for one culprit
    if len(culprits) == 1:
        assert len(calls) <= 2 * math.ceil(math.log2(n)) + 2


@pytest.mark.service
def test_draining_the_only_node_of_a_type_plans_the_rest_and_says_why(tmp_path):
    # n2 is the only slow node: a job that runs only on slow GPUs cannot start while it is
    # drained. Before, every tick failed ("left 1 job(s) waiting on an idle cluster"), the plan
    # froze for every user and each job's reason was the traceback, until undrain
    slow_only = {"command": ["sleep", "60"], "epochs": 1, "deadline_s": 600,
                 "inline_profile": [{"gpu_type": "slow", "gpus": 1, "seconds_per_epoch": 1}]}
    with TestClient(app(tmp_path)) as client:
        assert client.post("/nodes/n2/drain", headers=ADMIN).status_code == 200
        waiting = client.post("/jobs", headers=ADMIN, json=slow_only).json()["id"]
        other = client.post("/jobs", headers=ADMIN, json={
            "command": ["sleep", "60"], "epochs": 1, "deadline_s": 600,
            "profile": "one"}).json()["id"]
        wait_for(lambda: client.get(f"/jobs/{other}", headers=ADMIN).json()["state"] ==
                 "running", timeout=60, what="the job that can run on n1 to start")
        job = wait_for(lambda: (lambda j: j if j["reason_code"] == "drained_out" else None)(
            client.get(f"/jobs/{waiting}", headers=ADMIN).json()), timeout=60,
            what="the slow-only job to say why it waits")
        assert job["state"] == "queued"
        assert "every node that can run it is drained (n2)" in job["reason"]
        health = client.get("/healthz").json()
        assert health["status"] == "ok", health
        client.post("/nodes/n2/undrain", headers=ADMIN)
        wait_for(lambda: client.get(f"/jobs/{waiting}", headers=ADMIN).json()["state"] ==
                 "running", timeout=60, what="the slow-only job to start once undrained")
        for job_id in (waiting, other):
            client.post(f"/jobs/{job_id}/cancel", headers=ADMIN)
        for job_id in (waiting, other):  # stopped before the service is: none left over
            wait_for(lambda j=job_id: client.get(f"/jobs/{j}", headers=ADMIN).json()["state"] ==
                     "cancelled", timeout=60, what=f"{job_id} to be stopped")


def test_a_paused_job_names_the_job_that_took_its_gpus():
    from helpers import cluster, job, scenario, snapshot

    from andreas.policies.base import Assignment
    from andreas.service.planner import waiting_reasons

    sc = scenario(cluster([("n1", "fast", 2)], {"fast": [100, 200]}),
                  {"p": {("fast", 2): 10.0}}, [job("old"), job("urgent", due=50)])
    snap = snapshot(sc, now=1.0, running={"old": ("n1", 2)})
    plan = {"urgent": Assignment("n1", 2)}  # the policy gave no reason: before, "no capacity"
    why = waiting_reasons(snap, plan, {}, {})
    assert why["old"]["reason"] == "paused_for" and why["old"]["text"] == "paused for job urgent"
    # a waiting job that nothing displaced keeps the plain reason
    assert waiting_reasons(snapshot(sc, now=1.0), {"old": Assignment("n1", 2)}, {}, {})[
        "urgent"]["reason"] == "no_capacity"
