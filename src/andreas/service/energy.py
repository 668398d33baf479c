"""Energy per run: measured by NVML where real GPUs exist, else modelled from busy time.

The modelled figure is what `andreas.cost.account_segments` computes from the runs' busy
intervals and the node power table (the paper's model). NVML adds, per run, the GPUs' own
energy counters (GPU boards only, no host share), reported beside the model.
"""

from __future__ import annotations

import logging
from typing import Iterable

from ..cost import CostBreakdown, account_segments
from ..model import Cluster, Job, Segment

log = logging.getLogger("andreas.service")


class NvmlMeter:
    """Reads the cumulative energy counter (mJ) of each GPU; `available` is False without
    NVIDIA GPUs or without `nvidia-ml-py`."""

    def __init__(self) -> None:
        self.available = False
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self.available = pynvml.nvmlDeviceGetCount() > 0
        except Exception:  # no driver, no GPU, no package: fall back to the model
            self.available = False

    def read_mj(self, indices: Iterable[int]) -> dict[str, float] | None:
        if not self.available:
            return None
        try:
            out = {}
            for i in indices:
                handle = self._nvml.nvmlDeviceGetHandleByIndex(int(i))
                out[str(i)] = float(self._nvml.nvmlDeviceGetTotalEnergyConsumption(handle))
            return out
        except Exception as exc:
            log.warning("NVML energy read failed: %s", exc)
            return None


def modelled_costs(cluster: Cluster, jobs: list[Job], segments: list[Segment]) -> CostBreakdown:
    """Energy and tardiness from busy intervals on the power table, on Unix-time inputs.

    Times are shifted to start at the first segment, since `account_segments` charges idle
    draw from time 0 on."""
    origin = min((s.start for s in segments), default=0.0)
    shifted = [Segment(s.job_id, s.node, s.gpu_type, s.gpus, s.start - origin, s.end - origin,
                       s.epochs, s.phase) for s in segments]
    shifted_jobs = [Job(j.job_id, j.submit_time - origin, j.due_date - origin,
                        j.tardiness_weight, j.epochs, j.profile) for j in jobs]
    result = account_segments(cluster, shifted_jobs, shifted)
    completion = {k: v + origin for k, v in result.completion.items()}
    return CostBreakdown(result.energy_cost, result.tardiness_cost, result.energy_joules,
                         result.job_energy_cost, result.job_tardiness_cost, completion)
