"""Energy per run modelled from busy time (NVML's measured figure is `andreas.measure.nvml`).

The modelled figure is what `andreas.cost.account_segments` computes from the runs' busy
intervals and the node power table (the paper's model). NVML adds, per run, the GPUs' own
energy counters (GPU boards only, no host share), reported beside the model.
"""

from __future__ import annotations

from ..cost import CostBreakdown, account_segments
from ..model import Cluster, Job, Segment


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
