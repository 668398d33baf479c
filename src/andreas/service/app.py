"""Run the service: read the configuration, open the store, serve the API with uvicorn."""

from __future__ import annotations

import dataclasses
import gc
import logging
import os
import threading
import time
from pathlib import Path

from .api import create_app
from .config import public_url_for, read_service_config
from .secret_env import check_config_secrets

log = logging.getLogger("andreas.service")


def serve(config_path: str | Path, *, database_url: str | None = None,
          host: str = "127.0.0.1", port: int = 8000, admin_token: str | None = None,
          stop_jobs: bool = False) -> None:
    import uvicorn

    os.umask(0o077)  # every file the service writes is its own; jobs get theirs explicitly
    config = read_service_config(config_path).with_database(database_url)
    check_config_secrets(config.path, config.database_url, from_command_line=bool(database_url))
    config = dataclasses.replace(config, public_url=public_url_for(config, host, port))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if config.jobs_as_service_user:
        log.warning("jobs_as_service_user: true: jobs run as the service's own user and can "
                    "read its database and token; only where every user is trusted")
    app = create_app(config, admin_token=admin_token, stop_jobs_on_exit=stop_jobs)
    # What exists now (modules, the app, its configuration) lives as long as the process.
    # Frozen, the collector's full passes skip it; unfrozen, each full pass walked some
    # 200,000 objects while every thread waited, longer than a request may take
    # (bench/service-load.md, 2026-12-03).
    gc.collect()
    gc.freeze()
    threading.Thread(target=check_public_url, args=(config.public_url,), daemon=True,
                     name="andreas-public-url").start()
    # X-Forwarded-For only from the proxies the operator names (uvicorn's default believes
    # it from the loopback, where any local client can name a new address per request)
    uvicorn.run(app, host=host, port=port, log_level="info",
                proxy_headers=bool(config.trusted_proxies),
                forwarded_allow_ips=",".join(config.trusted_proxies) or None)


def check_public_url(url: str, wait_s: float = 30.0) -> bool:
    """Warn, once the service had time to start, if jobs cannot reach it at `url`: they would
    post their progress nowhere, and online learning and live predictions would be off."""
    import httpx

    deadline = time.monotonic() + wait_s
    error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=2.0).status_code == 200:
                log.info("jobs report progress to %s", url)
                return True
        except httpx.HTTPError as exc:
            error = exc
        time.sleep(0.5)
    log.warning("public_url %s does not answer (%s): jobs cannot report progress; set "
                "public_url in service.yaml to an address of this service they can reach",
                url, error)
    return False
