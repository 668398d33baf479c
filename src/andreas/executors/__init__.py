"""Executors: how the live service starts, watches and stops jobs (mechanism, not policy).

`local` runs jobs as processes on this machine; `ray` places them on the nodes of a running
Ray cluster. Both start jobs through `andreas.executors.launch`, which makes them survive a
service restart and never run twice at once.
"""

from .base import Executor, LaunchRequest, NodeInfo, RunStatus

__all__ = ["Executor", "LaunchRequest", "NodeInfo", "RunStatus", "make_executor"]


def make_executor(kind: str, nodes: list[NodeInfo], **options) -> Executor:
    if kind == "local":
        from .local import LocalExecutor

        return LocalExecutor(nodes)
    if kind == "ray":
        from .ray import RayExecutor

        return RayExecutor(nodes, **options)
    raise ValueError(f"unknown executor {kind!r}; expected local or ray")
