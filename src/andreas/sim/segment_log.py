"""The simulator's record of segments, stored as columns of machine numbers.

A replay in which jobs move often logs millions of segments (the whole Philly trace event by
event with `andreas`: one per restart, about 7 million). As `Segment` objects they took most of
the run's memory; as columns (a job index, a node index and the GPUs at 8 bytes each, five
floats and a phase byte) each takes 65 bytes. The log reads as a sequence of `Segment`s,
made when read, so every consumer (costs recomputed from segments, figures, `segments.csv`)
sees the same objects as before.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from typing import Iterator, overload

from ..model import Segment

PHASES = ("run", "restart")
_PHASE_CODE = {p: i for i, p in enumerate(PHASES)}


class SegmentLog(Sequence[Segment]):
    """Segments of one simulation. `job_ids[i]` names job index i; `nodes[n]` is node n's
    (name, gpu type)."""

    def __init__(self, job_ids: Sequence[str], nodes: Sequence[tuple[str, str]]) -> None:
        self.job_ids = job_ids  # grows with the simulator's jobs: read at access time
        self.nodes = list(nodes)
        self._job = array("l")
        self._node = array("l")
        self._gpus = array("l")
        self._start = array("d")
        self._end = array("d")
        self._epochs = array("d")
        self._limit = array("d")  # NaN: the default limit (None)
        self._saved = array("d")
        self._phase = bytearray()

    def append(self, job: int, node: int, gpus: int, start: float, end: float, epochs: float,
               phase: str, power_limit_w: float | None, saved_w: float) -> None:
        """Log one segment of job index `job` on node index `node`."""
        self._job.append(job)
        self._node.append(node)
        self._gpus.append(gpus)
        self._start.append(start)
        self._end.append(end)
        self._epochs.append(epochs)
        self._limit.append(math.nan if power_limit_w is None else power_limit_w)
        self._saved.append(saved_w)
        self._phase.append(_PHASE_CODE[phase])

    def __len__(self) -> int:
        return len(self._job)

    def _segment(self, i: int) -> Segment:
        name, gpu_type = self.nodes[self._node[i]]
        limit = self._limit[i]
        return Segment(self.job_ids[self._job[i]], name, gpu_type, self._gpus[i],
                       self._start[i], self._end[i], self._epochs[i], PHASES[self._phase[i]],
                       None if math.isnan(limit) else limit, self._saved[i])

    @overload
    def __getitem__(self, i: int) -> Segment: ...

    @overload
    def __getitem__(self, i: slice) -> list[Segment]: ...

    def __getitem__(self, i: int | slice) -> Segment | list[Segment]:
        if isinstance(i, slice):
            return [self._segment(k) for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError("segment index out of range")
        return self._segment(i)

    def __iter__(self) -> Iterator[Segment]:
        return (self._segment(i) for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence of the same segments (a list read back from segments.csv)."""
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list

    def __repr__(self) -> str:
        return f"SegmentLog({len(self)} segments)"
