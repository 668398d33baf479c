"""Python's cyclic garbage collector paced for a simulation run.

A decision allocates hundreds to thousands of containers (job views, candidates, plans) that
live until the decision ends. The interpreter collects its young generation every 700 net
allocations, which falls in the middle of decisions: each pass then walks every live object
of the decision, only to find them still alive, and every tenth pass also walks the older
generations. `paced_for_simulation` collects at the boundaries between decisions instead,
where the decision's objects are gone and a young pass has little to walk; the interpreter's
own pass stays as a safety net for a decision that allocates a great many (bench/scale.md has
the measurements). Memory is still reclaimed, at the next boundary. The oldest generation
(every job of a trace) is walked only by that safety net during a run: a decision's cyclic
garbage dies young and is found by the boundary passes (on 5,000 Philly jobs, 8,724
decisions, a full collection after the run found 669 unreachable objects).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

SAFETY_THRESHOLD = 20_000
"""Net allocations after which the interpreter collects within a decision during a run."""
BOUNDARY_MIN = 1000
"""Net allocations since the last pass below which a boundary does not collect."""


@contextmanager
def paced_for_simulation() -> Iterator[Callable[[], None]]:
    """Within the block, the interpreter collects only after SAFETY_THRESHOLD net allocations
    (never more often than it was set to), and the callable it yields collects at a boundary
    between decisions: the young generation once BOUNDARY_MIN allocations have built up, and
    the middle one too every t1 young passes (the interpreter's own cadence).
    The interpreter's pacing is restored after. The setting is process-wide: use it around a
    simulation run in its own thread or process, as `simulate` is, not inside a server."""
    before = gc.get_threshold()
    every1 = before[1]

    def between_decisions() -> None:
        young, passes0, _ = gc.get_count()
        if young >= BOUNDARY_MIN and gc.isenabled():
            gc.collect(1 if passes0 >= every1 else 0)

    gc.set_threshold(max(before[0], SAFETY_THRESHOLD), *before[1:])
    try:
        yield between_decisions
    finally:
        gc.set_threshold(*before)
