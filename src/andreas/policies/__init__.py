"""Scheduling policies: pure functions from a cluster snapshot to a plan."""

from __future__ import annotations

from ..errors import AndreasError
from . import baselines, carbon_threshold, greedy, improved  # noqa: F401  (registers them)
from .base import Assignment, JobView, Plan, Policy, Snapshot
from .registry import POLICIES, check_options

__all__ = ["POLICIES", "Assignment", "JobView", "Plan", "Policy", "Snapshot", "make_policy",
           "policy_names"]


def _register_optional() -> None:
    """Policies with heavier dependencies live outside this package; importing registers them."""
    from ..optim import milp_policy  # noqa: F401


_register_optional()


def policy_names() -> list[str]:
    return list(POLICIES)


def make_policy(name: str, **params: object) -> Policy:
    """Build a registered policy by name with its options (`andreas policies NAME` lists
    them); an unknown option or a bad value is an AndreasError that lists the valid ones."""
    info = POLICIES.get(name)
    if info is None:
        raise AndreasError(f"unknown policy {name!r}; expected one of {', '.join(POLICIES)}")
    return info.factory(**check_options(name, params))
