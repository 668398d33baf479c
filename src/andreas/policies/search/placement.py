"""A plan as the kernel writes it: per job, the node it runs on (-1: it waits), the column of
its candidate in the planning table, and whether it moved (pays the restart overhead again).

The one plan representation of the search (issue 19, point 5). The greedy passes write it
(kernel.py); the scores read it as it is; the slack guard, resizing, the local searches and
the MILP's warm start read and change it; a driver gets it as a plan of Assignments
(`to_plan`). A job's GPU type, GPU count and run time are looked up in the context's table
(`PlanningContext.packed`): a moved job's run time is the table's moved time (a whole
restart instead of what is left of one).

A Placement is never changed in place once made: a move makes a new one (`moved_to`), so a
search can keep the plans it has seen.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ...cost import run_energy_cost
from ..base import Plan
from .planning import PlanningContext


class Placement:
    """Node, candidate column and moved flag per job of one planning context."""

    __slots__ = ("node", "cand", "moved")

    def __init__(self, node: np.ndarray, cand: np.ndarray, moved: np.ndarray) -> None:
        self.node, self.cand, self.moved = node, cand, moved

    @classmethod
    def waiting(cls, jobs: int) -> "Placement":
        """Every job waits."""
        return cls(np.full(jobs, -1, np.int64), np.full(jobs, -1, np.int64),
                   np.zeros(jobs, np.bool_))

    def __len__(self) -> int:
        return len(self.node)

    def __eq__(self, other: object) -> bool:
        """The same node and candidate for every job (the moved flags follow from them)."""
        if not isinstance(other, Placement):
            return NotImplemented
        return bool(np.array_equal(self.node, other.node)
                    and np.array_equal(self.cand, other.cand))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Placement(node={self.node.tolist()}, cand={self.cand.tolist()})"

    def runs(self, j: int) -> bool:
        return bool(self.node[j] >= 0)

    def moved_to(self, ctx: PlanningContext,
                 changes: Mapping[int, tuple[int, int] | None]) -> "Placement":
        """A new placement: job j on (node, candidate column) for each entry of `changes`, or
        waiting for None; it moved when its candidate pays a restart off its own node."""
        node, cand, moved = self.node.copy(), self.cand.copy(), self.moved.copy()
        k = ctx.packed
        for j, place in changes.items():
            if place is None:
                node[j], cand[j], moved[j] = -1, -1, False
            else:
                n, c = place
                node[j], cand[j] = n, c
                moved[j] = bool(k.cmov[j, c]) and n != k.home[j]
        return Placement(node, cand, moved)

    def changed(self, other: "Placement") -> list[int]:
        """The jobs whose node or candidate differ in `other`."""
        return np.flatnonzero((self.node != other.node) | (self.cand != other.cand)).tolist()

    # ------------------------------------------------------------------ read from the table
    def gpus(self, ctx: PlanningContext) -> np.ndarray:
        """GPUs of each job's candidate (0 for a waiting job)."""
        cols = np.maximum(self.cand, 0)
        return np.where(self.node >= 0, ctx.packed.cg[np.arange(len(self)), cols], 0)

    def times(self, ctx: PlanningContext) -> np.ndarray:
        """Run time of each job's candidate as placed (0 for a waiting job)."""
        k = ctx.packed
        rows, cols = np.arange(len(self)), np.maximum(self.cand, 0)
        time = np.where(self.moved, k.mtime[rows, cols], k.ctime[rows, cols])
        return np.where(self.node >= 0, time, 0.0)

    def time_of(self, ctx: PlanningContext, j: int) -> float:
        """Job j's run time as placed (it runs)."""
        k, c = ctx.packed, self.cand[j]
        return float(k.mtime[j, c] if self.moved[j] else k.ctime[j, c])

    def energy_of(self, ctx: PlanningContext, j: int) -> float:
        """Energy cost of job j's run as placed (it runs): a moved job's priced over its
        longer run."""
        k, c = ctx.packed, self.cand[j]
        if not self.moved[j]:
            return float(k.cen[j, c])
        return run_energy_cost(ctx.cluster, ctx.type_names[k.ct[j, c]], int(k.cg[j, c]),
                               self.time_of(ctx, j), ctx.now,
                               -float(k.cw[j, c]) if k.cw.shape[1] else 0.0)

    def busy(self, ctx: PlanningContext) -> np.ndarray:
        """Busy GPUs per node once every placed job holds its GPUs."""
        on = self.node >= 0
        return np.bincount(self.node[on], weights=self.gpus(ctx)[on],
                           minlength=len(ctx.node_cap)).astype(np.int64)

    def free(self, ctx: PlanningContext) -> np.ndarray:
        """Free GPUs per node once every placed job holds its GPUs."""
        return ctx.packed.node_cap - self.busy(ctx)

    def late(self, ctx: PlanningContext) -> np.ndarray:
        """Per job: it ends after its due date (a waiting job: even if it started now on its
        fastest configuration)."""
        tmin = ctx.table.tmin
        ends = ctx.now + np.where(self.node >= 0, self.times(ctx), tmin)
        return ends > ctx.packed.due

    def to_plan(self, ctx: PlanningContext) -> Plan:
        """The placement as a plan (each place's Assignment made once per cluster)."""
        assignment = ctx.tables.assignment
        jobs = np.flatnonzero(self.node >= 0)
        ids = ctx.job_ids
        return {ids[j]: assignment(n, g) for j, n, g in
                zip(jobs.tolist(), self.node[jobs].tolist(), self.gpus(ctx)[jobs].tolist())}

