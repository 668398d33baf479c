"""The service's decisions carried out, one log line each, for an operator to read or grep:

    start job=job-3f2a run=12 node=ws-big gpus=2 gpu_type=V100
    stop job=job-3f2a run=12 reason=pause
    end job=job-3f2a run=12 state=paused exit=0 reason=pause
    unplannable job=job-9c1d error="ZeroDivisionError: float division by zero"

on the logger `andreas.events`, beside uvicorn's access lines (which leave out the jobs'
progress posts, see api.ProgressPostFilter).
"""

from __future__ import annotations

import json
import logging

log = logging.getLogger("andreas.events")


def _value(value: object) -> str:
    text = "-" if value is None else str(value)
    return json.dumps(text) if (not text or any(c in text for c in ' "=\n')) else text


def event(name: str, job_id: str, **fields: object) -> None:
    """Log `name` for `job_id` with `fields` as key=value (quoted when they need it)."""
    log.info("%s job=%s %s", name, job_id,
             " ".join(f"{key}={_value(value)}" for key, value in fields.items()))
