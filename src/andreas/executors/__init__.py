"""Executors: how the live service starts, watches and stops jobs (mechanism, not policy).

`local` runs jobs as processes on this machine; `ray` places them on the nodes of a running
Ray cluster; `slurm` submits them to a Slurm cluster. All start jobs through
`andreas.executors.launch`, which makes them survive a service restart and never run twice at
once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import Executor, LaunchRequest, NodeInfo, NodeLost, RunStatus

__all__ = ["Executor", "LaunchRequest", "NodeInfo", "NodeLost", "RunStatus", "make_executor"]


def __getattr__(name: str) -> Any:
    """The executor types, imported when first asked for: every job starts through
    `python -m andreas.executors.launch`, which imports this package first, and the
    wrapper's start-up is CPU the service and the other jobs share (base.py and its imports
    were half of it)."""
    if name in __all__:
        from . import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_executor(kind: str, nodes: list[NodeInfo], *, hidden_values: tuple[str, ...] = (),
                  **options) -> Executor:
    """The executor of this kind. `hidden_values` are the service's secrets (the admin
    token): a local job's environment never contains them (see `base.job_environment`)."""
    if kind == "local":
        from .local import LocalExecutor

        return LocalExecutor(nodes, hidden_values=hidden_values)
    if kind == "ray":
        from .ray import RayExecutor

        return RayExecutor(nodes, **options)
    if kind == "slurm":
        from .slurm import SlurmExecutor

        return SlurmExecutor(nodes, hidden_values=hidden_values, **options)
    raise ValueError(f"unknown executor {kind!r}; expected local, ray or slurm")
