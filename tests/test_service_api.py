"""The REST API end to end, against SQLite and against a real PostgreSQL server."""

import pytest
from conftest import epoch_lines, train_job, wait_for, write_service_files
from fastapi.testclient import TestClient

from andreas.service.api import create_app
from andreas.service.config import read_service_config
from andreas.service.store import Store

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = pytest.mark.service

ADMIN = {"Authorization": "Bearer admin-secret"}


def make_client(tmp_path, database_url, run_scheduler=True):
    config = read_service_config(write_service_files(tmp_path)).with_database(database_url)
    app = create_app(config, admin_token="admin-secret", run_scheduler=run_scheduler)
    return TestClient(app)


def user_headers(client, name):
    r = client.post("/tokens", headers=ADMIN, json={"user": name, "role": "user"})
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['token']}"}


def test_authentication_and_ownership(tmp_path, database_url):
    with make_client(tmp_path, database_url, run_scheduler=False) as client:
        assert client.get("/healthz").status_code == 200  # the one open endpoint
        for path in ("/jobs", "/nodes", "/plan", "/metrics", "/whoami"):
            r = client.get(path)
            assert r.status_code == 401 and "missing token" in r.json()["detail"]
            r = client.get(path, headers={"Authorization": "Bearer wrong"})
            assert r.status_code == 401 and "invalid" in r.json()["detail"]
        alice, bob = user_headers(client, "alice"), user_headers(client, "bob")
        assert client.get("/whoami", headers=alice).json() == {"user": "alice", "role": "user"}
        job = client.post("/jobs", headers=alice, json=train_job(3)).json()
        # bob may neither see, read the logs of, nor cancel alice's job
        for method, path in (("get", f"/jobs/{job['id']}"), ("get", f"/jobs/{job['id']}/logs"),
                             ("post", f"/jobs/{job['id']}/cancel")):
            r = getattr(client, method)(path, headers=bob)
            assert r.status_code == 403 and "another user" in r.json()["detail"]
        assert client.get("/jobs", headers=bob).json() == []
        assert [j["id"] for j in client.get("/jobs", headers=alice).json()] == [job["id"]]
        assert [j["id"] for j in client.get("/jobs", headers=ADMIN).json()] == [job["id"]]
        # users cannot make tokens; a job's progress needs its run token or its owner's
        assert client.post("/tokens", headers=alice, json={"user": "eve"}).status_code == 403
        r = client.post(f"/jobs/{job['id']}/progress", headers=bob, json={"epochs_done": 1})
        assert r.status_code == 403
        r = client.post(f"/jobs/{job['id']}/cancel", headers=alice)
        assert r.status_code == 202 and r.json()["state"] == "cancelled"
        assert client.post(f"/jobs/{job['id']}/cancel", headers=alice).status_code == 409
        assert client.get("/jobs/nope", headers=alice).status_code == 404


def test_tokens_are_stored_hashed(tmp_path, database_url):
    store = Store(database_url)
    _, token = store.create_token("carol", "user")
    from sqlalchemy import select

    from andreas.service.db import Token

    with store.session() as s:
        stored = [t.token_hash for t in s.scalars(select(Token))]
    assert token not in stored and len(stored) == 1 and len(stored[0]) == 64
    assert store.user_for(token).name == "carol"
    assert store.user_for(token + "x") is None


@pytest.mark.parametrize("body, status, message", [
    ({"epochs": 3, "deadline_s": 60, "profile": "mlp"}, 400, "exactly one of 'command'"),
    ({"command": ["true"], "epochs": 3, "profile": "mlp"}, 400, "'due_date'"),
    ({"command": ["true"], "epochs": 3, "deadline_s": 60, "profile": "nope"}, 400,
     "unknown profile 'nope'"),
    ({"command": ["true"], "epochs": 3, "deadline_s": 60,
      "inline_profile": [{"gpu_type": "h100", "gpus": 1, "seconds_per_epoch": 1}]}, 400,
     "inline_profile[0].gpu_type: unknown GPU type 'h100'"),
    ({"command": ["true"], "epochs": 3, "deadline_s": 60,
      "inline_profile": [{"gpu_type": "fast", "gpus": 4, "seconds_per_epoch": 1}]}, 400,
     "no node of the cluster can run"),
    ({"command": ["true"], "epochs": 0, "deadline_s": 60, "profile": "mlp"}, 422,
     "epochs: Input should be greater than or equal to 0.001"),
    ({"command": ["true"], "epochs": 2, "deadline_s": 60, "profile": "mlp", "priority": 9},
     422, "priority: Input should be less than or equal to 5"),
    ({"command": ["true"], "epochs": 2, "deadline_s": 60, "profile": "mlp", "weight": 1,
      "priority": 2}, 400, "not both"),
    ({"script": "/no/such.py", "epochs": 2, "deadline_s": 60, "profile": "mlp"}, 400,
     "no such file"),
])
def test_bad_submissions_are_refused_with_a_message(tmp_path, body, status, message):
    with make_client(tmp_path, f"sqlite:///{tmp_path}/s.db", run_scheduler=False) as client:
        r = client.post("/jobs", headers=ADMIN, json=body)
        assert r.status_code == status, r.text
        assert message in r.json()["detail"]
        assert client.get("/jobs", headers=ADMIN).json() == []  # nothing half-written


def test_jobs_run_to_completion_with_plan_nodes_logs_and_metrics(tmp_path, database_url):
    with make_client(tmp_path, database_url) as client:
        ids = [client.post("/jobs", headers=ADMIN, json=train_job(8, priority=p)).json()["id"]
               for p in (1, 3, 5)]
        plan = wait_for(lambda: client.get("/plan", headers=ADMIN).json()["assignments"] or None,
                        what="a plan")
        nodes = {n["name"]: n for n in client.get("/nodes", headers=ADMIN).json()}
        assert set(plan) <= set(ids) and nodes["n1"]["gpus"] == 2
        busy = sum(len(n["busy"]) for n in nodes.values())
        assert 0 <= busy <= 3
        wait_for(lambda: all(j["state"] == "completed"
                             for j in client.get("/jobs", headers=ADMIN).json()),
                 timeout=90, what="all jobs to complete")
        for job_id in ids:
            job = client.get(f"/jobs/{job_id}", headers=ADMIN).json()
            assert job["epochs_done"] == 8 and job["completed_at"] >= job["first_started_at"]
            assert job["predicted"]["total_cost"] > 0 and job["measured"]["energy_cost"] > 0
            assert sorted(epoch_lines(client.get(f"/jobs/{job_id}/logs",
                                                 headers=ADMIN).text)) == list(range(1, 9))
        text = client.get("/metrics", headers=ADMIN).text
        from prometheus_client.parser import text_string_to_metric_families

        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for family in text_string_to_metric_families(text) for s in family.samples}
        assert samples[("andreas_jobs", (("state", "completed"),))] == 3
        assert samples[("andreas_gpus", (("gpu_type", "fast"),))] == 2
        assert samples[("andreas_gpus_busy", (("gpu_type", "slow"),))] == 0
        decisions = samples[("andreas_decisions_total", ())]
        assert decisions >= 1 and samples[("andreas_decision_seconds_count", ())] == decisions
        assert not any(j in text for j in ids)  # no series per job
        energy = samples[("andreas_energy_cost_eur_total", ())]
        per_job = sum(client.get(f"/jobs/{j}", headers=ADMIN).json()["measured"]["energy_cost"]
                      for j in ids)
        assert energy == pytest.approx(per_job, rel=1e-9)


def test_openapi_docs_are_served(tmp_path):
    with make_client(tmp_path, f"sqlite:///{tmp_path}/s.db", run_scheduler=False) as client:
        assert client.get("/docs").status_code == 200
        paths = client.get("/openapi.json").json()["paths"]
        for path in ("/jobs", "/jobs/{job_id}", "/jobs/{job_id}/cancel", "/jobs/{job_id}/logs",
                     "/jobs/{job_id}/progress", "/nodes", "/plan", "/metrics", "/healthz"):
            assert path in paths


def test_migrations_are_idempotent_and_keep_data(tmp_path, database_url):
    store = Store(database_url)
    _, token = store.create_token("dave", "admin")
    store.close()
    again = Store(database_url)  # upgrading an up-to-date schema changes nothing
    assert again.user_for(token).role == "admin"
    with again.engine.connect() as conn:
        from sqlalchemy import text

        version = conn.execute(text("select version_num from alembic_version")).scalar()
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from andreas.service.store import MIGRATIONS

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    assert version == ScriptDirectory.from_config(config).get_current_head() == "0008"


def test_batch_submission_is_all_or_nothing(tmp_path):
    with make_client(tmp_path, f"sqlite:///{tmp_path}/s.db", run_scheduler=False) as client:
        bad = [train_job(2), {**train_job(2), "profile": "nope"}]
        r = client.post("/jobs/batch", headers=ADMIN, json=bad)
        assert r.status_code == 400 and r.json()["detail"].startswith("job [1]: profile:")
        assert client.get("/jobs", headers=ADMIN).json() == []
        r = client.post("/jobs/batch", headers=ADMIN, json=[train_job(2), train_job(3)])
        assert r.status_code == 201 and [j["epochs"] for j in r.json()] == [2, 3]
        assert len(client.get("/jobs", headers=ADMIN).json()) == 2
