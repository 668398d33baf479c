"""Who holds which GPU, and GPUs busy by type: what /nodes, /metrics and the cluster page show."""

from __future__ import annotations

from typing import Iterable

from sqlalchemy.orm import Session

from ..executors import NodeInfo
from .db import run_places
from .store import runs as run_rows


def gpu_holders(s: Session, owned: set[str] | None) -> dict[str, dict[str, str]]:
    """Node -> GPU index -> the job whose live run holds it; a job not in `owned` (None: all
    are) shows as "busy", so that no user learns another's job ids."""
    held: dict[str, dict[str, str]] = {}
    for run in run_rows.live_runs(s):
        shown = run.job_id if owned is None or run.job_id in owned else "busy"
        for node, indices in run_places(run):
            for i in indices:
                held.setdefault(node, {})[str(i)] = shown
    return held


def gpus_by_type(nodes: Iterable[NodeInfo], held: dict[str, dict[str, str]]
                 ) -> dict[str, tuple[int, int]]:
    """GPU type -> (GPUs, busy GPUs) over `nodes` (the executor's, in their order), from
    `gpu_holders`."""
    out: dict[str, tuple[int, int]] = {}
    for n in nodes:
        gpus, busy = out.get(n.gpu_type, (0, 0))
        out[n.gpu_type] = (gpus + n.gpus, busy + len(held.get(n.name, {})))
    return out
