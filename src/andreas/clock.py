"""Times as people write and read them: durations ('2h', '1d12h'), ISO dates, and a moment
shown on the local clock. Shared by the client commands and the dashboard."""

from __future__ import annotations

import datetime as dt
import re

from .errors import AndreasError

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


def parse_duration(text: str, what: str = "--deadline") -> float:
    """'90' (seconds), '90s', '15m', '2h', '1d12h', '1.5h' -> seconds."""
    text = text.strip().lower()
    try:
        seconds = float(text)
    except ValueError:
        parts = _DURATION.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            raise AndreasError(f"{what}: expected a duration like 90, 45m, 2h or 1d12h, got "
                               f"{text!r}") from None
        seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if not seconds > 0:
        raise AndreasError(f"{what}: expected a positive duration, got {text!r}")
    return seconds


def parse_due(text: str) -> float:
    """An ISO 8601 date and time ('2026-12-24T18:00', local time unless it names a zone)."""
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise AndreasError(f"--due: expected an ISO date and time like 2026-12-24T18:00, got "
                           f"{text!r}") from None
    return when.timestamp()


def local_time(t: float | None, now: float) -> str:
    """A time as the local clock shows it, with the date when it is not today's ('-' for
    none)."""
    if t is None:
        return "-"
    moment = dt.datetime.fromtimestamp(t)
    today = dt.datetime.fromtimestamp(now).date()
    return moment.strftime("%H:%M:%S" if moment.date() == today else "%Y-%m-%d %H:%M")
