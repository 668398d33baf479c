"""Small builders for hand-made scenarios and snapshots."""

from __future__ import annotations

from andreas.model import Cluster, GpuType, Job, Node, Profiles, Scenario
from andreas.policies.base import Assignment, JobView, Snapshot
from andreas.policies.steps.pipeline import HOLD_SHARES

NO_HOLDS = {key: None for key in HOLD_SHARES}  # policy options: no step holds a job back

EUR_PER_KWH_FOR_1E7 = 0.36  # with PUE 1: 0.36 EUR/kWh = 1e-7 EUR per joule


def cluster(nodes, power, *, price=EUR_PER_KWH_FOR_1E7, pue=1.0, overhead=0.0) -> Cluster:
    """nodes: [(name, type, gpus)], power: {type: [W for 1..k busy]}."""
    return Cluster({t: GpuType(t, tuple(map(float, p))) for t, p in power.items()},
                   tuple(Node(*n) for n in nodes), price, pue, overhead)


def job(job_id, submit=0.0, due=1e9, weight=0.01, epochs=10.0, profile="p") -> Job:
    return Job(job_id, float(submit), float(due), float(weight), float(epochs), profile)


def scenario(cl: Cluster, profiles: dict, jobs) -> Scenario:
    return Scenario(cl, Profiles(profiles), tuple(sorted(jobs, key=lambda j: j.submit_time)))


def snapshot(sc: Scenario, now=0.0, running=None, remaining=None) -> Snapshot:
    """All jobs of `sc` submitted by `now`; running = {job_id: (node, gpus)}."""
    running = running or {}
    remaining = remaining or {}
    views = []
    for j in sc.jobs:
        if j.submit_time <= now:
            a = running.get(j.job_id)
            views.append(JobView(j, remaining.get(j.job_id, j.epochs),
                                 Assignment(*a) if a else None, a is not None))
    return Snapshot(now, sc.cluster, sc.profiles, tuple(views))


class Scripted:
    """A policy that follows a function of the snapshot: for hand-computed schedules."""

    name = "scripted"

    def __init__(self, fn):
        self.fn = fn

    def decide(self, snap: Snapshot):
        ids = {v.job_id for v in snap.jobs}
        return {k: Assignment(*v) for k, v in self.fn(snap.time, ids).items()}


def policy_with(name: str, seed: int, max_iterations: int = 20):
    """A policy for tests that loop over every policy: few greedy passes where it has them."""
    from andreas.policies import make_policy
    from andreas.policies.registry import options_for

    return make_policy(name, **options_for(name, {"seed": seed,
                                                  "max_iterations": max_iterations}))


def placement(ctx, places: dict):
    """A Placement of `ctx` with job j on (node, GPUs) for each entry of `places` (the column
    of that configuration on the node's GPU type), every other job waiting."""
    from andreas.policies.search.placement import Placement

    k = ctx.packed
    changes = {}
    for j, (node, gpus) in places.items():
        changes[j] = (node, next(c for c in range(int(k.nc[j]))
                                 if k.cg[j, c] == gpus and k.ct[j, c] == k.node_type[node]))
    return Placement.waiting(len(ctx.job_ids)).moved_to(ctx, changes)


def drawn_profiles(draw, types) -> dict:
    """Two profiles, p0 and p1, for hypothesis: each runs on 1 GPU of the first type and on a
    drawn subset of 1-4 GPUs of every type, 1-60 s per epoch (`draw` is a composite's)."""
    from hypothesis import strategies as st

    profiles = {}
    for p in ("p0", "p1"):
        configs = {(types[0], 1): float(draw(st.integers(1, 60)))}
        for t in types:
            for g in (1, 2, 3, 4):
                if draw(st.booleans()):
                    configs[(t, g)] = float(draw(st.integers(1, 60)))
        profiles[p] = configs
    return profiles


def drawn_jobs(draw, most: int, last_submit: int, most_slack: int) -> list[Job]:
    """1 to `most` jobs of p0 or p1 for hypothesis: submitted by `last_submit` s, due up to
    `most_slack` s later, with drawn weights and epochs."""
    from hypothesis import strategies as st

    jobs = []
    for i in range(draw(st.integers(1, most))):
        submit = float(draw(st.integers(0, last_submit)))
        jobs.append(job(f"j{i}", submit=submit, due=submit + draw(st.integers(0, most_slack)),
                        weight=draw(st.sampled_from([0.0, 0.001, 0.01, 0.05])),
                        epochs=draw(st.sampled_from([0.5, 1.0, 3.0, 7.25, 12.0])),
                        profile=draw(st.sampled_from(["p0", "p1"]))))
    return jobs
