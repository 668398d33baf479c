"""A maximum request body size, enforced before the application reads the body.

A client that announces a larger body (Content-Length) gets 413 at once; one that streams
more than the limit without announcing it is cut off with 413 as soon as it passes it. The
body is never held whole in memory beyond the limit.
"""

from __future__ import annotations

import json


class BodyTooLarge(Exception):
    pass


class BodyLimit:
    """ASGI middleware: refuse request bodies over `max_bytes` with 413 and a sentence."""

    def __init__(self, app, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            return await self._refuse(send)
        seen = 0
        started = False

        async def counted_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
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
                await self._refuse(send)

    async def _refuse(self, send) -> None:
        body = json.dumps({"detail": f"request body over {self.max_bytes} bytes; send less "
                                     "(a batch in parts, a shorter command)"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
