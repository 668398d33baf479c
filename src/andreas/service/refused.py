"""`Refused`: a request the service turns down, with the HTTP status and the sentence to show.

Raised below the HTTP layer (jobs.py, uploads.py) and turned into a response by api.py and the
dashboard, so that the service's logic says why without knowing it speaks HTTP."""

from __future__ import annotations


class Refused(Exception):
    """A request the service refuses: `status` is the HTTP status, `detail` the sentence,
    `retry_after` (seconds) when trying again later may succeed."""

    def __init__(self, status: int, detail: str, retry_after: int | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.retry_after = status, detail, retry_after
