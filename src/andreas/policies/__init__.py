"""Scheduling policies: pure functions from a cluster snapshot to a plan."""

from __future__ import annotations

from ..errors import AndreasError
from . import (
    baselines,  # noqa: F401
    greedy,  # noqa: F401
)
from .base import POLICIES, Assignment, JobView, Plan, Policy, Snapshot
from .options import check_options
from .search import local_search  # noqa: F401

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
