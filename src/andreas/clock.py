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


# the Unix times a datetime can show, with a day to spare for any time zone
_FIRST = dt.datetime(1, 1, 2, tzinfo=dt.timezone.utc).timestamp()
_LAST = dt.datetime(9999, 12, 30, tzinfo=dt.timezone.utc).timestamp()


def moment(t: float, tz: dt.tzinfo | None = None) -> dt.datetime | None:
    """The datetime of Unix time `t` (local time, or in `tz`), held to the years 1-9999 a
    datetime can show; None for NaN. Views show a job's own values (a forecast may end
    thousands of years ahead), and `datetime.fromtimestamp` raises past that range: one job
    once made every admin's job list and dashboard fail."""
    if t != t:
        return None
    return dt.datetime.fromtimestamp(min(max(t, _FIRST), _LAST), tz)


def iso_utc(t: float) -> str:
    """Unix time `t` in ISO 8601, UTC, to the second (held to the years 1-9999)."""
    when = moment(t, dt.timezone.utc)
    return "-" if when is None else when.isoformat(timespec="seconds")


def local_time(t: float | None, now: float) -> str:
    """A time as the local clock shows it, with the date when it is not today's ('-' for
    none); past the year 9999, 'after 9999'."""
    when = None if t is None else moment(t)
    if when is None or t is None:
        return "-"
    if t >= _LAST:
        return "after 9999"
    today = moment(now)
    return when.strftime("%H:%M:%S" if today is not None and when.date() == today.date()
                         else "%Y-%m-%d %H:%M")
