"""Protections on every request: a maximum body size, enforced before the application reads
the body, and security headers on every response.

A client that announces a larger body (Content-Length) gets 413 at once; one that streams
more than the limit without announcing it is cut off with 413 as soon as it passes it. The
body is never held whole in memory beyond the limit.
"""

from __future__ import annotations

import json


class BodyTooLarge(Exception):
    pass


class BodyLimit:
    """ASGI middleware: refuse request bodies over `max_bytes` with 413 and a sentence; paths
    under a prefix of `overrides` (e.g. /uploads) have that limit instead."""

    def __init__(self, app, max_bytes: int, overrides: dict[str, int] | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.overrides = overrides or {}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        limit = next((n for prefix, n in self.overrides.items() if path.startswith(prefix)),
                     self.max_bytes)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return await self._refuse(send, limit)
        seen = 0
        started = False

        async def counted_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge
            return message

        async def tracked_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except BodyTooLarge:
            if not started:
                await self._refuse(send, limit)

    async def _refuse(self, send, limit: int) -> None:
        body = json.dumps({"detail": f"request body over {limit} bytes; send less "
                                     "(a batch in parts, a shorter command, a smaller "
                                     "working folder)"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),  # a log served as text is never run as a script
    (b"x-frame-options", b"DENY"),  # no page of the service inside another site's frame
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),  # job data and tokens are never cached by a proxy
]
# every answer of the API is data, which may load nothing
API_CSP = (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'")
# /docs: Swagger UI's own files (served here) and the inline script that starts it
DOCS_CSP = (b"content-security-policy",
            b"default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' "
            b"'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'")
# the dashboard (/ui) loads its own script, styles and nothing else; forms post only to itself
UI_CSP = (b"content-security-policy",
          b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
          b"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")


class SecurityHeaders:
    """ASGI middleware: add `SECURITY_HEADERS` and a Content-Security-Policy (the API's
    strictest; the dashboard's and the docs' own) to responses."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        csp = UI_CSP if path.startswith("/ui") else DOCS_CSP if path.startswith("/docs") \
            else API_CSP

        async def with_headers(message):
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [h for h in SECURITY_HEADERS if h[0] not in present]
                if csp[0] not in present:
                    extra.append(csp)
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, with_headers)
