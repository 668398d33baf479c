"""No secret of the service reaches a job's environment (a user can print it into their log)."""

import sys

import pytest
from conftest import wait_for, write_service_files
from fastapi.testclient import TestClient

from andreas.executors.base import job_environment
from andreas.service.api import create_app
from andreas.service.config import read_service_config

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = pytest.mark.service

ADMIN = {"Authorization": "Bearer admin-secret"}


def test_job_environment_drops_the_services_variables_and_secret_values():
    inherited = {"PATH": "/usr/bin", "ANDREAS_ADMIN_TOKEN": "s3cret", "MY_TOKEN": "s3cret",
                 "WRAPPED": "Bearer s3cret!", "PGPASSWORD": "pw", "HOME": "/home/u",
                 "CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    env = job_environment(inherited, {"ANDREAS_JOB_ID": "j1"}, ("2", "3"),
                          hidden_values=("s3cret", ""))
    assert env == {"PATH": "/usr/bin", "HOME": "/home/u", "ANDREAS_JOB_ID": "j1",
                   "CUDA_VISIBLE_DEVICES": "2,3", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def test_a_job_that_prints_its_environment_sees_no_admin_token(tmp_path, monkeypatch):
    monkeypatch.setenv("ANDREAS_ADMIN_TOKEN", "admin-secret")
    monkeypatch.setenv("SITE_ADMIN_TOKEN", "admin-secret")  # the --admin-token-env of a site
    monkeypatch.setenv("PGPASSWORD", "database-password")
    monkeypatch.setenv("HARMLESS_SETTING", "kept")
    config = read_service_config(write_service_files(tmp_path))
    dump = "import os; print(sorted(os.environ.items()))"
    with TestClient(create_app(config, admin_token="admin-secret")) as client:
        job = client.post("/jobs", headers=ADMIN, json={
            "command": [sys.executable, "-c", dump], "epochs": 1, "deadline_s": 600,
            "profile": "mlp"}).json()["id"]
        wait_for(lambda: client.get(f"/jobs/{job}", headers=ADMIN).json()["state"]
                 in ("completed", "failed"), what="the job to end")
        log = client.get(f"/jobs/{job}/logs", headers=ADMIN).text
    assert "('HARMLESS_SETTING', 'kept')" in log  # the dump ran and the job's env is there
    assert "('ANDREAS_JOB_ID'" in log
    assert "admin-secret" not in log
    assert "database-password" not in log
