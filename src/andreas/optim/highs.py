"""A thin helper to state a MILP as rows of (column, coefficient) and solve it with HiGHS."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

import highspy
import numpy as np
from scipy import sparse


@dataclass
class Milp:
    cost: list[float] = field(default_factory=list)
    upper: list[float] = field(default_factory=list)
    integer: list[bool] = field(default_factory=list)
    rows: list[tuple[float, float, list[int], list[float]]] = field(default_factory=list)

    def var(self, cost: float, *, upper: float = 1.0, integer: bool = True) -> int:
        self.cost.append(cost)
        self.upper.append(upper)
        self.integer.append(integer)
        return len(self.cost) - 1

    def row(self, lower: float, upper: float, cols: list[int], coefs: list[float]) -> None:
        self.rows.append((lower, upper, cols, coefs))


@dataclass(frozen=True)
class MilpResult:
    values: np.ndarray | None  # None when no feasible solution was found
    objective: float
    bound: float  # best proven lower bound
    optimal: bool
    gap: float  # relative (objective − bound) / objective


def _quiet_highs() -> highspy.Highs:
    """A solver object without the banner HiGHS prints to the C-level stdout when created."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            return highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def solve(model: Milp, *, time_limit: float = 10.0, start: list[float] | None = None,
          threads: int = 1, lp_solver: str | None = None) -> MilpResult:
    """Solve `model` with HiGHS; `lp_solver` ("ipm", "simplex") for a model with no integer
    variable (an interior point solves the large LPs of `bound --lp` many times faster)."""
    h = _quiet_highs()
    h.setOptionValue("output_flag", False)
    if lp_solver is not None:
        h.setOptionValue("solver", lp_solver)
    h.setOptionValue("time_limit", float(time_limit))
    h.setOptionValue("threads", threads)
    h.setOptionValue("mip_rel_gap", 1e-9)
    h.setOptionValue("mip_abs_gap", 1e-12)
    # Energy terms can be 1e-5 of the tardiness terms in one objective: tight tolerances.
    for option in ("primal_feasibility_tolerance", "dual_feasibility_tolerance",
                   "mip_feasibility_tolerance"):
        h.setOptionValue(option, 1e-10)
    n = len(model.cost)
    lp = highspy.HighsLp()
    lp.num_col_ = n
    lp.num_row_ = len(model.rows)
    # Scale costs to order 1: HiGHS's tolerances are absolute, and energy costs per decision can
    # be 1e-5 EUR, where they would prune optimal branches.
    cost = np.asarray(model.cost, float)
    scale = 1.0 / float(np.max(np.abs(cost))) if n and np.max(np.abs(cost)) > 0 else 1.0
    lp.col_cost_ = cost * scale
    lp.col_lower_ = np.zeros(n)
    lp.col_upper_ = np.asarray(model.upper, float)
    lp.row_lower_ = np.array([r[0] for r in model.rows], float)
    lp.row_upper_ = np.array([r[1] for r in model.rows], float)
    ri, ci, vals = [], [], []
    for i, (_, _, cols, coefs) in enumerate(model.rows):
        ri += [i] * len(cols)
        ci += cols
        vals += coefs
    csc = sparse.csc_matrix((vals, (ri, ci)), shape=(len(model.rows), n))
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = csc.indptr.astype(np.int32)
    lp.a_matrix_.index_ = csc.indices.astype(np.int32)
    lp.a_matrix_.value_ = csc.data.astype(float)
    lp.integrality_ = [highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
                       for i in model.integer]
    h.passModel(lp)
    if start is not None:
        sol = highspy.HighsSolution()
        sol.col_value = list(map(float, start))
        h.setSolution(sol)
    h.run()
    status = h.getModelStatus()
    info = h.getInfo()
    has_solution = info.primal_solution_status >= 2  # kSolutionStatusFeasible
    values = np.array(h.getSolution().col_value) if has_solution else None
    objective = info.objective_function_value / scale if has_solution else float("inf")
    bound = info.mip_dual_bound / scale
    optimal = status == highspy.HighsModelStatus.kOptimal
    gap = 0.0 if optimal else (abs(objective - bound) / max(abs(objective), 1e-12)
                               if has_solution else float("inf"))
    return MilpResult(values, objective, bound, optimal, gap)
