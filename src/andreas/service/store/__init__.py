"""The repository: every SQL statement the service makes lives in this package.

- `core.py`: the engine, sessions, migrations, users and API tokens, drained nodes (`Store`).
- `runs.py`: the queries the runs' bookkeeping needs (live runs, progress reports, GPUs held).
- `queue.py`: what a snapshot reads (the active jobs, their owners) and the forecasts written
  back to the jobs' rows.

Query functions take the caller's session, so that one transaction can read, decide and
write (the unit of work stays with the caller, as in Zeus's repository layer).
"""

from .core import (
    IN_BATCH,
    MIGRATIONS,
    ROLES,
    FairLock,
    Store,
    engine_url,
    hash_token,
    in_batches,
    must_get,
    new_token,
)

__all__ = ["IN_BATCH", "MIGRATIONS", "ROLES", "FairLock", "Store", "engine_url", "hash_token",
           "in_batches", "must_get", "new_token"]
