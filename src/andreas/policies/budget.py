"""A decision's time budget (option `decision_budget_ms`): when its anytime parts stop.

The deterministic greedy pass always completes, so a decision is never worse than `greedy`'s
plan. Then the Randomized Greedy's passes run in slices while time is left, the resize and
local-search climbs stop at the deadline with the best plan found, and past it the plan steps
are skipped: each spends slack on a bet about the future, and a bet not checked is the risk
the benchmark zoo showed; a forward check still running at the deadline stops and the bet is
not taken. Without a budget nothing here reads the clock, and decisions depend
on the snapshot alone; with one, on the machine's speed too.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass


class OutOfTime(Exception):
    """Raised by `Deadline.check` inside a long computation (a forward check's simulation)."""


@dataclass(frozen=True)
class Deadline:
    at: float | None = None  # time.perf_counter() value; None: no budget

    @classmethod
    def after_ms(cls, budget_ms: float) -> Deadline:
        """The deadline `budget_ms` from now (0: none)."""
        return cls(time.perf_counter() + budget_ms / 1000.0 if budget_ms > 0 else None)

    def passed(self) -> bool:
        return self.at is not None and time.perf_counter() >= self.at

    def check(self) -> None:
        """Raise OutOfTime if the deadline has passed."""
        if self.passed():
            raise OutOfTime

    def left_s(self) -> float:
        return math.inf if self.at is None else self.at - time.perf_counter()


NO_DEADLINE = Deadline()
