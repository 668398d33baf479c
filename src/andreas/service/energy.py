"""Energy per run modelled from busy time (NVML's measured figure is `andreas.measure.nvml`).

The modelled figure is what `andreas.cost.account_segments` computes from the runs' busy
intervals and the node power table (the paper's model). NVML adds, per run, the GPUs' own
energy counters (GPU boards only, no host share), reported beside the model.
"""

from __future__ import annotations

from dataclasses import replace

from ..cost import CostBreakdown, account_segments, own_power_saved_w
from ..model import Cluster, Job, Segment


def run_segments(cluster: Cluster, job_id: str, node: str, gpu_type: str, gpus: int,
                 start: float, end: float, epochs: float,
                 gpu_power_w: float | None = None,
                 startup_s: float | None = None) -> list[Segment]:
    """A run's busy interval as the model sees it: the first `restart_overhead_s` (or the
    job's own start-up, `startup_s`) are a
    restart (every run starts up, the first included, as the service's forecasts assume), at
    the GPU type's restart draw where it has one, else at the table's; the rest runs, at the
    job's own draw per GPU (`gpu_power_w`, its profile's) where it has one, else at the
    table's, as the simulator charges them (`andreas.cost.own_power_saved_w`)."""
    gt = cluster.gpu_types.get(gpu_type)
    restart_saved = gt.restart_saving_w(gpus) if gt is not None else 0.0
    run_saved = own_power_saved_w(gt, gpus, gpu_power_w) if gt is not None else 0.0
    split = min(end, start + (cluster.restart_overhead_s if startup_s is None else startup_s))
    if restart_saved == run_saved or split <= start:
        return [Segment(job_id, node, gpu_type, gpus, start, end, epochs, "run", None,
                        run_saved)]
    out = [Segment(job_id, node, gpu_type, gpus, start, split, 0.0, "restart", None,
                   restart_saved)]
    if end > split:
        out.append(Segment(job_id, node, gpu_type, gpus, split, end, epochs, "run", None,
                           run_saved))
    return out


def modelled_costs(cluster: Cluster, jobs: list[Job], segments: list[Segment]) -> CostBreakdown:
    """Energy and tardiness from busy intervals on the power table, on Unix-time inputs.

    Times are shifted to start at the first segment, since `account_segments` charges idle
    draw from time 0 on; the cluster's series with them."""
    origin = min((s.start for s in segments), default=0.0)
    shifted = [replace(s, start=s.start - origin, end=s.end - origin) for s in segments]
    shifted_jobs = [Job(j.job_id, j.submit_time - origin, j.due_date - origin,
                        j.tardiness_weight, j.epochs, j.profile) for j in jobs]
    # the series too (a carbon intensity on Unix time): the shifted hour 0 is the origin's
    result = account_segments(cluster.from_time(origin), shifted_jobs, shifted)
    completion = {k: v + origin for k, v in result.completion.items()}
    return replace(result, completion=completion)
