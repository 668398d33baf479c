"""A tiny HTTP endpoint that timestamps progress reports, for profiling without the service."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ProgressReceiver:
    """Collects (arrival time, epochs_done) per URL path; use as a context manager."""

    def __init__(self) -> None:
        self.reports: dict[str, list[tuple[float, float]]] = {}
        lock = threading.Lock()
        reports = self.reports

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server naming
                now = time.time()
                length = int(self.headers.get("Content-Length", 0))
                try:
                    done = float(json.loads(self.rfile.read(length))["epochs_done"])
                except (ValueError, KeyError, TypeError):
                    self.send_response(400)
                    self.end_headers()
                    return
                with lock:
                    reports.setdefault(self.path, []).append((now, done))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/{path.lstrip('/')}"

    def __enter__(self) -> "ProgressReceiver":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
