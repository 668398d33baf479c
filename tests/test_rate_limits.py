"""Rate limiting that slows guessing without locking anyone out: failures count per address
and per token tried; a valid token is never refused; X-Forwarded-For names the client only
when it comes from a proxy the operator trusts (`trusted_proxies`). Against a real
`andreas serve`, since uvicorn, not the app, reads that header."""

import httpx
import pytest

from andreas.service.sandbox import THREE_GPUS, LocalService

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = pytest.mark.service

PROFILES = "profile,gpu_type,gpus,seconds_per_epoch\none,fast,1,0.3\n"
LIMIT = "auth_max_failures: 5\nauth_window_s: 3600\n"  # an hour: no test timing can expire it


def _guesses(service, tokens, addresses) -> list[int]:
    return [httpx.get(service.url + "/jobs", timeout=60,
                      headers={"Authorization": f"Bearer {t}", "X-Forwarded-For": a}).status_code
            for t, a in zip(tokens, addresses)]


def test_rotating_x_forwarded_for_does_not_escape_the_limit(tmp_path):
    # before: uvicorn believed the header from the loopback, so a local client that named a
    # new address with each guess was never limited
    with LocalService(tmp_path / "svc", THREE_GPUS, PROFILES, options=LIMIT) as service:
        codes = _guesses(service, [f"guess{i}" for i in range(7)],
                         [f"203.0.113.{i}" for i in range(7)])
        assert codes == [401] * 5 + [429] * 2
        assert service.get("/jobs").status_code == 200  # the admin's valid token still works


def test_one_token_tried_from_many_trusted_forwarded_addresses_is_limited(tmp_path):
    options = LIMIT + "trusted_proxies: [127.0.0.1]\n"
    with LocalService(tmp_path / "svc", THREE_GPUS, PROFILES, options=options) as service:
        # through a trusted proxy each guess comes from its own client address: limited by
        # the token tried, the same one each time
        codes = _guesses(service, ["stolen-and-revoked"] * 7,
                         [f"203.0.113.{i}" for i in range(7)])
        assert codes == [401] * 5 + [429] * 2
        # other tokens from fresh addresses are not held back by that one
        assert _guesses(service, ["another"], ["198.51.100.1"]) == [401]


def test_accepted_progress_posts_stay_out_of_the_access_log():
    import logging

    from andreas.service.api import QUIET_PROGRESS

    def line(method, path, status):
        return logging.LogRecord("uvicorn.access", logging.INFO, "", 0,
                                 '%s - "%s %s HTTP/%s" %d',
                                 ("127.0.0.1:5000", method, path, "1.1", status), None)
    assert not QUIET_PROGRESS.filter(line("POST", "/jobs/job-1/progress", 200))
    assert QUIET_PROGRESS.filter(line("POST", "/jobs/job-1/progress", 403))  # refused: logged
    assert QUIET_PROGRESS.filter(line("POST", "/jobs", 201))
    assert QUIET_PROGRESS.filter(line("GET", "/jobs/job-1/progress", 200))


def test_a_real_service_logs_no_line_per_epoch(tmp_path):
    from conftest import TRAIN, wait_for

    log = tmp_path / "service.log"
    with LocalService(tmp_path / "svc", THREE_GPUS, PROFILES, log=log,
                      options="period_s: null\npoll_s: 0.1\n") as service:
        job = service.post("/jobs", json={"script": str(TRAIN), "args": ["--samples", "2000"],
                                          "epochs": 5, "deadline_s": 600,
                                          "profile": "one"}).json()["id"]
        wait_for(lambda: service.get(f"/jobs/{job}").json()["state"] == "completed",
                 timeout=120, what="the job to complete")
        assert service.get(f"/jobs/{job}").json()["epochs_done"] == 5  # it did post progress
    text = log.read_text()
    assert "/progress" not in text and "GET /jobs/" in text  # other requests still logged


def test_trusted_proxies_must_be_ip_addresses(tmp_path):
    import pytest
    from conftest import write_service_files

    from andreas.errors import ScenarioError
    from andreas.service.config import read_service_config

    path = write_service_files(tmp_path, extra="trusted_proxies: [127.0.0.1, proxy.local]\n")
    with pytest.raises(ScenarioError, match=r"field 'trusted_proxies\[1\]': expected an IP "
                                            r"address, got 'proxy.local'"):
        read_service_config(path)
    path = write_service_files(tmp_path, extra="trusted_proxies: [127.0.0.1, '::1']\n")
    assert read_service_config(path).trusted_proxies == ("127.0.0.1", "::1")
