"""The decision pipeline: plan steps applied, in order, to the plan a search chose.

A policy of the ANDREAS family is a search (the greedy pass, the Randomized Greedy, a local
search) followed by steps. A step is a small object with a `name` and
`apply(snapshot, decision, context) -> Decision`: it may leave jobs waiting (each with a
`Reason`), change configurations or power limits, and ask to be revisited. `andreas-paper`
runs no step; `andreas` runs `DEFAULT_STEPS`; `--set steps=a,b` chooses others, and a step
written elsewhere is named by its import path (`my_module:MyStep`, see docs/plan-steps.md).

Each step owns its options (`wait.share`, `company.max_load`; registry.py) and is built from
them, or stays off when they say so. Steps that spend slack on a bet about the future
(option `checked_steps`; by default the holds, `wait` and `company`) are checked as a group
of consecutive steps: the decision they make is kept only if, played forward with sampled
arrivals, it costs no more than the decision before them (`forward_check.py`); they are
skipped when the plan already leaves a job late (option `hold_when_late`).
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Mapping

from ...errors import AndreasError
from ..base import Snapshot
from ..budget import NO_DEADLINE, Deadline
from ..decision import Decision, Reason
from ..options import dataclass_options, option
from . import forward_check
from .registry import PlanStep, StepContext, build_steps, resolve

DEFAULT_STEPS = ("consolidate", "wait", "company", "defer", "power_limits")
# the options of the steps that leave jobs waiting on a bet about arrivals (off: the step is
# off); the CLI's --hold sets them all, a forecast turns them off
HOLD_SHARES = ("consolidate.share", "wait.share", "company.share")


_JOB_ID = attrgetter("job.job_id")


@dataclass(frozen=True)
class PipelineOptions:
    """Which steps run, in which order, and how the steps that bet on the future are checked."""

    steps: tuple[str, ...] = option(
        DEFAULT_STEPS, "the plan steps applied to the chosen plan, in order (steps/): "
        "consolidate, wait, company, defer, power_limits, or module:Class")
    checked_steps: tuple[str, ...] = option(
        ("wait", "company"), "steps whose decisions the forward check judges, as a group: "
        "kept only if no dearer played forward than the decision before them")
    forward_check: bool = option(
        True, "keep the holds of a decision only if, played forward with sampled arrivals, "
        "they cost no more than running the held jobs now (forward_check.py); with a "
        "pass_budget no check runs and the checked steps are skipped")
    hold_when_late: bool = option(
        False, "run the checked steps (the holds) also when the chosen plan leaves a job late "
        "(a waiting one: even on its fastest configuration); off by default: a decision that "
        "already pays tardiness spends no slack on a bet (bench/zoo-seeds.md)")

    def __post_init__(self) -> None:
        for step in self.steps:
            resolve(step)  # an unknown step is an error now, not at the first decision


def named_steps(steps: Any) -> tuple[str, ...]:
    """The `steps` option as given (a list, or "a,b" as written on a command line; None: the
    default), as step names."""
    if steps is None:
        return DEFAULT_STEPS
    return dataclass_options(PipelineOptions)["steps"].convert(steps)


def holds_off(steps: Any) -> dict[str, None]:
    """The options that turn off the holding steps among `steps` (as `named_steps` takes
    it)."""
    names = named_steps(steps)
    return {key: None for key in HOLD_SHARES if key.partition(".")[0] in names}


@dataclass(frozen=True)
class Pipeline:
    """The steps of a policy, built: the pipeline's options, and each step as its own
    options (`<step>.<field>`) configured it."""

    options: PipelineOptions
    steps: tuple[PlanStep, ...]

    @classmethod
    def of(cls, options: PipelineOptions, step_options: Mapping[str, Any]) -> "Pipeline":
        return cls(options, tuple(build_steps(options.steps, step_options)))


def kept_asap(asap: list[str], before: Decision, after: Decision) -> Decision:
    """A step's decision, unless it leaves waiting a job that must start as soon as it can
    (`asap`: the snapshot's jobs with `Job.start_asap`) and that the decision before it ran:
    then the decision before it. The steps spend slack to save energy; such a job's owner
    said not to."""
    for job_id in asap:
        if job_id in before and job_id not in after:
            return before
    return after


def run_pipeline(snapshot: Snapshot, plan, pipeline: Pipeline, ctx: StepContext,
                 deadline: Deadline = NO_DEADLINE, late: bool = False) -> Decision:
    """`plan` through the pipeline's steps; every job left waiting gets a reason. Past the
    decision's `deadline` the remaining steps are skipped (a checked group begun is undone):
    each spends slack on a bet, and an unchecked bet is the risk to avoid (budget.py). `late`:
    the plan already leaves a job late (the checked steps are then skipped, see below)."""
    decision = Decision.of(plan)
    asap = [v.job_id for v in snapshot.jobs if v.job.start_asap]
    steps, opts = pipeline.steps, pipeline.options
    before: Decision | None = None  # the decision as it was before the checked group
    # With a pass budget (trace replays) no check runs: it replays the whole known queue, whose
    # length is what the budget bounds. The steps it would judge are then skipped, not run
    # unchecked: unchecked holds made the Philly replays in rounds dearer (bench/scale.md).
    # Nor when the chosen plan already leaves a job late (`late`, unless `hold_when_late`):
    # the holds spend slack, and a cluster that pays tardiness has none to spend; the check's
    # one sampled future misjudged such bets on overloaded instances (bench/zoo-seeds.md).
    run_checked = not ctx.budgeted and (opts.hold_when_late or not late)
    checked = [opts.forward_check and s.name in opts.checked_steps for s in steps]
    for i, step in enumerate(steps):
        if deadline.passed():
            decision = decision if before is None else before
            break
        if checked[i] and not run_checked:
            continue
        if checked[i] and before is None:
            before = decision
        decision = kept_asap(asap, decision, step.apply(snapshot, decision, ctx))
        if checked[i] and (i + 1 == len(steps) or not checked[i + 1]):
            assert before is not None
            if ctx.follower is None:
                raise AndreasError("a checked step needs the policy's follower (StepContext)")
            if decision != before and not forward_check.keeps_cost(
                    snapshot, before, decision, ctx.arrivals, ctx.follower, ctx.seed, deadline,
                    ctx.check.rule()):
                decision = before  # the bet loses played forward: run the jobs now
            before = None
    return with_reasons(snapshot, decision)


def with_reasons(snapshot: Snapshot, decision: Decision) -> Decision:
    """`decision` with a reason for every job it leaves waiting (no_capacity where no step
    gave one)."""
    if len(decision) == len(snapshot.jobs):  # every job placed: none needs a reason
        return decision
    planned, reasons = decision.keys(), decision.reasons
    missing = {job_id: Reason("no_capacity") for job_id in map(_JOB_ID, snapshot.jobs)
               if job_id not in planned and job_id not in reasons}
    return decision.replaced(reasons=missing) if missing else decision
