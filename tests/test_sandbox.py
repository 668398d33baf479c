"""LocalService, the real service the benchmarks and the crash campaign drive: it starts,
answers with its admin token, survives kill -9 and a restart with its data, and stops."""

import pytest

from andreas.service.sandbox import LocalService

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = pytest.mark.service

CLUSTER = ("energy_price: 0.2\npue: 1.0\ngpu_types:\n  g: {node_power_w: [100]}\n"
           "nodes:\n  - {name: n1, gpu_type: g, gpus: 1}\n")
PROFILES = "profile,gpu_type,gpus,seconds_per_epoch\np,g,1,1\n"


def test_a_local_service_starts_survives_kill_9_and_stops(tmp_path):
    with LocalService(tmp_path, CLUSTER, PROFILES, options="period_s: null\n") as service:
        assert service.get("/whoami").json() == {"user": "admin", "role": "admin"}
        job = service.post("/jobs", json={"command": ["true"], "epochs": 1, "deadline_s": 60,
                                          "profile": "p"}).json()["id"]
        service.kill9()
        service.start()
        assert job in [j["id"] for j in service.get("/jobs").json()]
    assert service.proc is not None and service.proc.poll() is not None  # stopped
