"""Slow down token guessing: too many failed logins from one address and it must wait.

After `max_failures` requests with a missing, unknown or revoked token from one client address
within `window_s` seconds, every request from that address that needs a token is answered 429
(with Retry-After) until the oldest of those failures leaves the window. Successful requests
do not count. State is in memory: a restart forgets it, which only helps a guesser once.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Callable


class FailureLimiter:
    def __init__(self, max_failures: int = 20, window_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_failures = max_failures
        self.window_s = window_s
        self.clock = clock
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, address: str, now: float) -> deque[float]:
        times = self._failures.setdefault(address, deque())
        while times and times[0] <= now - self.window_s:
            times.popleft()
        return times

    def retry_after(self, address: str) -> float:
        """Seconds this address must wait before its token is checked again (0: none)."""
        with self._lock:
            now = self.clock()
            times = self._recent(address, now)
            if len(times) < self.max_failures:
                if not times:
                    self._failures.pop(address, None)
                return 0.0
            return max(0.0, times[0] + self.window_s - now)

    def failed(self, address: str) -> None:
        with self._lock:
            now = self.clock()
            self._recent(address, now).append(now)
