"""The simulator's event core: events as small objects on one heap, as in SimPy.

An event knows its time and what happens when it fires. Every arrival is pushed at the start,
a completion when a job takes GPUs, and the three timers (the next round's tick, the next price
change, the policy's revisit) are re-armed after every decision point.
An event that no longer holds (a completion whose job was paused or moved, a timer re-armed
elsewhere) carries an old stamp and is skipped when popped, so the work per event follows what
the event touches, not the number of active jobs. When such events make up most of the heap it
is rebuilt without them (`EventQueue.supersede`): a replay that moves jobs millions of times
keeps a heap the size of what is still to come.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..model import Job
    from .engine import Simulator, _JobState

EPS = 1e-9


@dataclass(eq=False, slots=True)
class Event:
    """Something that happens at `time`. `stamp` is compared with its source's current stamp
    when popped: a mismatch means the event was superseded."""

    time: float

    def valid(self, sim: Simulator) -> bool:
        return True

    def fire(self, sim: Simulator, now: float) -> None:
        raise NotImplementedError


@dataclass(eq=False, slots=True)
class Arrival(Event):
    """A job is submitted."""

    job: Job

    def fire(self, sim: Simulator, now: float) -> None:
        sim.arrivals_left -= 1
        sim.activate(self.job)


@dataclass(eq=False, slots=True)
class Completion(Event):
    """A running job finishes its last epoch (if it still holds the stretch it was pushed
    with)."""

    state: _JobState
    stamp: int

    def valid(self, sim: Simulator) -> bool:
        return self.state.stamp == self.stamp and self.state.stretch is not None

    def fire(self, sim: Simulator, now: float) -> None:
        sim.finish(self.state, now)


@dataclass
class Timer:
    """One re-armable source of events (tick, price change, revisit): at most one of its
    events is valid at a time."""

    name: str
    at: float = math.inf
    stamp: int = 0
    fired: bool = False  # in the current batch

    def arm(self, queue: EventQueue, at: float) -> None:
        if at == self.at:
            return
        self.stamp += 1
        self.at = at
        if at < math.inf:
            queue.push(TimerEvent(at, self, self.stamp))


@dataclass(eq=False, slots=True)
class TimerEvent(Event):
    timer: Timer
    stamp: int

    def valid(self, sim: Simulator) -> bool:
        return self.timer.stamp == self.stamp

    def fire(self, sim: Simulator, now: float) -> None:
        self.timer.fired = True
        self.timer.at = math.inf


@dataclass
class EventQueue:
    """One heap of events, ordered by time, then by push order (deterministic ties)."""

    heap: list[tuple[float, int, Event]] = field(default_factory=list)
    pushed: int = 0
    stale: int = 0  # events on the heap known to no longer hold
    compact_after: int = 1024  # at least this many stale events before a rebuild

    def supersede(self, sim: Simulator) -> None:
        """One event on the heap no longer holds (a running job's completion, when the job
        stops early); past half the heap, drop every such event. An event never holds again
        once it stops holding (stamps only grow), and ties keep their push order."""
        self.stale += 1
        if self.stale >= self.compact_after and 2 * self.stale > len(self.heap):
            self.heap = [item for item in self.heap if item[2].valid(sim)]
            heapq.heapify(self.heap)
            self.stale = 0

    def push(self, event: Event) -> None:
        self.pushed += 1
        heapq.heappush(self.heap, (event.time, self.pushed, event))

    def next_time(self, sim: Simulator) -> float:
        """The time of the earliest valid event (inf: none); drops superseded ones."""
        heap = self.heap
        while heap and not heap[0][2].valid(sim):
            heapq.heappop(heap)
        return heap[0][0] if heap else math.inf

    def pop_batch(self, sim: Simulator, now: float) -> list[Event]:
        """Every valid event at `now`, and completions within the clock's tolerance of it
        (a job whose predicted end differs from `now` by rounding ends now too)."""
        heap, batch, later = self.heap, [], []
        tolerance = now + EPS * max(1.0, now)
        while heap and heap[0][0] <= tolerance:
            item = heapq.heappop(heap)
            event = item[2]
            if not event.valid(sim):
                continue
            if event.time <= now or isinstance(event, Completion):
                batch.append(event)
            else:
                later.append(item)
        for item in later:
            heapq.heappush(heap, item)
        return batch
