"""The decision pipeline: plan steps applied, in order, to the plan a search chose.

A policy of the ANDREAS family is a search (the greedy pass, the Randomized Greedy, a local
search) followed by steps. A step is a small object with a `name` and
`apply(snapshot, decision, context) -> Decision`: it may leave jobs waiting (each with a
`Reason`), change configurations or power limits, and ask to be revisited. `andreas-paper`
runs no step; `andreas` runs `DEFAULT_STEPS`; `--set steps=a,b` chooses others, and a step
written elsewhere is named by its import path (`my_module:MyStep`, see docs/plan-steps.md).

Each step is built from the policy's options by its `configure(params)` class method, which
returns None when the options turn it off. Steps that spend slack on a bet about the future
(option `checked_steps`; by default the holds, `wait` and `company`) are checked as a group
of consecutive steps: the decision they make is kept only if, played forward with sampled
arrivals, it costs no more than the decision before them (`forward_check.py`); they are
skipped when the plan already leaves a job late (option `hold_when_late`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Callable, Protocol

from ...errors import AndreasError
from ..base import Snapshot
from ..budget import NO_DEADLINE, Deadline
from ..decision import Decision, Reason

if TYPE_CHECKING:
    from ..arrivals import ArrivalLog
    from ..greedy import GreedyParams

DEFAULT_STEPS = ("consolidate", "wait", "company", "defer", "power_limits")
_JOB_ID = attrgetter("job.job_id")


@dataclass
class StepContext:
    """What the steps of one decision share: the policy's options, the arrivals it has seen,
    the offered load (computed once), and the nodes that jobs wait to join."""

    params: "GreedyParams"
    arrivals: "ArrivalLog"
    load: float
    awaited: set[str] = field(default_factory=set)


class PlanStep(Protocol):
    name: str

    def apply(self, snapshot: Snapshot, decision: Decision, ctx: StepContext) -> Decision: ...


StepFactory = Callable[["GreedyParams"], "PlanStep | None"]
STEPS: dict[str, StepFactory] = {}


def register_step(name: str) -> Callable:
    """Class decorator: make a step class (with `configure(params)`) available by `name`."""
    def wrap(cls):
        STEPS[name] = cls.configure
        return cls
    return wrap


def resolve(name: str) -> StepFactory:
    """A registered step, or `module:Class` imported (a step written outside this package)."""
    if name in STEPS:
        return STEPS[name]
    if ":" in name:
        module, _, attr = name.partition(":")
        try:
            cls = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise AndreasError(f"steps: cannot load {name!r}: {exc}") from None
        if not hasattr(cls, "configure"):
            raise AndreasError(f"steps: {name!r} has no configure(params) class method")
        return cls.configure
    raise AndreasError(f"steps: unknown step {name!r}; expected one of {', '.join(STEPS)} "
                       "or module:Class")


def build_steps(params: "GreedyParams") -> list[PlanStep]:
    """The steps `params.steps` names, as configured by the options (turned-off ones left out)."""
    steps = (resolve(name)(params) for name in params.steps)
    return [s for s in steps if s is not None]


def kept_asap(asap: list[str], before: Decision, after: Decision) -> Decision:
    """A step's decision, unless it leaves waiting a job that must start as soon as it can
    (`asap`: the snapshot's jobs with `Job.start_asap`) and that the decision before it ran:
    then the decision before it. The steps spend slack to save energy; such a job's owner
    said not to."""
    for job_id in asap:
        if job_id in before and job_id not in after:
            return before
    return after


def run_pipeline(snapshot: Snapshot, plan, params: "GreedyParams",
                 arrivals: "ArrivalLog", deadline: Deadline = NO_DEADLINE,
                 late: bool = False) -> Decision:
    """`plan` through the policy's steps; every job left waiting gets a reason. Past the
    decision's `deadline` the remaining steps are skipped (a checked group begun is undone):
    each spends slack on a bet, and an unchecked bet is the risk to avoid (budget.py). `late`:
    the plan already leaves a job late (the checked steps are then skipped, see below)."""
    from .forward_check import keeps_cost

    decision = Decision.of(plan)
    asap = [v.job_id for v in snapshot.jobs if v.job.start_asap]
    steps = build_steps(params)
    ctx = StepContext(params, arrivals, arrivals.offered_load(snapshot))
    before: Decision | None = None  # the decision as it was before the checked group
    # With a pass budget (trace replays) no check runs: it replays the whole known queue, whose
    # length is what the budget bounds. The steps it would judge are then skipped, not run
    # unchecked: unchecked holds made the Philly replays in rounds dearer (bench/scale.md).
    # Nor when the chosen plan already leaves a job late (`late`, unless `hold_when_late`):
    # the holds spend slack, and a cluster that pays tardiness has none to spend; the check's
    # one sampled future misjudged such bets on overloaded instances (bench/zoo-seeds.md).
    run_checked = not params.pass_budget and (params.hold_when_late or not late)
    checked = [params.forward_check and s.name in params.checked_steps for s in steps]
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
            if decision != before and not keeps_cost(snapshot, before, decision, arrivals,
                                                     params.seed, deadline):
                decision = before  # the bet loses played forward: run the jobs now
            before = None
    if len(decision) == len(snapshot.jobs):  # every job placed: none needs a reason
        return decision
    planned, reasons = decision.keys(), decision.reasons
    missing = {job_id: Reason("no_capacity") for job_id in map(_JOB_ID, snapshot.jobs)
               if job_id not in planned and job_id not in reasons}
    return decision.replaced(reasons=missing) if missing else decision
