"""What a policy sees and what it returns: the contract between policies and their drivers.

A policy is a pure function `plan = policy.decide(snapshot)`. The simulator (simulated clock)
and the live service (real clock) both build `Snapshot`s and apply `Plan`s; neither is visible
to the policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol

from ..model import Cluster, Job, Profiles


@dataclass(frozen=True)
class Assignment:
    """Run a job on `gpus` GPUs of node `node`."""

    node: str
    gpus: int


@dataclass(frozen=True)
class JobView:
    """An unfinished, submitted job as the policy sees it."""

    job: Job
    remaining_epochs: float
    assignment: Assignment | None = None  # where it runs now; None = waiting
    started: bool = False  # has it ever run? (resuming costs the restart overhead)
    restart_remaining_s: float = 0.0  # restart overhead still to pay on its current assignment

    @property
    def job_id(self) -> str:
        return self.job.job_id


@dataclass(frozen=True)
class Snapshot:
    time: float
    cluster: Cluster
    profiles: Profiles
    jobs: tuple[JobView, ...]

    def free_gpus(self) -> dict[str, int]:
        free = {n.name: n.gpus for n in self.cluster.nodes}
        for view in self.jobs:
            if view.assignment is not None:
                free[view.assignment.node] -= view.assignment.gpus
        return free


Plan = Mapping[str, Assignment]
"""job_id -> where it runs until the next rescheduling point; a job not in the plan waits."""


class Policy(Protocol):
    name: str

    def decide(self, snapshot: Snapshot) -> Plan: ...


@dataclass
class PolicyInfo:
    name: str
    factory: Callable[..., Policy]
    randomized: bool
    summary: str
    params: dict[str, object] = field(default_factory=dict)


POLICIES: dict[str, PolicyInfo] = {}


def register(name: str, *, randomized: bool, summary: str) -> Callable:
    def wrap(factory: Callable[..., Policy]) -> Callable[..., Policy]:
        POLICIES[name] = PolicyInfo(name, factory, randomized, summary)
        return factory
    return wrap
