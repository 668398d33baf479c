"""Every job the service leaves waiting says why (Decision.reasons through the API)."""

import pytest
from conftest import train_job, wait_for, write_service_files
from fastapi.testclient import TestClient
from helpers import cluster, job, scenario, snapshot

from andreas.policies.base import Assignment
from andreas.policies.decision import Reason
from andreas.service.api import create_app
from andreas.service.config import read_service_config
from andreas.service.planner import waiting_reasons

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = pytest.mark.service

ADMIN = {"Authorization": "Bearer admin-secret"}
ONE_NODE = "nodes:\n  - {name: n1, gpu_type: fast, gpus: 2}\n"


def test_waiting_reasons_by_hand():
    cl = cluster([("n", "T", 2)], {"T": [100, 150]})
    sc = scenario(cl, {"p": {("T", 1): 10.0}}, [job("a"), job("b"), job("c"), job("d")])
    snap = snapshot(sc)
    why = {"b": Reason("held_for_company", until=500.0)}
    previous = {"c": {"reason": "waiting_for_gpus", "text": "waiting for GPUs on node n",
                      "until": 80.0, "node": "n", "job": None}}
    out = waiting_reasons(snap, {"a": Assignment("n", 1)}, why, previous)
    assert set(out) == {"b", "c", "d"}  # every job left out, none that runs
    assert out["b"] == {"reason": "held_for_company", "text": "held for company",
                        "until": 500.0, "node": None, "job": None}
    assert out["c"] == previous["c"]
    assert out["d"]["reason"] == "no_capacity" and out["d"]["until"] is None


def test_a_job_without_room_says_no_capacity(tmp_path):
    config = read_service_config(write_service_files(tmp_path, nodes=ONE_NODE))
    with TestClient(create_app(config, admin_token="admin-secret")) as client:
        ids = [client.post("/jobs", headers=ADMIN, json=train_job(
            40, deadline_s=3600, profile="one")).json()["id"] for _ in range(3)]
        wait_for(lambda: sum(client.get(f"/jobs/{j}", headers=ADMIN).json()["state"]
                             == "running" for j in ids) == 2, what="two jobs to run")
        def planned():  # every job seen by a decision (on a loaded machine the last
            # submission's decision may come after two jobs run)
            jobs = [client.get(f"/jobs/{j}", headers=ADMIN).json() for j in ids]
            return jobs if all(j["reason"] != "not planned yet" for j in jobs) else None

        jobs = wait_for(planned, what="a decision that saw all three jobs")
        queued = [j for j in jobs if j["state"] in ("queued", "paused")]
        assert len(queued) == 1, [(j["state"], j["reason"]) for j in jobs]
        assert queued[0]["reason"].startswith("no capacity"), (queued[0]["state"],
                                                              queued[0]["reason"])
        assert all(j["reason"] is None for j in jobs if j["state"] == "running")
        plan = client.get("/plan", headers=ADMIN).json()
        assert plan["waiting"][queued[0]["id"]]["reason"] == "no_capacity"
        for j in ids:
            client.post(f"/jobs/{j}/cancel", headers=ADMIN)
        wait_for(lambda: all(client.get(f"/jobs/{j}", headers=ADMIN).json()["state"]
                             == "cancelled" for j in ids), what="the jobs to be cancelled")


class Explode:
    """A plan step that fails on real jobs while `armed` (not on the service's warm-up
    decision, so that it starts): a stand-in for any bug in a decision."""

    name = "explode"
    armed = True

    def apply(self, snapshot, decision, ctx):
        if Explode.armed and any(v.job_id != "warm-up" for v in snapshot.jobs):
            raise RuntimeError("boom in a plan step")
        return decision


def test_a_failing_decision_is_shown_not_hidden(tmp_path):
    """A scheduler tick that fails must not leave jobs 'not planned yet' in silence: the jobs
    and /healthz say the latest decision failed and why, it is retried (its reasons are not
    lost) until one passes again, and idle ticks in between do not hide the failure."""
    path = write_service_files(tmp_path)
    path.write_text(path.read_text().replace(
        "policy_options: {seed: 1, consolidate.share: null, wait.share: null, "
        "company.share: null}",
        "policy_options: {seed: 1, steps: [test_service_reasons:Explode]}\n"
        "decide_in: thread"))  # Explode.armed is switched in this process
    config = read_service_config(path)
    Explode.armed = True
    try:
        with TestClient(create_app(config, admin_token="admin-secret")) as client:
            job_id = client.post("/jobs", headers=ADMIN, json=train_job(2)).json()["id"]
            health = wait_for(lambda: (lambda h: h if h["status"] == "degraded" else None)(
                client.get("/healthz").json()), what="the failed tick to show")
            assert "boom in a plan step" in health["scheduler"] and health["failed_ticks"] >= 1
            reason = client.get(f"/jobs/{job_id}", headers=ADMIN).json()["reason"]
            assert "latest decision failed" in reason and "boom in a plan step" in reason
            # the failed decision is retried on its own (its reasons are kept), backing off
            wait_for(lambda: client.get("/healthz").json()["failed_ticks"] >= 3,
                     what="retries of the failed decision")
            assert "latest decision failed" in \
                client.get(f"/jobs/{job_id}", headers=ADMIN).json()["reason"]
            Explode.armed = False  # no new event: the next retry alone must plan the job
            wait_for(lambda: client.get("/healthz").json()["status"] == "ok",
                     what="a passing tick")
            wait_for(lambda: client.get(f"/jobs/{job_id}", headers=ADMIN).json()["state"]
                     == "completed", what="the job to run once decisions pass")
    finally:
        Explode.armed = False


def test_a_waiting_job_knows_how_many_start_before_it(tmp_path):
    # three GPUs, five one-GPU jobs: two wait, one forecast to start before the other
    config = read_service_config(write_service_files(tmp_path))
    body = {"command": ["sleep", "600"], "epochs": 1, "deadline_s": 86400, "profile": "one"}
    with TestClient(create_app(config, admin_token="admin-secret")) as client:
        ids = [client.post("/jobs", headers=ADMIN, json=body).json()["id"] for _ in range(5)]

        def positions():
            jobs = [client.get(f"/jobs/{j}", headers=ADMIN).json() for j in ids]
            waiting = [j for j in jobs if j["state"] == "queued"]
            found = sorted(j["queue_position"] for j in waiting if j["queue_position"])
            return found if len(waiting) == 2 and len(found) == 2 else None
        assert wait_for(positions, timeout=60, what="two waiting jobs with positions") \
            == [1, 2]
        running = [client.get(f"/jobs/{j}", headers=ADMIN).json() for j in ids]
        assert all(j["queue_position"] is None for j in running if j["state"] == "running")
        for j in ids:
            client.post(f"/jobs/{j}/cancel", headers=ADMIN)
        for j in ids:
            wait_for(lambda j=j: client.get(f"/jobs/{j}", headers=ADMIN).json()["state"] ==
                     "cancelled", timeout=60, what=f"{j} to be stopped")
