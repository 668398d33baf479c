"""The search's options: how the Randomized Greedy's passes build and compare plans
(`SearchOptions`), and how much work a decision may spend on them (`EffortOptions`).

Each field is a policy option (`andreas policies andreas` lists them with this help); the
steps' options live with the steps (policies/steps/)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...errors import AndreasError
from ..options import at_least, option
from .orderings import ORDERINGS
from .passes import IMPLS
from .scoring import SCORES

CONFIG_ENERGIES = ("marginal", "filled", "alone")  # SearchOptions.config_energy


@dataclass(frozen=True)
class SearchOptions:
    """Randomized Greedy settings: the paper's π, α, β, iterations and elite size; our order,
    score and configuration rule (the paper's are order="pressure", score="proxy",
    config_energy="alone": policy `andreas-paper`)."""

    max_iterations: int = option(1000, "most greedy passes per decision (the paper's)")
    pi: float = option(0.05, "bias π of the neighbour swap towards the weight order")
    alpha: float = option(0.05, "share α of the candidate configurations to pick among")
    beta: float = option(0.0, "share β of the best-fitting nodes to pick among (the paper's "
                         "0.2, andreas-paper's default; 0: best fit, no dearer on any zoo "
                         "family and cheaper on the large ones, bench/zoo/notes.md)")
    elite_size: int = option(10, "number of best plans kept")
    score: str = option("lookahead", "how plans are compared: 'lookahead' (estimated cost of "
                        "finishing every job) or the paper's 'proxy'")
    order: str = option("adaptive", "job order: adaptive (pressure; ATC under overload), "
                        "pressure (the paper's), atc, wspt, edf, fifo, ps")
    extra_orders: tuple[str, ...] = option(
        (), "extra deterministic passes with these orders, right after the main one")
    config_energy: str = option(
        "filled", "a job's on-time configuration: least energy added to its node as if the "
        "jobs still to place joined it ('filled'), as the node is ('marginal'), or alone "
        "('alone', the paper's)")

    def __post_init__(self) -> None:
        for name in ("max_iterations", "elite_size"):
            if getattr(self, name) < 1:
                raise AndreasError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("pi", "alpha", "beta"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise AndreasError(f"{name}: expected a value in [0, 1], got "
                                   f"{getattr(self, name)}")
        if self.score not in SCORES:
            raise AndreasError(f"unknown score {self.score!r}; expected one of "
                               f"{', '.join(SCORES)}")
        if self.config_energy not in CONFIG_ENERGIES:
            raise AndreasError(f"unknown config_energy {self.config_energy!r}; expected one "
                               f"of {', '.join(CONFIG_ENERGIES)}")
        for order in (self.order, *self.extra_orders):
            if order not in ORDERINGS:
                raise AndreasError(f"unknown order {order!r}; expected one of "
                                   f"{', '.join(ORDERINGS)}")


@dataclass(frozen=True)
class EffortOptions:
    """How much work one decision may spend, and on how many threads."""

    impl: str = option("fast", "'fast': the compiled kernel; 'plain': its loop interpreted "
                       "(kernel functions' .py_func), for debugging")
    threads: int = option(1, "threads for the randomised passes of a decision (numba's, at "
                          "most the machine's cores); the same plans with any number; 1 "
                          "starts none (a sweep's workers already fill the cores)")
    pass_budget: int = option(0, "at most this many job placements (passes x jobs) per "
                              "decision, for long queues; 0 = no limit")
    decision_budget_ms: float = option(
        0.0, "stop the randomised passes, resizing and local search when a decision has "
        "taken this long (ms), skip the plan steps past it, and keep the best plan found; the "
        "deterministic pass always completes; 0 = no limit (budget.py)")

    def __post_init__(self) -> None:
        if self.threads < 1:
            raise AndreasError(f"threads must be >= 1, got {self.threads}")
        if self.impl not in IMPLS:
            raise AndreasError(f"unknown implementation {self.impl!r}; expected fast or plain")
        at_least("pass_budget", self.pass_budget, 0)
        if not 0 <= self.decision_budget_ms < math.inf:
            raise AndreasError(f"decision_budget_ms must be >= 0, got "
                               f"{self.decision_budget_ms}")
