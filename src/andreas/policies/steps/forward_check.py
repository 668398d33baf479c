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
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import numpy as np

from ...model import Job, Profiles
from ..arrivals import ArrivalLog
from ..base import Plan, Policy, Snapshot
from ..budget import NO_DEADLINE, Deadline, OutOfTime

SAMPLES = 1  # sampled futures per check (bench/zoo.md: 2 cost twice the time for the same costs)
MAX_SAMPLED = 20  # most sampled arrivals per future (bounds the check's time)


def sample_arrivals(snapshot: Snapshot, history: ArrivalLog, horizon_s: float,
                    rng: np.random.Generator) -> tuple[Job, ...]:
    """Jobs arriving in (now, now + horizon_s] at the observed rate, each a copy of a recently
    seen job shifted to its new submit time (its due-date slack kept)."""
    rate = history.rate()
    seen = list(history.jobs.values())
    if rate <= 0 or not seen or horizon_s <= 0:
        return ()
    out: list[Job] = []
    t = snapshot.time
    while len(out) < MAX_SAMPLED:
        t += float(rng.exponential(1.0 / rate))
        if t > snapshot.time + horizon_s:
            break
        model = seen[int(rng.integers(len(seen)))]
        out.append(replace(model, job_id=f"~sampled{len(out)}", submit_time=t,
                           due_date=t + (model.due_date - model.submit_time)))
    return tuple(out)


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
    `with_profiles_of`). Raises OutOfTime once `deadline` passes."""
    from ...sim.forecast import forecast

    total = 0.0
    for arrivals in futures:
        costs = forecast(snapshot, plan, follower(), arrivals=arrivals,
                         on_event=None if deadline.at is None else deadline.check)
        total += sum(c.total_cost for c in costs.values())
    return total / max(1, len(futures))


def keeps_cost(snapshot: Snapshot, before: Plan, after: Plan, history: ArrivalLog,
               follower: Callable[[], Policy], seed: int = 1,
               deadline: Deadline = NO_DEADLINE) -> bool:
    """Whether `after` (a step's decision) costs no more than `before` played forward, later
    decisions made by `follower()` (the policy's plain greedy pass, with no step that spends
    slack). If the decision's `deadline` passes first, no: a bet not checked is not taken."""
    if dict(after) == dict(before):
        return True
    try:
        return _keeps_cost(snapshot, before, after, history, follower, seed, deadline)
    except OutOfTime:
        return False


def sampled_futures(snapshot: Snapshot, history: ArrivalLog, samples: int,
                    seed: int) -> list[tuple[Job, ...]]:
    """`samples` futures of arrivals up to the last known due date, seeded by the policy seed
    and the decision time (a decision depends on its snapshot alone): the forward check's and
    the rollouts' (rollouts.py)."""
    horizon = max((v.job.due_date for v in snapshot.jobs), default=snapshot.time) - snapshot.time
    rng = np.random.default_rng([seed, int(round(snapshot.time * 1000.0)) % (2 ** 63)])
    return [sample_arrivals(snapshot, history, horizon, rng) for _ in range(samples)]


def _keeps_cost(snapshot: Snapshot, before: Plan, after: Plan, history: ArrivalLog,
                follower: Callable[[], Policy], seed: int, deadline: Deadline) -> bool:
    futures = sampled_futures(snapshot, history, SAMPLES, seed)
    snapshot = with_profiles_of(snapshot, history, futures)
    return (future_cost(snapshot, after, futures, follower, deadline)
            <= future_cost(snapshot, before, futures, follower, deadline) + 1e-9)
