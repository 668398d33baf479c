"""Per-user quotas and drained nodes (service/quotas.py): the rule by hand, the configuration's
errors, and the live service with real jobs."""

import time

import pytest
from conftest import train_job, wait_for, write_service_files
from fastapi.testclient import TestClient
from helpers import cluster, job, scenario, snapshot

from andreas.policies.base import Assignment
from andreas.service.api import create_app
from andreas.service.config import ScenarioError, read_service_config
from andreas.service.quotas import Limits, Quotas, within_limits

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = pytest.mark.service

ADMIN = {"Authorization": "Bearer admin-secret"}


def test_within_limits_by_hand():
    cl = cluster([("n1", "A", 4), ("n2", "A", 4)], {"A": [100, 150, 200, 250]})
    jobs = [job("run", weight=0.001), job("urgent", weight=0.5, due=100.0),
            job("later", weight=0.5, due=900.0), job("bob", weight=0.001), job("new", weight=1.0)]
    snap = snapshot(scenario(cl, {"p": {("A", 1): 1.0}}, jobs), running={"run": ("n1", 1)})
    plan = {j.job_id: Assignment("n1", 1) for j in jobs[:4]} | {"new": Assignment("n2", 1)}
    owners = {"run": "alice", "urgent": "alice", "later": "alice", "bob": "bob", "new": "carol"}
    quotas = Quotas(Limits(max_gpus=None), {"alice": Limits(max_gpus=2)})
    kept, why = within_limits(snap, plan, owners, quotas, drained={"n2"})
    # alice: the running job keeps its GPU first, then the most urgent (weight, then due date)
    assert set(kept) == {"run", "urgent", "bob"}
    assert why["later"].kind == "over_quota"
    assert why["later"].sentence() == ("over quota: alice's jobs may hold at most 2 GPUs at "
                                       "once and hold 2")
    # a start on a drained node waits; a job running there would stay
    assert why["new"].kind == "node_drained" and why["new"].sentence().startswith("node n2")
    kept, why = within_limits(snap, {"run": Assignment("n1", 1)}, owners, quotas, {"n1"})
    assert kept == {"run": Assignment("n1", 1)} and not why
    assert Quotas(Limits(3, 10), {"a": Limits(max_gpus=1)}).of("a") == Limits(1, 10)


@pytest.mark.parametrize("text, field", [
    ("quotas: {default: {max_gpu: 2}}", "quotas.default.max_gpu"),
    ("quotas: {default: {max_gpus: -1}}", "quotas.default.max_gpus"),
    ("quotas: {users: {alice: {max_queued: 1.5}}}", "quotas.users.alice.max_queued"),
    ("quotas: {everyone: {}}", "quotas.everyone"),
])
def test_bad_quotas_are_named(tmp_path, text, field):
    path = write_service_files(tmp_path, extra=text + "\n")
    with pytest.raises(ScenarioError, match=field.replace(".", r"\.")):
        read_service_config(path)


def test_quotas_hold_a_users_extra_jobs_with_the_reason(tmp_path):
    extra = "quotas: {default: {max_queued: 3}, users: {alice: {max_gpus: 1, max_queued: 1}}}\n"
    config = read_service_config(write_service_files(tmp_path, extra=extra))
    with TestClient(create_app(config, admin_token="admin-secret")) as client:
        tokens = {u: {"Authorization": "Bearer " + client.post(
            "/tokens", headers=ADMIN, json={"user": u}).json()["token"]} for u in ("alice", "bob")}
        body = train_job(200, deadline_s=3600, profile="one", samples=60000)
        first = client.post("/jobs", headers=tokens["alice"], json=body).json()["id"]
        wait_for(lambda: client.get(f"/jobs/{first}", headers=ADMIN).json()["state"]
                 == "running", what="alice's first job to run")
        second = client.post("/jobs", headers=tokens["alice"], json=body)
        assert second.status_code == 201
        third = client.post("/jobs", headers=tokens["alice"], json=body)  # 1 waiting already
        assert third.status_code == 409 and third.json()["detail"].startswith("over quota")
        waiting = wait_for(lambda: (lambda j: j if j["reason"] and "over quota" in j["reason"]
                                    else None)(client.get(f"/jobs/{second.json()['id']}",
                                                          headers=ADMIN).json()),
                           what="the over-quota reason")
        assert waiting["state"] == "queued" and "at most 1 GPUs" in waiting["reason"]
        # bob is not held back by alice's quota: his job runs on the free GPUs
        bob = client.post("/jobs", headers=tokens["bob"], json=body).json()["id"]
        wait_for(lambda: client.get(f"/jobs/{bob}", headers=ADMIN).json()["state"] == "running",
                 what="bob's job to run")
        assert client.get(f"/jobs/{second.json()['id']}", headers=ADMIN).json()["state"] == \
            "queued"
        for j in (first, second.json()["id"], bob):
            client.post(f"/jobs/{j}/cancel", headers=ADMIN)


def test_a_drained_node_gets_no_new_job(tmp_path):
    config = read_service_config(write_service_files(tmp_path))
    with TestClient(create_app(config, admin_token="admin-secret")) as client:
        user = {"Authorization": "Bearer " + client.post(
            "/tokens", headers=ADMIN, json={"user": "u"}).json()["token"]}
        assert client.post("/nodes/n1/drain", headers=user).status_code == 403  # admins only
        assert client.post("/nodes/nope/drain", headers=ADMIN).status_code == 404
        r = client.post("/nodes/n1/drain", headers=ADMIN)
        assert r.status_code == 200 and r.json()["drained"] is True
        body = train_job(40, deadline_s=3600, profile="one", samples=60000)
        ids = [client.post("/jobs", headers=ADMIN, json=body).json()["id"] for _ in range(2)]
        # one runs on n2; the other waits, though n1 has two idle GPUs
        wait_for(lambda: sum(client.get(f"/jobs/{j}", headers=ADMIN).json()["state"]
                             == "running" for j in ids) == 1, what="one job to run")
        nodes = {n["name"]: n for n in client.get("/nodes", headers=ADMIN).json()}
        assert nodes["n1"]["busy"] == {} and nodes["n1"]["drained"]
        undrained_at = time.time()
        assert client.post("/nodes/n1/undrain", headers=ADMIN).json()["drained"] is False
        wait_for(lambda: all(client.get(f"/jobs/{j}", headers=ADMIN).json()["state"]
                             in ("running", "completed") for j in ids), what="undrained")
        runs = [r for j in ids for r in client.get(f"/jobs/{j}/runs", headers=ADMIN).json()]
        on_n1 = [r["started_at"] for r in runs if r["node"] == "n1"]
        assert on_n1 and min(on_n1) >= undrained_at - 0.5  # n1 took a job once undrained
        for j in ids:
            client.post(f"/jobs/{j}/cancel", headers=ADMIN)
