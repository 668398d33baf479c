"""The forward check: a step that spends slack keeps its decision only if that decision, played
forward, costs no more than the decision it changed.

Holding a job back (for company, or for GPUs of a powered node) bets that the GPUs it waits for
will still be free when it must start; later arrivals can take them, and on clusters with tight
due dates the bet loses a late job's tardiness to save a few minutes of a node's power. The
check plays both decisions forward in the simulator: the known jobs, plus arrivals sampled
from the newest jobs the policy has seen (same profile, epochs, weight and due-date slack) at
the observed rate, the same samples for both decisions; later decisions are made by the plain
greedy pass with no step that spends slack. The step's decision is kept when its mean cost
(energy + tardiness of every job, sampled ones included) is no higher.

How a check judges is an option of the policy (`CheckOptions`): how many futures it samples,
whether a bet must also lose no single future by more than a share (risk-aware), and who
makes the later decisions: the plain greedy pass, or a stand-in for the policy itself (its
steps on one greedy pass, their holds unchecked) so that the check sees the holds the policy
will make again later (docs/plan-steps.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import numpy as np

from ...errors import AndreasError
from ...model import Job, Profiles
from ..arrivals import ArrivalLog
from ..base import Plan, Policy, Snapshot
from ..budget import NO_DEADLINE, Deadline, OutOfTime
from ..options import at_least, option

SAMPLES = 1  # sampled futures per check (bench/zoo.md: 2 cost twice the time for the same costs)
MAX_SAMPLED = 20  # most sampled arrivals per future (bounds the check's time)
FOLLOWERS = ("greedy", "policy")


@dataclass(frozen=True)
class Rule:
    """How one check judges a bet: on `samples` sampled futures (the same for both decisions)
    that reach `reach` x the time to the last known due date with at most `most` arrivals
    each, the bet is kept if its mean cost is at least a `margin` share below the decision it
    changed and, with a `risk` share, no future costs more than (1 + risk) x that decision's
    there (`within_risk`). No sample: kept, unchecked."""

    samples: int = SAMPLES
    risk: float | None = None
    margin: float = 0.0
    reach: float = 1.0
    most: int = MAX_SAMPLED


@dataclass(frozen=True)
class CheckOptions:
    """How every forward check of a policy (the holds', the search's) judges a bet."""

    check_samples: int = option(
        SAMPLES, "sampled futures each forward check plays, the same for both decisions "
        "(common random numbers); 0 = no replay: the checked steps' decisions are kept as "
        "made (still skipped when a job is late)")
    check_risk: float | None = option(
        None, "a bet is kept only if, besides costing no more on the mean, it costs no more "
        "than (1 + this) x the decision it changed in every sampled future; off: the mean "
        "alone")
    check_follower: str = option(
        "greedy", "who makes the later decisions a forward check plays: 'greedy' (the plain "
        "greedy pass) or 'policy' (the policy's own steps on one greedy pass, their holds "
        "taken unchecked: a stand-in for the policy itself)")
    check_reach: float = option(
        1.0, "how far the sampled futures reach, as a multiple of the time to the last known "
        "due date (bench/check-options.md: a short future is optimistic about bets that "
        "spend slack)")
    check_arrivals: int = option(MAX_SAMPLED, "most sampled arrivals per future")

    def __post_init__(self) -> None:
        at_least("check_samples", self.check_samples, 0)
        at_least("check_risk", self.check_risk, 0.0, off=True)
        at_least("check_reach", self.check_reach, 0.0)
        at_least("check_arrivals", self.check_arrivals, 0)
        if self.check_follower not in FOLLOWERS:
            raise AndreasError(f"check_follower must be one of {', '.join(FOLLOWERS)}, got "
                               f"{self.check_follower!r}")

    def rule(self, **changes: Any) -> Rule:
        """The rule these options set for a check, with `changes` (e.g. another number of
        samples, a margin)."""
        return replace(Rule(self.check_samples, self.check_risk, 0.0, self.check_reach,
                            self.check_arrivals), **changes)


def sample_arrivals(snapshot: Snapshot, history: ArrivalLog, horizon_s: float,
                    rng: np.random.Generator, most: int = MAX_SAMPLED) -> tuple[Job, ...]:
    """At most `most` jobs arriving in (now, now + horizon_s] at the observed rate, each a copy
    of a recently seen job shifted to its new submit time (its due-date slack kept)."""
    rate = history.rate()
    seen = list(history.jobs.values())
    if rate <= 0 or not seen or horizon_s <= 0:
        return ()
    prefix = sample_prefix(snapshot)
    out: list[Job] = []
    t = snapshot.time
    while len(out) < most:
        t += float(rng.exponential(1.0 / rate))
        if t > snapshot.time + horizon_s:
            break
        model = seen[int(rng.integers(len(seen)))]
        out.append(replace(model, job_id=f"{prefix}{len(out)}", submit_time=t,
                           due_date=t + (model.due_date - model.submit_time)))
    return tuple(out)


def sample_prefix(snapshot: Snapshot) -> str:
    """The start of the sampled arrivals' ids: `~sampled`, with one more `~` in front while
    some job in view has an id that starts with it, so that no sampled id is a real one. A
    scenario may name its jobs anything (two jobs of one id on one node over-fill it), and a
    forecast played inside another's holds that one's samples."""
    ids = [view.job_id for view in snapshot.jobs]
    prefix = "~sampled"
    while any(job_id.startswith(prefix) for job_id in ids):
        prefix = "~" + prefix
    return prefix


def with_profiles_of(snapshot: Snapshot, history: ArrivalLog,
                     futures: list[tuple[Job, ...]]) -> Snapshot:
    """`snapshot` whose profiles also hold those of the sampled jobs: a live service's
    snapshot has only its unfinished jobs' profiles, and a sample may copy a finished job."""
    table = snapshot.profiles.table
    missing = {job.profile for jobs in futures for job in jobs} - set(table)
    if not missing:
        return snapshot
    profiles = Profiles({**table, **{p: history.profiles[p] for p in missing}},
                        snapshot.profiles.levels,
                        {**snapshot.profiles.power, **{p: history.power[p] for p in missing
                                                       if p in history.power}},
                        snapshot.profiles.startup, snapshot.profiles.gangs,
                        snapshot.profiles.spread_slowdown)
    return replace(snapshot, profiles=profiles)


def future_cost(snapshot: Snapshot, plan: Plan, futures: list[tuple[Job, ...]],
                follower: Callable[[], Policy], deadline: Deadline = NO_DEADLINE) -> float:
    """Mean cost of every job from now on, `plan` applied now and later decisions made by a
    fresh `follower()` policy, over the sampled futures (whose profiles `snapshot` holds:
    `with_profiles_of`). Raises OutOfTime once `deadline` passes. Where it can, a future plays
    compiled (`sim.compiled_forecast`: the same cost to 1e-9), else in the simulator."""
    from ...sim.compiled_forecast import compiled_cost
    from ...sim.forecast import forecast

    total = 0.0
    for arrivals in futures:
        policy = follower()
        cost = compiled_cost(snapshot, plan, policy, arrivals)
        if cost is None:
            costs = forecast(snapshot, plan, policy, arrivals=arrivals,
                             on_event=None if deadline.at is None else deadline.check)
            cost = sum(c.total_cost for c in costs.values())
        elif deadline.at is not None:  # (a compiled future is not stopped midway)
            deadline.check()
        total += cost
    return total / max(1, len(futures))


def keeps_cost(snapshot: Snapshot, before: Plan, after: Plan, history: ArrivalLog,
               follower: Callable[[], Policy], seed: int = 1,
               deadline: Deadline = NO_DEADLINE, rule: Rule = Rule()) -> bool:
    """Whether `after` (a step's decision) costs no more than `before` played forward by the
    `rule` (`Rule`: how many futures, how long, and by what margin and risk), later decisions
    made by `follower()`. If the decision's `deadline` passes first, no: a bet not checked is
    not taken."""
    if dict(after) == dict(before) or rule.samples == 0:
        return True
    try:
        return _keeps_cost(snapshot, before, after, history, follower, seed, deadline, rule)
    except OutOfTime:
        return False


def within_risk(costs: Sequence[float], reference: Sequence[float], risk: float | None) -> bool:
    """Whether a bet whose cost in each sampled future is `costs` loses no future by more than
    a `risk` share of the `reference` decision's cost there (None: no such limit). A bet that
    wins on the mean but loses one future 10x is the bet that compounds (issue 42)."""
    return risk is None or all(c <= r * (1.0 + risk) + 1e-9 for c, r in zip(costs, reference))


def sampled_futures(snapshot: Snapshot, history: ArrivalLog, samples: int, seed: int,
                    reach: float = 1.0, most: int = MAX_SAMPLED,
                    drain: float = 0.0) -> list[tuple[Job, ...]]:
    """`samples` futures of at most `most` arrivals up to `reach` x the time to the last known
    due date, or `drain` x the backlog's time (`backlog_s`) if that is longer, seeded by the
    policy seed and the decision time (a decision depends on its snapshot alone): the forward
    check's and the rollouts' (rollouts.py)."""
    horizon = reach * (max((v.job.due_date for v in snapshot.jobs), default=snapshot.time)
                       - snapshot.time)
    if drain > 0:
        horizon = max(horizon, drain * backlog_s(snapshot))
    rng = np.random.default_rng([seed, int(round(snapshot.time * 1000.0)) % (2 ** 63)])
    return [sample_arrivals(snapshot, history, horizon, rng, most) for _ in range(samples)]


def backlog_s(snapshot: Snapshot) -> float:
    """Seconds the cluster's GPUs, all busy, take to run the work left of every job in view,
    each on its configuration of fewest GPU-seconds (a gang's included): a lower bound on
    when the queue in view clears. Past capacity the due dates in view are near or past, so a
    future cut at the last one ends before what a decision changes (a restart paid, a job
    started first) has played out; the backlog's time is how long it lasts."""
    gpus = sum(node.gpus for node in snapshot.cluster.nodes)
    if gpus <= 0:
        return 0.0
    work = 0.0
    for view in snapshot.jobs:
        costs = snapshot.profiles.gpu_seconds_per_epoch(view.job.profile)
        if costs:
            work += view.remaining_epochs * min(costs)
    return work / gpus


def _keeps_cost(snapshot: Snapshot, before: Plan, after: Plan, history: ArrivalLog,
                follower: Callable[[], Policy], seed: int, deadline: Deadline,
                rule: Rule) -> bool:
    futures = sampled_futures(snapshot, history, rule.samples, seed, rule.reach, rule.most)
    snapshot = with_profiles_of(snapshot, history, futures)
    bet = [future_cost(snapshot, after, [f], follower, deadline) for f in futures]
    base = [future_cost(snapshot, before, [f], follower, deadline) for f in futures]
    return (sum(bet) <= (1.0 - rule.margin) * sum(base) + 1e-9 * len(futures)
            and within_risk(bet, base, rule.risk))
