"""Rollouts over a small portfolio of decisions: play each forward on the same sampled
futures and keep the cheapest (option `restart_rollouts`: off in the family's defaults, on in
`andreas`'s; docs/plan-steps.md says what it gained and lost on the benchmark zoo).

This is the rollout algorithm of approximate dynamic programming (Bertsekas) with several
base policies: each candidate is a decision now and the policy that makes the later ones, and
the candidate whose play costs least is taken. With an exact evaluation (every future) the
chosen decision is never worse than the best of the base policies played from here. Ours
departs from that in two ways, both cheaper and both a source of error: the futures are a few
samples of the arrivals seen (`forward_check.sampled_futures`), the same ones for every
candidate (common random numbers: what differs between candidates is the candidates, not the
samples); and the base policies are the plain greedy pass and its non-preemptive twin, not the
policy itself with its steps and its own rollouts.

The policy asks here only where the look-ahead cannot price what it decides: when its
decision stops a running job that pays a restart (a pause, a move, a resize). The candidate
beside it is the same policy's decision with every running job kept where it runs, played
forward by the greedy pass that keeps them too (`greedy.steady_follower`); the policy's own is
played forward by the plain greedy pass. The restart that keeping saves is certain; what the
move buys depends on what arrives later, which is what the rollouts sample. With a `risk`
share the kept decision must also lose in no sampled future by more than that share.

How far the futures reach matters as much as how many there are: past capacity the due dates
in view are near or past, and a future cut at the last one ends before a restart's effects
have played out. With `rollout_drain` the futures reach that multiple of the backlog's time
(`forward_check.backlog_s`) when it is longer, with up to `rollout_arrivals` arrivals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from .arrivals import ArrivalLog
from .base import Plan, Policy, Snapshot, stops_job
from .budget import NO_DEADLINE, Deadline, OutOfTime
from .options import at_least, option
from .steps.forward_check import (
    MAX_SAMPLED,
    future_cost,
    sampled_futures,
    with_profiles_of,
    within_risk,
)

Candidate = tuple[Plan, Callable[[], Policy]]  # a decision now, and who makes the later ones


@dataclass(frozen=True)
class RolloutOptions:
    """When a policy of the family plays its decision forward against another before taking
    it: the restart rollouts (`cheapest`, here) and the slack guard's (greedy.py), and the
    futures they sample."""

    restart_rollouts: int = option(
        0, "when the decision stops a running job that pays a restart, play it forward "
        "against the same policy's decision that stops none, on this many sampled futures "
        "(the same for both), and keep the cheaper (rollouts.py); 0 = off; not with a "
        "pass_budget")
    rollout_risk: float | None = option(
        None, "with restart_rollouts: the decision that keeps running jobs replaces the "
        "policy's only if in no sampled future it costs more than (1 + this) x the "
        "policy's there; off: on the mean alone")
    rollout_min_late: float = option(
        0.0, "with restart_rollouts: play the rollouts only when at least this share of the "
        "jobs in view cannot meet their due date even started now on their fastest "
        "configuration (0: always; 0.25: the adaptive order's overload)")
    rollout_drain: float = option(
        0.0, "with restart_rollouts: the futures reach at least this multiple of the time the "
        "cluster takes to run the work in view (forward_check.backlog_s), when that is "
        "longer than the time to the last known due date; 0 = the due dates alone")
    rollout_arrivals: int = option(
        MAX_SAMPLED, "with restart_rollouts: most sampled arrivals per future")
    guard_rollouts: int = option(
        0, "when the slack guard refuses the search's plan, play it and the deterministic "
        "pass's forward on this many sampled futures (the same for both) and take it after "
        "all if its mean cost is at least guard_margin lower; 0 = the guard's word is final; "
        "not with a pass_budget")
    guard_margin: float = option(
        0.01, "with guard_rollouts: the share by which the refused plan must be cheaper "
        "played forward")

    def __post_init__(self) -> None:
        at_least("restart_rollouts", self.restart_rollouts, 0)
        at_least("rollout_risk", self.rollout_risk, 0.0, off=True)
        at_least("rollout_min_late", self.rollout_min_late, 0.0)
        at_least("rollout_drain", self.rollout_drain, 0.0)
        at_least("rollout_arrivals", self.rollout_arrivals, 0)
        at_least("guard_rollouts", self.guard_rollouts, 0)
        at_least("guard_margin", self.guard_margin, 0.0)


def cheapest(snapshot: Snapshot, candidates: Sequence[Candidate], history: ArrivalLog,
             samples: int, seed: int, deadline: Deadline = NO_DEADLINE,
             risk: float | None = None, drain: float = 0.0, most: int = MAX_SAMPLED) -> int:
    """Index of the candidate whose mean cost played forward (its plan now, later decisions
    by a fresh policy of its own follower, on the same `samples` sampled futures of at most
    `most` arrivals, reaching `drain` x the backlog's time if that is longer than the due
    dates': forward_check.sampled_futures) is least; the first among equals, and the first
    (the policy's own decision) if the deadline passes before every candidate is played: a
    choice not evaluated is not made. With a `risk` share, another candidate may replace the
    first only if in no sampled future it costs more than (1 + risk) x the first's cost
    there."""
    distinct: list[int] = []  # equal candidates are played once
    for i, (plan, follower) in enumerate(candidates):
        if not any(dict(candidates[j][0]) == dict(plan) and candidates[j][1] is follower
                   for j in distinct):
            distinct.append(i)
    if len(distinct) < 2:
        return 0
    futures = sampled_futures(snapshot, history, samples, seed, most=most, drain=drain)
    snapshot = with_profiles_of(snapshot, history, futures)
    try:
        per_future = [[future_cost(snapshot, candidates[i][0], [future], candidates[i][1],
                                   deadline) for future in futures] for i in distinct]
    except OutOfTime:
        return 0
    return distinct[least(per_future, risk)]


def least(costs: Sequence[Sequence[float]], risk: float | None = None) -> int:
    """The rule of `cheapest` on the costs `costs[k][s]` of candidate k in future s: the
    least mean, the first among equals; with a `risk` share, a candidate that costs more than
    (1 + risk) x the first's in some future is not admitted."""
    def admitted(k: int) -> bool:
        return k == 0 or within_risk(costs[k], costs[0], risk)

    means = [sum(c) / max(1, len(c)) for c in costs]
    return min((k for k in range(len(costs)) if admitted(k)),
               key=lambda k: (means[k] - 1e-9 * (k == 0), k))


def stops_restarting_job(snapshot: Snapshot, plan: Plan) -> bool:
    """Whether `plan` stops a running job (pause, move or resize) that then pays a restart."""
    if snapshot.cluster.restart_overhead_s <= 0 and not snapshot.profiles.startup:
        return False
    return any(v.assignment is not None and stops_job(v.assignment, plan.get(v.job_id))
               for v in snapshot.jobs)
