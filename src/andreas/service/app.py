"""Run the service: read the configuration, open the store, serve the API with uvicorn."""

from __future__ import annotations

import logging
from pathlib import Path

from .api import create_app
from .config import read_service_config


def serve(config_path: str | Path, *, database_url: str | None = None,
          host: str = "127.0.0.1", port: int = 8000, admin_token: str | None = None) -> None:
    import uvicorn

    config = read_service_config(config_path).with_database(database_url)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    app = create_app(config, admin_token=admin_token)
    uvicorn.run(app, host=host, port=port, log_level="info")
