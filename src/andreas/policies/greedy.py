"""ANDREAS: the greedy pass and the Randomized Greedy of Filippini et al. (2021).

Each decision re-plans every unfinished job, running ones included (a running job may be paused,
resized or moved). The greedy pass orders jobs (by pressure in the paper; `order`), gives each
the cheapest configuration that meets its due date (else the fastest), packs best-fit, and hands
idle GPUs of used nodes to the job that gains most when that lowers the plan's score. The
Randomized Greedy repeats the pass with randomised order, configuration and node choices and
keeps the best plans by score (`score`: the look-ahead by default, or the paper's proxy).
A randomised plan replaces the deterministic pass's only if the slack guard admits it and, when
a job is late under either, the forward check says it costs no more played forward.
On a quiet cluster the chosen plan is then resized (`resizing.py`), and `refine` may replace
it by the first step of a timeline of the known jobs on fewer powered nodes (`consolidate.py`),
hold jobs back (`company.py`), defer them for cheaper hours and cap their GPUs' power.

The passes themselves are compiled, in one implementation (`kernel.py`, called through
`passes.py`); this module chooses among their plans.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..errors import AndreasError
from .arrivals import ArrivalLog
from .base import Plan, Snapshot, register
from .budget import NO_DEADLINE, Deadline
from .decision import Decision
from .options import dataclass_options, option
from .search import passes
from .search.orderings import ORDERINGS
from .search.placement import Placement
from .search.planning import PlanningContext
from .search.resizing import climb, evaluation_budget, resized
from .search.scoring import SCORES, score
from .steps import company, consolidate, defer, power_limits  # noqa: F401  (register the steps)
from .steps.company import DEFAULT_MAX_LOAD, DEFAULT_SHARE
from .steps.consolidate import ARRIVAL_MARGIN
from .steps.forward_check import keeps_cost
from .steps.pipeline import DEFAULT_STEPS, resolve, run_pipeline

CONFIG_ENERGIES = ("marginal", "filled", "alone")  # GreedyParams.config_energy


@dataclass(frozen=True)
class GreedyParams:
    """Randomized Greedy settings: the paper's π, α, β, iterations and elite size; our order and
    score (the paper's are order="pressure", score="proxy": policy `andreas-paper`). Each field
    is a policy option (`andreas policies andreas` lists them with this help)."""

    max_iterations: int = option(1000, "most greedy passes per decision (the paper's)")
    pi: float = option(0.05, "bias π of the neighbour swap towards the weight order")
    alpha: float = option(0.05, "share α of the candidate configurations to pick among")
    beta: float = option(0.0, "share β of the best-fitting nodes to pick among (the paper's "
                         "0.2, andreas-paper's default; 0: best fit, no dearer on any zoo "
                         "family and cheaper on the large ones, bench/zoo/notes.md)")
    elite_size: int = option(10, "number of best plans kept")
    seed: int = option(1, "seed of the random draws (with the decision time)")
    score: str = option("lookahead", "how plans are compared: 'lookahead' (estimated cost of "
                        "finishing every job) or the paper's 'proxy'")
    order: str = option("adaptive", "job order: adaptive (pressure; ATC under overload), "
                        "pressure (the paper's), atc, wspt, edf, fifo, ps")
    extra_orders: tuple[str, ...] = option(
        (), "extra deterministic passes with these orders, right after the main one")
    impl: str = option("fast", "'fast': the compiled kernel; 'plain': its loop interpreted "
                       "(kernel functions' .py_func), for debugging")
    threads: int = option(1, "threads for the randomised passes of a decision (numba's, at "
                          "most the machine's cores); the same plans with any number; 1 "
                          "starts none (a sweep's workers already fill the cores)")
    plan_restart_s: float = option(0.0, "plan as if each restart lost at least this long (s)")
    defer: bool = option(True, "with a time-varying price, let jobs with slack wait for "
                         "cheap hours")
    power_limits: bool = option(True, "cap the GPUs of jobs with slack when profiles give "
                                "power limits")
    pass_budget: int = option(0, "at most this many job placements (passes x jobs) per "
                              "decision, for long queues; 0 = no limit")
    decision_budget_ms: float = option(
        0.0, "stop the randomised passes, resizing and local search when a decision has "
        "taken this long (ms), skip the plan steps past it, and keep the best plan found; the "
        "deterministic pass always completes; 0 = no limit (budget.py)")
    slack_guard: float | None = option(
        0.5, "a randomised plan replaces the deterministic pass only if it leaves no job "
        "that pass runs waiting, ends no late job later, and leaves each on-time job "
        "min(its slack there, this share of its run time); off: the paper")
    config_energy: str = option(
        "filled", "a job's on-time configuration: least energy added to its node as if the "
        "jobs still to place joined it ('filled'), as the node is ('marginal'), or alone "
        "('alone', the paper's)")
    hold_share: float | None = option(
        DEFAULT_SHARE, "hold a job the plan would run alone on a node, keeping this share of "
        "its run time of slack, for GPUs of a powered node or company (company.py); off: never")
    hold_max_load: float = option(DEFAULT_MAX_LOAD, "hold for company only below this "
                                  "offered load")
    resize_max_load: float = option(
        DEFAULT_MAX_LOAD, "resize the chosen plan (resizing.py) only while no job waits and "
        "the offered load is below this; 0 = never")
    consolidate_margin: float | None = option(
        ARRIVAL_MARGIN, "run the queue on fewer powered nodes when a timeline of the known "
        "jobs keeps each in time, ends stretched by this share of the offered load x the time "
        "from now (consolidate.py); off: never")
    consolidate_max_load: float = option(
        DEFAULT_MAX_LOAD, "consolidate only while the offered load is below this: nearer full "
        "load the smaller, longer runs it chooses leave arrivals slow nodes (bench/zoo.md)")
    forward_check: bool = option(
        True, "keep the holds of a decision only if, played forward with sampled arrivals, "
        "they cost no more than running the held jobs now (forward_check.py); with a "
        "pass_budget no check runs and the checked steps are skipped")
    search_check: bool = option(
        True, "when either leaves a job late, keep a randomised plan over the deterministic "
        "pass only if, played forward with sampled arrivals, it costs no more "
        "(forward_check.py); not with a pass_budget")
    hold_when_late: bool = option(
        False, "run the checked steps (the holds) also when the chosen plan leaves a job late "
        "(a waiting one: even on its fastest configuration); off by default: a decision that "
        "already pays tardiness spends no slack on a bet (bench/zoo-seeds.md)")
    checked_steps: tuple[str, ...] = option(
        ("wait", "company"), "steps whose decisions the forward check judges, as a group: "
        "kept only if no dearer played forward than the decision before them")
    steps: tuple[str, ...] = option(
        DEFAULT_STEPS, "the plan steps applied to the chosen plan, in order (pipeline.py): "
        "consolidate, wait, company, defer, power_limits, or module:Class")

    def __post_init__(self) -> None:
        for name in ("max_iterations", "elite_size", "threads"):
            if getattr(self, name) < 1:
                raise AndreasError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("pi", "alpha", "beta"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise AndreasError(f"{name}: expected a value in [0, 1], got "
                                   f"{getattr(self, name)}")
        if self.score not in SCORES:
            raise AndreasError(f"unknown score {self.score!r}; expected one of "
                               f"{', '.join(SCORES)}")
        if self.plan_restart_s < 0:
            raise AndreasError(f"plan_restart_s must be >= 0, got {self.plan_restart_s}")
        if self.pass_budget < 0:
            raise AndreasError(f"pass_budget must be >= 0, got {self.pass_budget}")
        if not 0 <= self.decision_budget_ms < math.inf:
            raise AndreasError(f"decision_budget_ms must be >= 0, got "
                               f"{self.decision_budget_ms}")
        if self.slack_guard is not None and self.slack_guard < 0:
            raise AndreasError(f"slack_guard must be >= 0 or None, got {self.slack_guard}")
        if self.hold_share is not None and self.hold_share < 0:
            raise AndreasError(f"hold_share must be >= 0 or None, got {self.hold_share}")
        if self.consolidate_margin is not None and not self.consolidate_margin >= 0:
            raise AndreasError(f"consolidate_margin must be >= 0 or None, got "
                               f"{self.consolidate_margin}")
        for name in ("hold_max_load", "resize_max_load", "consolidate_max_load"):
            if not getattr(self, name) >= 0:
                raise AndreasError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.config_energy not in CONFIG_ENERGIES:
            raise AndreasError(f"unknown config_energy {self.config_energy!r}; expected one "
                               f"of {', '.join(CONFIG_ENERGIES)}")
        for step in self.steps:
            resolve(step)  # an unknown step is an error now, not at the first decision
        if self.impl not in passes.IMPLS:
            raise AndreasError(f"unknown implementation {self.impl!r}; expected fast or plain")
        for order in (self.order, *self.extra_orders):
            if order not in ORDERINGS:
                raise AndreasError(f"unknown order {order!r}; expected one of "
                                   f"{', '.join(ORDERINGS)}")


@dataclass(frozen=True)
class ScoredPlan:
    score: float  # by the policy's scoring (look-ahead or proxy)
    iteration: int
    placement: Placement


@dataclass(frozen=True)
class Search:
    """One decision's passes: the best distinct plans, and the deterministic pass's."""

    elite: list[ScoredPlan]
    first: ScoredPlan  # iteration 0: the deterministic greedy pass, post-processed


@dataclass
class RandomizedGreedy:
    name: str = "andreas"
    params: GreedyParams = field(default_factory=GreedyParams)
    arrivals: ArrivalLog = field(default_factory=ArrivalLog)  # for hold_for_company's load

    # ------------------------------------------------------------------ public
    def decide(self, snapshot: Snapshot) -> Plan:
        self.arrivals.observe(snapshot)
        if not snapshot.jobs:
            return {}
        p = self.params
        deadline = Deadline.after_ms(p.decision_budget_ms)
        ctx = PlanningContext(snapshot, p.plan_restart_s)
        found = self.search(ctx, size=1, deadline=deadline)
        best = found.elite[0]
        first = found.first
        if best.iteration != 0 and (p.slack_guard is not None or p.search_check):
            if p.slack_guard is not None and spends_needed_slack(ctx, first.placement,
                                                                 best.placement, p.slack_guard):
                best = first
            elif (p.search_check and not p.pass_budget and not deadline.passed()
                  and (leaves_late(ctx, first.placement) or leaves_late(ctx, best.placement))
                  and not keeps_cost(snapshot, first.placement.to_plan(ctx),
                                     best.placement.to_plan(ctx), self.arrivals, p.seed,
                                     deadline)):
                best = first
        placed = best.placement
        if self.arrivals.offered_load(snapshot) < self.params.resize_max_load:
            placed = self.resize(ctx, placed, best.score, first.placement, deadline)
        return refine(snapshot, placed.to_plan(ctx), self.params, self.arrivals, deadline,
                      late=leaves_late(ctx, placed))

    def resize(self, ctx: PlanningContext, placed: Placement, cost: float,
               first: Placement, deadline: Deadline = NO_DEADLINE) -> Placement:
        """`placed` improved by resize moves (resizing.py) under the policy's score, among
        the plans the slack guard admits against the deterministic pass `first`."""
        budget = evaluation_budget(len(placed), self.params.pass_budget)
        guard, looked = self.params.slack_guard, [0]
        test = None if guard is None else guarded_climb(ctx, first, placed, guard)

        def admits(plan: Placement, changed: list[int]) -> bool:
            looked[0] += 1
            return test is None or test(plan, changed)

        return climb(placed, cost, lambda plan: resized(ctx, plan), admits,
                     lambda plan: score(ctx, self.params.score, plan),
                     lambda: looked[0] < budget and not deadline.passed())[0]

    def deterministic_pass(self, ctx: PlanningContext) -> tuple[Placement, float]:
        """Iteration 0's plan (the `greedy` policy's) and its score."""
        p = self.params
        result = passes.greedy_pass(ctx, ordered(ctx, p.order), config_energy=p.config_energy,
                                    impl=p.impl)
        cost = passes.post_process(ctx, result, p.score, p.impl)
        return result.placement, cost

    def elite(self, ctx: PlanningContext, size: int | None = None,
              deadline: Deadline = NO_DEADLINE) -> list[ScoredPlan]:
        """The best distinct plans found (at most `size`, default the elite size), cheapest
        first by score (iteration 0 is the deterministic greedy pass, so the best is never
        worse than it). Distinct: passes that place every job alike before post-processing
        count once. With a `deadline`, the randomised passes stop when it passes."""
        return self.search(ctx, size, deadline).elite

    def search(self, ctx: PlanningContext, size: int | None = None,
               deadline: Deadline = NO_DEADLINE) -> "Search":
        """The elite plans (`elite`) and the deterministic pass's own plan, from the same
        passes (the slack guard compares against the latter; running it again cost a pass)."""
        p = self.params
        size = p.elite_size if size is None else min(size, p.elite_size)
        iterations = p.max_iterations
        if p.pass_budget:
            iterations = min(iterations, p.pass_budget // max(1, len(ctx.job_ids)))
        if iterations > len(ctx.node_names) * len(ctx.job_ids):  # else below any cap
            iterations = min(iterations, self.iteration_cap(ctx))
        iterations = max(1, iterations)
        draws = self.draws(ctx, iterations)
        starts = [ordered(ctx, p.order)] + [ordered(ctx, o) for o in p.extra_orders
                                            if iterations > 1]
        pre_node, pre_cand, post_node, post_cand, post_moved, scores = self._passes(
            ctx, np.array(starts, np.int64), draws, deadline)
        k = ctx.packed
        rows = np.arange(len(ctx.job_ids))
        pre_gpus = np.where(pre_cand >= 0, k.cg[rows, np.maximum(pre_cand, 0)], -1)
        seen: set[bytes] = set()
        unique = []
        for it in range(len(scores)):
            key = pre_node[it].tobytes() + pre_gpus[it].tobytes()
            if key not in seen:
                seen.add(key)
                unique.append(it)
        unique.sort(key=lambda it: (scores[it], it))

        def scored(it: int) -> ScoredPlan:
            return ScoredPlan(float(scores[it]), it,
                              Placement(post_node[it], post_cand[it], post_moved[it]))

        elite = [scored(it) for it in unique[:size]]
        return Search(elite, elite[0] if elite[0].iteration == 0 else scored(0))

    def _passes(self, ctx: PlanningContext, starts: np.ndarray, draws: np.ndarray,
                deadline: Deadline) -> tuple[np.ndarray, ...]:
        """The kernel's passes (run_iterations): all at once, or with a deadline in slices
        sized from the time the passes so far took, until the deadline or the last draw."""
        p, k = self.params, ctx.packed
        run = passes.compiled_passes(p.impl, p.threads)

        def call(first: int, last: int, run_starts: bool) -> tuple[np.ndarray, ...]:
            return run(starts, draws[first:last], first, run_starts, k.ct, k.cg, k.ctime,
                       k.cen, k.cmov, k.mtime, k.nc, k.home, k.home_g, k.due, k.weight,
                       k.wait_penalty, ctx.pressure_ranks, k.node_type, k.node_cap, k.power,
                       k.type_capacity, float(ctx.now), float(ctx.eur_per_joule),
                       float(ctx.overhead), p.pi, p.alpha, p.beta, p.score == "lookahead",
                       k.meets, p.config_energy != "alone", p.config_energy == "filled",
                       k.type_nodes, k.type_start)

        total = len(draws)
        if deadline.at is None:
            return call(0, total, True)
        done, size, parts = 0, min(total, 4), []
        tic = time.perf_counter()
        parts.append(call(0, size, True))  # the deterministic passes always complete
        done = size
        while done < total and not deadline.passed():
            per_pass = (time.perf_counter() - tic) / (done + len(starts))
            # half of what seems to fit: a slice that runs slower than the ones before it
            # (a busy machine) overshoots the deadline by less
            size = int(min(total - done, max(1, 0.5 * deadline.left_s() / max(per_pass, 1e-7))))
            parts.append(call(done, done + size, False))
            done += size
        return tuple(np.concatenate([part[i] for part in parts]) for i in range(6))

    # ------------------------------------------------------------------ steps
    @staticmethod
    def iteration_cap(ctx: PlanningContext) -> int:
        """nodes × jobs × GPU-count choices: more randomised passes than that mostly repeat."""
        counts = len(np.unique(ctx.table.cg[ctx.table.real]))
        return len(ctx.node_names) * len(ctx.job_ids) * max(1, counts)

    def draws(self, ctx: PlanningContext, iterations: int) -> np.ndarray:
        """All uniform draws of one decision, shape (randomised passes, 3, jobs): neighbour
        swaps, configuration picks and node picks. Seeded by the policy seed and the decision
        time, so a decision depends on nothing but its snapshot."""
        n = len(ctx.job_ids)
        randomised = max(0, iterations - 1 - len(self.params.extra_orders))
        key = int(round(ctx.now * 1000.0)) % (2 ** 63)
        rng = np.random.default_rng([self.params.seed, key])
        return rng.random((randomised, 3, n))


def ordered(ctx: PlanningContext, order: str) -> list[int]:
    """Every job of `ctx` in the named order: the deterministic pass's (and the extra
    passes') starting order."""
    return ctx.ordered(order)


def spends_needed_slack(ctx: PlanningContext, base: Placement, other: Placement,
                        guard: float) -> bool:
    """Whether `other` leaves waiting any job that `base` runs, ends a job that is late under
    `base` later still, or ends an on-time job later than `base` with less slack than min(its
    slack under `base`, guard x its run time there). Completions are the planned run times
    from now. The deterministic pass keeps its plan unless a randomised one takes from no job
    what that pass gives it: the look-ahead cannot see the arrivals that would need it."""
    # only a job that base runs and other leaves waiting or ends later can spend slack
    maybe = (base.node >= 0) & ((other.node < 0) | (other.times(ctx) > base.times(ctx)))
    return any(slack_spent(ctx, j, base, other, guard) for j in np.flatnonzero(maybe).tolist())


def slack_spent(ctx: PlanningContext, j: int, base: Placement, other: Placement,
                guard: float) -> bool:
    """spends_needed_slack's rule for job j."""
    if base.node[j] < 0:
        return False
    if other.node[j] < 0:
        return True
    time_b = base.time_of(ctx, j)
    end_b, end_o = ctx.now + time_b, ctx.now + other.time_of(ctx, j)
    if end_o <= end_b:
        return False
    due = ctx.due[j]
    slack_b = due - end_b
    return slack_b < 0 or due - end_o < min(slack_b, guard * time_b)


def guarded_climb(ctx: PlanningContext, first: Placement, start: Placement,
                  guard: float) -> Callable[[Placement, list[int]], bool]:
    """The slack guard against `first` as the test of a climb from `start`: whether a
    neighbour, which differs from the plan the climb stands on in the jobs `changed`, spends
    no needed slack. A climb from a plan the guard admits moves only to admitted plans, so
    only the changed jobs can spend slack (the same answer as testing the whole plan, for a
    fraction of the work); from any other start every neighbour is tested whole."""
    if spends_needed_slack(ctx, first, start, guard):
        return lambda plan, changed: not spends_needed_slack(ctx, first, plan, guard)
    return lambda plan, changed: not any(slack_spent(ctx, j, first, plan, guard)
                                         for j in changed)


def leaves_late(ctx: PlanningContext, placed: Placement) -> bool:
    """Whether some job ends after its due date under `placed` (a waiting job: even if it
    started now on its fastest configuration)."""
    return bool(placed.late(ctx).any())


def refine(snapshot: Snapshot, plan: Plan, params: GreedyParams, arrivals: ArrivalLog,
           deadline: Deadline = NO_DEADLINE, late: bool = False) -> Decision:
    """The steps taken on a chosen plan (`params.steps`, see pipeline.py): by default run the
    queue on fewer powered nodes when a timeline of the known jobs keeps them in time, hold
    jobs rather than power a node for one alone (forward-checked), wait for cheaper hours,
    then GPU power limits."""
    return run_pipeline(snapshot, plan, params, arrivals, deadline, late)


GREEDY_OPTIONS = dataclass_options(GreedyParams)
PAPER_BETA = 0.2  # the paper's β: a node drawn among the best fifth of those that fit
PAPER_OPTIONS = dataclass_options(GreedyParams, ("max_iterations", "pi", "alpha", "beta",
                                                 "elite_size", "seed", "impl", "pass_budget",
                                                 "threads"))
PAPER_OPTIONS["beta"] = dataclasses.replace(PAPER_OPTIONS["beta"], default=PAPER_BETA,
                                            help="share β of the best-fitting nodes to pick "
                                                 "among (the paper's)")


@register("greedy", randomized=False, options=GREEDY_OPTIONS,
          summary="ANDREAS greedy pass: pressure order, cheapest on-time configuration, best fit")
def greedy(**params: object) -> RandomizedGreedy:
    # (make_policy has checked the keys: no filtering here, so none is dropped silently)
    params["max_iterations"] = 1
    return RandomizedGreedy("greedy", GreedyParams(**params))  # type: ignore[arg-type]


@register("andreas", randomized=True, options=GREEDY_OPTIONS,
          summary="ANDREAS Randomized Greedy: best of many randomised greedy passes, judged by "
                  "the look-ahead cost; pressure order, ATC under overload")
def andreas(**params: object) -> RandomizedGreedy:
    return RandomizedGreedy("andreas", GreedyParams(**params))  # type: ignore[arg-type]


@register("andreas-paper", randomized=True, options=PAPER_OPTIONS,
          summary="the Randomized Greedy exactly as published: pressure order, proxy cost")
def andreas_paper(**params: object) -> RandomizedGreedy:
    params.setdefault("beta", PAPER_BETA)
    params.update(order="pressure", score="proxy", defer=False, power_limits=False,
                  slack_guard=None, config_energy="alone", hold_share=None, resize_max_load=0.0,
                  consolidate_margin=None, forward_check=False, search_check=False, steps=())
    return RandomizedGreedy("andreas-paper", GreedyParams(**params))  # type: ignore[arg-type]
