"""The arrivals a policy has seen (`ArrivalLog`): its estimate of the offered load, and the
jobs the forward check samples future arrivals from.

A snapshot shows only unfinished jobs, so a policy keeps this across its decisions."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..model import Config, Job
from .base import JobView, Snapshot


@dataclass
class ArrivalLog:
    """Submission time and least GPU-time of the newest `window` jobs a policy has seen. A
    snapshot shows only unfinished jobs, so a policy keeps this across its decisions to
    estimate the offered load."""

    window: int = 20
    seen: dict[str, tuple[float, float]] = field(default_factory=dict)  # id -> (submit, work)
    jobs: dict[str, Job] = field(default_factory=dict)  # the same jobs, to sample arrivals from
    # their profiles' rows: a live service's snapshot holds only the unfinished jobs' profiles
    profiles: dict[str, Mapping[Config, float]] = field(default_factory=dict)
    power: dict[str, Mapping[Config, float]] = field(default_factory=dict)  # their own draws

    def observe(self, snapshot: Snapshot) -> None:
        unseen = [view for view in snapshot.jobs if view.job_id not in self.seen]
        trims = len(self.seen) + len(unseen) > 2 * self.window
        # A job submitted before every one of `window` jobs seen cannot be among the newest
        # kept when this call trims: it is not looked at (a long queue's older jobs, at every
        # decision)
        floor = min(s for s, _ in self.seen.values()) \
            if trims and len(self.seen) >= self.window else -math.inf
        for view in unseen:
            if view.job.submit_time >= floor:
                self._add(snapshot, view)
        if trims:  # to the newest `window`
            newest = sorted(self.seen.items(), key=lambda kv: kv[1][0])[-self.window:]
            self.seen = dict(newest)
            self.jobs = {k: self.jobs[k] for k in self.seen if k in self.jobs}
            kept = {j.profile for j in self.jobs.values()}
            self.profiles = {p: c for p, c in self.profiles.items() if p in kept}
            self.power = {p: c for p, c in self.power.items() if p in kept}

    def _add(self, snapshot: Snapshot, view: JobView) -> None:
        configs = snapshot.profiles.configs(view.job.profile)
        work = view.job.epochs * min(snapshot.profiles.gpu_seconds_per_epoch(view.job.profile))
        self.seen[view.job_id] = (view.job.submit_time, work)
        if not configs:  # a gang alone: its load counts; sampled arrivals run on one node
            return
        self.jobs[view.job_id] = view.job
        self.profiles[view.job.profile] = dict(configs)  # picklable
        if view.job.profile in snapshot.profiles.power:
            self.power[view.job.profile] = dict(snapshot.profiles.power[view.job.profile])

    def rate(self) -> float:
        """Arrivals per second among the newest jobs seen; 0 while fewer than two."""
        newest = sorted(s for s, _ in self.seen.values())[-self.window:]
        span = newest[-1] - newest[0] if len(newest) > 1 else 0.0
        return (len(newest) - 1) / span if span > 0 else 0.0

    def offered_load(self, snapshot: Snapshot) -> float:
        """Arrival rate × mean least GPU-time of the newest arrivals ÷ the cluster's GPUs (1 =
        the cluster busy all the time at the jobs' most frugal sizes); inf while unknown. The
        work is averaged over arrivals, not over the jobs in view: long jobs stay in view
        longer, so those would overstate it."""
        newest = sorted(self.seen.values())[-self.window:]
        span = snapshot.time - newest[0][0] if newest else 0.0
        if len(newest) < 2 or span <= 0:
            return math.inf
        work = sum(w for _, w in newest) / len(newest)
        gpus = snapshot.cluster.total_gpus
        return (len(newest) - 1) / span * work / gpus

    def median_slack(self) -> float:
        """The median slack of the newest arrivals at their submission, as a share of their
        fastest run time ((due date - submission) / fastest run - 1); inf while none is known.
        Jobs arriving with little slack must start at once on fast GPUs: a plan that holds
        GPUs or nodes back for the jobs in view makes them late."""
        shares = []
        for job in self.jobs.values():
            rows = self.profiles.get(job.profile)
            if not rows:
                continue
            fastest = job.epochs * min(rows.values())
            if fastest > 0:
                shares.append((job.due_date - job.submit_time) / fastest - 1.0)
        return statistics.median(shares) if shares else math.inf
