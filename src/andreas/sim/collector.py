"""Python's cyclic garbage collector paced for a simulation run.

A decision allocates hundreds of short-lived containers (plans, candidates, job views) that
live until the decision ends. With the interpreter's default pacing (a young-generation pass
every 700 net allocations) a decision on a long queue triggers several passes, and every
tenth one also walks the older generations, which on a trace replay hold every job of the
trace. Collecting the young generation every few thousand allocations instead does the same
work in far fewer passes (bench/scale.md has the measurement); memory is still reclaimed,
only later by a few thousand objects.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 5000
"""Net allocations between two young-generation passes during a run (Python's default: 700)."""


@contextmanager
def paced_for_simulation() -> Iterator[None]:
    """Collect the young generation every YOUNG_THRESHOLD allocations inside the block (never
    more often than the interpreter was set to), and restore the interpreter's pacing after.
    The setting is process-wide: use it around a simulation run in its own thread or
    process, as `simulate` is, not inside a server."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], YOUNG_THRESHOLD), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
