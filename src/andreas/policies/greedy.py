"""ANDREAS: the greedy pass and the Randomized Greedy of Filippini et al. (2021).

Each decision re-plans every unfinished job, running ones included (a running job may be paused,
resized or moved). The greedy pass orders jobs (by pressure in the paper; `order`), gives each
the cheapest configuration that meets its due date (else the fastest), packs best-fit, and hands
idle GPUs of used nodes to the job that gains most when that lowers the plan's score. The
Randomized Greedy repeats the pass with randomised order, configuration and node choices and
keeps the best plans by score (`score`: the look-ahead by default, or the paper's proxy).
A randomised plan replaces the deterministic pass's only if the slack guard admits it and, when
a job is late under either, the forward check says it costs no more played forward.
On a quiet cluster the chosen plan is then resized (`search/resizing.py`), and the plan steps
(`steps/`: `refine`) may replace it by the first step of a timeline of the known jobs on fewer
powered nodes, hold jobs back, defer them for cheaper hours and cap their GPUs' power.

A policy here is a search plus steps, as options (`GreedyParams`): the search's
(`SearchOptions`), the effort it may spend (`EffortOptions`), the choice among its plans
(`ChoiceOptions`), the rollouts that may overrule it (`rollouts.RolloutOptions`), the
pipeline's and each step's own (`wait.share`), and the forward checks' (`CheckOptions`).
`andreas-paper` is the search with the paper's options and no step; `greedy` is one pass, and
takes no option of the randomised passes. The passes themselves are compiled, in one
implementation (`search/kernel.py`, called through `search/passes.py`); this module chooses
among their plans.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import AndreasError
from .arrivals import ArrivalLog
from .base import Assignment, Plan, Policy, Snapshot
from .budget import NO_DEADLINE, Deadline
from .decision import Decision, Reason
from .options import OptionSpec, at_least, dataclass_options, option
from .pinning import without_pinned
from .registry import register
from .rollouts import RolloutOptions, cheapest, stops_restarting_job
from .search import orderings, passes
from .search.options import EffortOptions, SearchOptions
from .search.orderings import pressure_ranks
from .search.placement import Placement
from .search.planning import PlanningContext
from .search.resizing import climb, evaluation_budget, resized
from .search.scoring import score
from .steps import company, consolidate, defer, power_limits, wait  # noqa: F401  (register)
from .steps.company import DEFAULT_MAX_LOAD
from .steps.forward_check import CheckOptions, keeps_cost
from .steps.pipeline import Pipeline, PipelineOptions, named_steps, run_pipeline, with_reasons
from .steps.registry import STEPS, StepContext, resolve, step_option_specs


@dataclass(frozen=True)
class ChoiceOptions:
    """How the plan the search found is chosen over the deterministic pass's, and adjusted."""

    slack_guard: float | None = option(
        0.5, "a randomised plan replaces the deterministic pass only if it leaves no job "
        "that pass runs waiting, ends no late job later, and leaves each on-time job "
        "min(its slack there, this share of its run time); off: the paper")
    search_check: bool = option(
        True, "when either leaves a job late, keep a randomised plan over the deterministic "
        "pass only if, played forward with sampled arrivals, it costs no more "
        "(forward_check.py); not with a pass_budget")
    resize_max_load: float = option(
        DEFAULT_MAX_LOAD, "resize the chosen plan (resizing.py) only while no job waits and "
        "the offered load is below this; 0 = never")
    plan_restart_s: float = option(0.0, "plan as if each restart lost at least this long (s)")

    def __post_init__(self) -> None:
        at_least("slack_guard", self.slack_guard, 0.0, off=True)
        at_least("resize_max_load", self.resize_max_load, 0.0)
        at_least("plan_restart_s", self.plan_restart_s, 0.0)


OPTION_GROUPS = (SearchOptions, EffortOptions, ChoiceOptions, RolloutOptions, PipelineOptions,
                 CheckOptions)


@dataclass(frozen=True)
class GreedyParams:
    """A policy of the ANDREAS family, as options: the search's, the effort it may spend, the
    choice among its plans, the rollouts that may overrule that choice, the pipeline of
    steps, the steps' own (`<step>.<field>`) and the forward checks'."""

    seed: int = option(1, "seed of the random draws (with the decision time)")
    search: SearchOptions = field(default_factory=SearchOptions)
    effort: EffortOptions = field(default_factory=EffortOptions)
    choice: ChoiceOptions = field(default_factory=ChoiceOptions)
    rollouts: RolloutOptions = field(default_factory=RolloutOptions)
    pipeline: PipelineOptions = field(default_factory=PipelineOptions)
    step_options: Mapping[str, Any] = field(default_factory=dict)
    check: CheckOptions = field(default_factory=CheckOptions)

    @classmethod
    def of(cls, **options: Any) -> "GreedyParams":
        """The params of flat options, as `make_policy` takes them (`pi=0.1`,
        `wait.share=0.2`); an option no group has is an AndreasError."""
        groups: list[dict[str, Any]] = [{} for _ in OPTION_GROUPS]
        steps: dict[str, Any] = {}
        seed = int(options.pop("seed", 1))
        for key, value in options.items():
            for i, group in enumerate(OPTION_GROUPS):
                if key in {f.name for f in dataclasses.fields(group)}:
                    groups[i][key] = value
                    break
            else:
                if "." not in key:
                    raise AndreasError(f"unknown option {key!r}")
                steps[key] = value
        search, effort, choice, rollouts, pipeline, check = (
            g(**kw) for g, kw in zip(OPTION_GROUPS, groups))
        params = cls(seed=seed, search=search, effort=effort, choice=choice, rollouts=rollouts,
                     pipeline=pipeline, step_options=steps, check=check)
        params.steps()  # the steps' options checked now, not at the first decision
        return params

    def steps(self) -> Pipeline:
        """The pipeline of steps these options configure."""
        known = {f"{resolve(n).name}." for n in self.pipeline.steps}
        for key in self.step_options:
            if not any(key.startswith(prefix) for prefix in known):
                raise AndreasError(f"option {key!r} is for a step not in steps "
                                   f"({', '.join(self.pipeline.steps) or 'none'})")
        return Pipeline.of(self.pipeline, self.step_options)


def greedy_option_specs(leave_out: tuple[str, ...] = ()) -> dict[str, OptionSpec]:
    """The options of a policy of the family: every group's and every registered step's
    (a step named by its import path adds its own: `more_options`), less `leave_out`."""
    specs: dict[str, OptionSpec] = {}
    for group in OPTION_GROUPS:
        specs.update(dataclass_options(group))
    specs.update(step_option_specs(STEPS))
    return {k: v for k, v in specs.items() if k not in leave_out}


def more_options(options: Mapping[str, Any]) -> dict[str, OptionSpec]:
    """The options of the steps `options["steps"]` names by import path (`module:Class`):
    taken under the step's `name`, as a registered step's are."""
    if options.get("steps") is None:
        return {}
    return step_option_specs(n for n in named_steps(options["steps"]) if n not in STEPS)


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
    pipeline: Pipeline = field(init=False)

    def __post_init__(self) -> None:
        self.pipeline = self.params.steps()

    # ------------------------------------------------------------------ public
    def decide(self, snapshot: Snapshot) -> Plan:
        self.arrivals.observe(snapshot)
        if not snapshot.jobs:
            return {}
        p = self.params
        deadline = Deadline.after_ms(p.effort.decision_budget_ms)
        decision = self.decision(snapshot, deadline)
        r = p.rollouts
        if (r.restart_rollouts and not p.effort.pass_budget and not deadline.passed()
                and stops_restarting_job(snapshot, decision)
                and hopeless_share(snapshot) >= r.rollout_min_late):
            kept = self.decision_keeping_running(snapshot, deadline)
            pick = cheapest(snapshot, ((decision, follower), (kept, steady_follower)),
                            self.arrivals, r.restart_rollouts, p.seed, deadline,
                            r.rollout_risk, r.rollout_drain, r.rollout_arrivals)
            decision = (decision, kept)[pick]
        return decision

    def decision_keeping_running(self, snapshot: Snapshot,
                                 deadline: Deadline = NO_DEADLINE) -> Decision:
        """The policy's decision with every running job kept where it runs: the search plans
        the waiting jobs alone on the GPUs left free (pinning.py); the forward checks and the
        plan steps see the whole cluster, running jobs included. Should a step stop a running
        job after all, the search's plan is taken as it is."""
        pins = {v.job_id: v.assignment for v in snapshot.jobs if v.assignment is not None}
        rest = without_pinned(snapshot, pins)
        if not rest.jobs:
            return Decision(pins)
        no_room = {v.job_id: Reason("no_capacity") for v in rest.jobs}
        if not rest.cluster.nodes:
            return Decision(pins, reasons=no_room)
        ctx, placed = self.chosen(rest, deadline, whole=snapshot, pins=pins)
        plan = {**placed.to_plan(ctx), **pins}
        decision = refine(snapshot, plan, self.params, self.arrivals, deadline,
                          late=leaves_late(ctx, placed), pipeline=self.pipeline)
        if stops_restarting_job(snapshot, decision):
            return Decision(plan, reasons=no_room)
        return decision

    def decision(self, snapshot: Snapshot, deadline: Deadline = NO_DEADLINE) -> Decision:
        """The search's chosen plan, resized on a quiet cluster, through the plan steps."""
        ctx, placed = self.chosen(snapshot, deadline)
        return self.refine(snapshot, ctx, placed, deadline)

    def chosen(self, snapshot: Snapshot, deadline: Deadline = NO_DEADLINE,
               whole: Snapshot | None = None,
               pins: Mapping[str, Assignment] | None = None) -> tuple[PlanningContext, Placement]:
        """The search's plan for `snapshot`, chosen over the deterministic pass's by the slack
        guard and the forward check, and resized on a quiet cluster. `whole` and `pins`: the
        snapshot is `whole` less the running jobs `pins` keep where they run, and the forward
        check plays the plans on `whole`, with them."""
        p = self.params
        pins = pins or {}
        ctx = PlanningContext(snapshot, p.choice.plan_restart_s)
        found = self.search(ctx, size=1, deadline=deadline)
        best = found.elite[0]
        first = found.first
        guard = p.choice.slack_guard
        if best.iteration != 0 and (guard is not None or p.choice.search_check):
            if guard is not None and spends_needed_slack(ctx, first.placement, best.placement,
                                                         guard):
                if not self.overrules_guard(whole or snapshot,
                                            {**first.placement.to_plan(ctx), **pins},
                                            {**best.placement.to_plan(ctx), **pins}, deadline):
                    best = first
            elif (p.choice.search_check and not p.effort.pass_budget and not deadline.passed()
                  and (leaves_late(ctx, first.placement) or leaves_late(ctx, best.placement))
                  and not keeps_cost(whole or snapshot,
                                     {**first.placement.to_plan(ctx), **pins},
                                     {**best.placement.to_plan(ctx), **pins}, self.arrivals,
                                     check_follower(p, self.arrivals), p.seed, deadline,
                                     p.check.rule())):
                best = first
        placed = best.placement
        resize_below = p.choice.resize_max_load  # (the follower never resizes: no load to read)
        if resize_below > 0 and self.arrivals.offered_load(snapshot) < resize_below:
            placed = self.resize(ctx, placed, best.score, first.placement, deadline)
        return ctx, placed

    def overrules_guard(self, snapshot: Snapshot, first: Plan, refused: Plan,
                        deadline: Deadline = NO_DEADLINE) -> bool:
        """Whether the search's plan that the slack guard `refused` is taken over the
        deterministic pass's plan `first` after all (option `guard_rollouts`): played forward
        on the same sampled futures, later decisions by the checks' follower, its mean cost
        is at least `guard_margin` lower. The guard judges one decision's slack; the rollouts
        see what later arrivals make of it. The burden of proof is on the refused plan (by
        the margin); a deadline passed leaves the guard's word."""
        p = self.params
        samples = p.rollouts.guard_rollouts
        return (samples > 0 and not p.effort.pass_budget and not deadline.passed()
                and dict(refused) != dict(first)
                and keeps_cost(snapshot, first, refused, self.arrivals,
                               check_follower(p, self.arrivals), p.seed, deadline,
                               p.check.rule(samples=samples, risk=None,
                                            margin=p.rollouts.guard_margin)))

    def refine(self, snapshot: Snapshot, ctx: PlanningContext, placed: Placement,
               deadline: Deadline = NO_DEADLINE) -> Decision:
        """The steps taken on the chosen plan (the pipeline, steps/pipeline.py): by default run
        the queue on fewer powered nodes when a timeline of the known jobs keeps them in time,
        hold jobs rather than power a node for one alone (forward-checked), wait for cheaper
        hours, then GPU power limits."""
        plan = placed.to_plan(ctx)
        if not self.pipeline.steps:  # the follower: no step to read the load or lateness
            return with_reasons(snapshot, Decision.of(plan))
        return refine(snapshot, plan, self.params, self.arrivals, deadline,
                      late=leaves_late(ctx, placed), pipeline=self.pipeline)

    def resize(self, ctx: PlanningContext, placed: Placement, cost: float,
               first: Placement, deadline: Deadline = NO_DEADLINE) -> Placement:
        """`placed` improved by resize moves (resizing.py) under the policy's score, among
        the plans the slack guard admits against the deterministic pass `first`."""
        budget = evaluation_budget(len(placed), self.params.effort.pass_budget)
        guard, looked = self.params.choice.slack_guard, [0]
        test = None if guard is None else guarded_climb(ctx, first, placed, guard)

        def admits(plan: Placement, changed: list[int]) -> bool:
            looked[0] += 1
            return test is None or test(plan, changed)

        return climb(placed, cost, lambda plan: resized(ctx, plan), admits,
                     lambda plan: score(ctx, self.params.search.score, plan),
                     lambda: looked[0] < budget and not deadline.passed())[0]

    def deterministic_pass(self, ctx: PlanningContext) -> tuple[Placement, float]:
        """Iteration 0's plan (the `greedy` policy's) and its score."""
        s, impl = self.params.search, self.params.effort.impl
        result = passes.greedy_pass(ctx, ordered(ctx, s.order), config_energy=s.config_energy,
                                    impl=impl)
        cost = passes.post_process(ctx, result, s.score, impl)
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
        size = p.search.elite_size if size is None else min(size, p.search.elite_size)
        iterations = p.search.max_iterations
        if p.effort.pass_budget:
            iterations = min(iterations, p.effort.pass_budget // max(1, len(ctx.job_ids)))
        if iterations > len(ctx.node_names) * len(ctx.job_ids):  # else below any cap
            iterations = min(iterations, self.iteration_cap(ctx))
        iterations = max(1, iterations)
        draws = self.draws(ctx, iterations)
        starts = [ordered(ctx, p.search.order)] + [ordered(ctx, o) for o in p.search.extra_orders
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
        p, s, k = self.params, self.params.search, ctx.packed
        run = passes.compiled_passes(p.effort.impl, p.effort.threads)

        def call(first: int, last: int, run_starts: bool) -> tuple[np.ndarray, ...]:
            return run(starts, draws[first:last], first, run_starts, k.ct, k.cg, k.ctime,
                       k.cen, k.cmov, k.mtime, k.nc, k.home, k.home_g, k.due, k.weight,
                       k.wait_penalty, pressure_ranks(ctx), k.node_type, k.node_cap, k.power,
                       k.type_capacity, float(ctx.now), float(ctx.eur_per_joule),
                       float(ctx.kernel_overhead), s.pi, s.alpha, s.beta, s.score == "lookahead",
                       k.meets, s.config_energy != "alone", s.config_energy == "filled",
                       k.type_nodes, k.type_start, k.cw)

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
        randomised = max(0, iterations - 1 - len(self.params.search.extra_orders))
        if randomised == 0:  # one pass (greedy, the forward checks' follower): no generator
            return np.empty((0, 3, n))
        key = int(round(ctx.now * 1000.0)) % (2 ** 63)
        rng = np.random.default_rng([self.params.seed, key])
        return rng.random((randomised, 3, n))


def ordered(ctx: PlanningContext, order: str) -> list[int]:
    """Every job of `ctx` in the named order: the deterministic pass's (and the extra
    passes') starting order."""
    return orderings.ordered(ctx, order)


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


def hopeless_share(snapshot: Snapshot) -> float:
    """The share of the jobs in view that end after their due date even if they started now
    on their fastest configuration (a gang's rows count; 0 with no job)."""
    hopeless = 0
    for view in snapshot.jobs:
        rows = [*snapshot.profiles.configs(view.job.profile).values(),
                *snapshot.profiles.gangs.get(view.job.profile, {}).values()]
        if rows and snapshot.time + view.remaining_epochs * min(rows) > view.job.due_date:
            hopeless += 1
    return hopeless / len(snapshot.jobs) if snapshot.jobs else 0.0


def leaves_late(ctx: PlanningContext, placed: Placement) -> bool:
    """Whether some job ends after its due date under `placed` (a waiting job: even if it
    started now on its fastest configuration)."""
    return bool(placed.late(ctx).any())


def refine(snapshot: Snapshot, plan: Plan, params: GreedyParams, arrivals: ArrivalLog,
           deadline: Deadline = NO_DEADLINE, late: bool = False,
           pipeline: Pipeline | None = None) -> Decision:
    """`plan` through the steps `params` configure (their `pipeline`, if built already), as a
    decision of the policy does: the steps share the arrivals seen, the offered load, the seed,
    whether a pass budget bounds the decision, and the forward check's follower. `late`: the
    plan leaves a job late."""
    shared = StepContext(arrivals, arrivals.offered_load(snapshot), params.seed,
                         bool(params.effort.pass_budget), check_follower(params, arrivals),
                         params.check)
    return run_pipeline(snapshot, plan, pipeline or params.steps(), shared, deadline, late)


def follower() -> Policy:
    """The policy that plays later decisions in a forward check: the plain greedy pass, with no
    step, no resizing and no slack guard (a fresh one per sampled future)."""
    return RandomizedGreedy("forward", FOLLOWER)


def check_follower(params: GreedyParams, arrivals: ArrivalLog) -> Callable[[], Policy]:
    """Who plays later decisions in the forward checks of a policy with `params` that has seen
    `arrivals`: the plain greedy pass (`follower`), or with `check_follower=policy` a stand-in
    for the policy itself (`policy_follower`)."""
    if params.check.check_follower == "policy":
        return policy_follower(params, arrivals)
    return follower


def policy_follower(params: GreedyParams, arrivals: ArrivalLog) -> Callable[[], Policy]:
    """A stand-in for the policy of `params` to play later decisions in a forward check: its
    steps, with their options, on one greedy pass (no randomised pass, resizing or rollout:
    a replay makes many decisions), the checked steps' holds taken unchecked (still skipped
    when a job is late). Each replay starts from a copy of the `arrivals` the policy has seen,
    so its holds read the same load and slack as the policy's."""
    stand_in = dataclasses.replace(
        params, search=dataclasses.replace(params.search, max_iterations=1),
        effort=dataclasses.replace(params.effort, decision_budget_ms=0.0),
        choice=dataclasses.replace(params.choice, resize_max_load=0.0),
        rollouts=dataclasses.replace(params.rollouts, restart_rollouts=0),
        check=CheckOptions(check_samples=0))

    def make() -> Policy:  # (called inside the check, before the policy's log changes again)
        return RandomizedGreedy("forward-policy", stand_in, copy.deepcopy(arrivals))
    return make


class SteadyGreedy(RandomizedGreedy):
    """The plain greedy pass that never stops a running job: a driver plans the waiting jobs
    alone on the GPUs the running ones leave free (`Policy`, pinning.py)."""

    preempts = False


def steady_follower() -> Policy:
    """The follower of a decision that keeps every running job: later decisions keep them
    too (rollouts.py: the rollout of two base policies, the greedy pass and its
    non-preemptive twin, each from the decision it would make)."""
    return SteadyGreedy("forward-steady", FOLLOWER)


FOLLOWER = GreedyParams(search=SearchOptions(max_iterations=1),
                        choice=ChoiceOptions(slack_guard=None, resize_max_load=0.0),
                        pipeline=PipelineOptions(steps=()))
PAPER_BETA = 0.2  # the paper's β: a node drawn among the best fifth of those that fit
# andreas-paper is the search with the paper's options and no step; greedy is one pass
PAPER_OPTIONS = {k: v for k, v in greedy_option_specs().items()
                 if k in ("max_iterations", "pi", "alpha", "beta", "elite_size", "impl",
                          "pass_budget", "threads")}
PAPER_OPTIONS["beta"] = dataclasses.replace(PAPER_OPTIONS["beta"], default=PAPER_BETA,
                                            help="share β of the best-fitting nodes to pick "
                                                 "among (the paper's)")
ONE_PASS_UNUSED = ("max_iterations", "pi", "alpha", "beta", "elite_size", "extra_orders",
                   "threads", "search_check")


@register("greedy", randomized=False, options=greedy_option_specs(ONE_PASS_UNUSED),
          more_options=more_options,
          summary="ANDREAS greedy pass: pressure order, cheapest on-time configuration, best fit")
def greedy(**options: Any) -> RandomizedGreedy:
    # (make_policy has checked the keys: no filtering here, so none is dropped silently)
    return RandomizedGreedy("greedy", GreedyParams.of(**options, max_iterations=1))


ANDREAS_DEFAULTS = {"restart_rollouts": 16, "rollout_risk": 0.0, "rollout_min_late": 0.25}
"""Where `andreas` differs from the family's defaults (which `greedy` keeps): under overload (a
quarter of the jobs in view hopeless) a decision that pays a restart is played forward on 16
sampled futures against keeping every running job, and kept only if it loses no future
(bench/rollout-gate-16.md: at 16 futures no zoo or hold-out instance cost more at three
seeds; at 4, one cost 1.68x). Their futures end at the last due date in view: reaching twice
the backlog's time (`rollout_drain=2`) saved 6-7 % on the restart-heavy hold-outs but cost
10 % on `h-philly-small` and 2.3 % on `philly-windows` (bench/rollout-drain.md)."""


def andreas_specs() -> dict[str, OptionSpec]:
    """`andreas`'s options: the family's, with its own defaults (ANDREAS_DEFAULTS)."""
    specs = greedy_option_specs()
    return {k: dataclasses.replace(v, default=ANDREAS_DEFAULTS[k]) if k in ANDREAS_DEFAULTS
            else v for k, v in specs.items()}


def andreas_params(**options: Any) -> GreedyParams:
    """The params of `andreas` (and of the policies that extend it) for `options`."""
    return GreedyParams.of(**{**ANDREAS_DEFAULTS, **options})


@register("andreas", randomized=True, options=andreas_specs(), more_options=more_options,
          summary="ANDREAS Randomized Greedy: best of many randomised greedy passes, judged by "
                  "the look-ahead cost; pressure order, ATC under overload")
def andreas(**options: Any) -> RandomizedGreedy:
    return RandomizedGreedy("andreas", andreas_params(**options))


@register("andreas-paper", randomized=True, options=PAPER_OPTIONS,
          summary="the Randomized Greedy exactly as published: pressure order, proxy cost, no "
                  "plan step")
def andreas_paper(**options: Any) -> RandomizedGreedy:
    options.setdefault("beta", PAPER_BETA)
    options.update(order="pressure", score="proxy", slack_guard=None, config_energy="alone",
                   resize_max_load=0.0, search_check=False, steps=())
    return RandomizedGreedy("andreas-paper", GreedyParams.of(**options))
