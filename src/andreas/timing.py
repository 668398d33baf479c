"""Whether a job ends by its due date, as every view says it: the command line's job list,
the Python client and the dashboard. One rule, so that they never disagree:

- a job that completed: by when it completed (what happened, not the last forecast);
- a job that ended otherwise (cancelled, failed, timed out): no verdict;
- a job past its due date and not done: late, whatever an older forecast said;
- otherwise: by the latest forecast's end, if there is one.
"""

from __future__ import annotations

import time

TOLERANCE_S = 1e-6


def on_time(completed_at: float | None, final: bool, due_date: float,
            forecast_end: float | None, now: float | None = None) -> bool | None:
    if completed_at is not None:
        return completed_at <= due_date + TOLERANCE_S
    if final:
        return None
    if (time.time() if now is None else now) > due_date:
        return False
    return None if forecast_end is None else forecast_end <= due_date + TOLERANCE_S


def shown_end(completed_at: float | None, final: bool,
              forecast_end: float | None) -> float | None:
    """The end a view shows: when it completed; none for a job that ended otherwise; else the
    latest forecast's."""
    if completed_at is not None:
        return completed_at
    return None if final else forecast_end
