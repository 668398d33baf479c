"""Rollouts over a small portfolio of decisions: play each forward on the same sampled
futures and keep the cheapest (option `restart_rollouts`, off by default: docs/plan-steps.md
says what it gained and lost on the benchmark zoo).

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
"""

from __future__ import annotations

from typing import Callable, Sequence

from .arrivals import ArrivalLog
from .base import Plan, Policy, Snapshot, stops_job
from .budget import NO_DEADLINE, Deadline, OutOfTime
from .steps.forward_check import future_cost, sampled_futures, with_profiles_of, within_risk

Candidate = tuple[Plan, Callable[[], Policy]]  # a decision now, and who makes the later ones


def cheapest(snapshot: Snapshot, candidates: Sequence[Candidate], history: ArrivalLog,
             samples: int, seed: int, deadline: Deadline = NO_DEADLINE,
             risk: float | None = None) -> int:
    """Index of the candidate whose mean cost played forward (its plan now, later decisions
    by a fresh policy of its own follower, on the same `samples` sampled futures) is least;
    the first among equals, and the first (the policy's own decision) if the deadline passes
    before every candidate is played: a choice not evaluated is not made. With a `risk`
    share, another candidate may replace the first only if in no sampled future it costs
    more than (1 + risk) x the first's cost there."""
    distinct: list[int] = []  # equal candidates are played once
    for i, (plan, follower) in enumerate(candidates):
        if not any(dict(candidates[j][0]) == dict(plan) and candidates[j][1] is follower
                   for j in distinct):
            distinct.append(i)
    if len(distinct) < 2:
        return 0
    futures = sampled_futures(snapshot, history, samples, seed)
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
