"""Rate limiting that slows guessing without locking anyone out: failures count per address
and per token tried; a valid token is never refused; X-Forwarded-For names the client only
when it comes from a proxy the operator trusts (`trusted_proxies`). Against a real
`andreas serve`, since uvicorn, not the app, reads that header."""

import httpx

from andreas.service.sandbox import THREE_GPUS, LocalService

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
