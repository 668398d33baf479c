"""Online learning of a job's speed from its progress reports.

Profiles are estimates; the job's real seconds per epoch show in the reports it sends. The
estimator is the ratio of measured to profiled time over every pair of consecutive reports
within one run (so the start-up before the first report of a run is left out):

    factor = sum(dt) / sum(d_epochs * profiled_seconds_per_epoch(configuration of the run))

It weighs each configuration by the time spent on it, and scales the profile for every
configuration by the same factor (the job's other configurations are predicted from the one
it ran on). The scheduler replans when the factor moves by more than `replan_deviation`.
"""

from __future__ import annotations

from typing import Mapping, Protocol, Sequence

FACTOR_BOUNDS = (1e-3, 1e3)
"""A learned factor is believed within these: the reports come from the job itself, and a job
that posts progress as fast as it can must not make its own run time vanish (a run of 0 s
once stopped every user's planning) or grow without end."""


class Report(Protocol):
    run_id: int
    time: float
    epochs_done: float


def speed_factor(reports: Sequence[Report], profiled_spe: Mapping[int, float | None],
                 ) -> float | None:
    """Measured / profiled time over consecutive reports of the same run; None until there
    is at least one such pair with progress."""
    measured = profiled = 0.0
    previous: Report | None = None
    for report in reports:
        if previous is not None and previous.run_id == report.run_id:
            d_epochs = report.epochs_done - previous.epochs_done
            spe = profiled_spe.get(report.run_id)
            if d_epochs > 0 and spe:
                measured += report.time - previous.time
                profiled += d_epochs * spe
        previous = report
    if profiled <= 0 or measured <= 0:
        return None
    return min(FACTOR_BOUNDS[1], max(FACTOR_BOUNDS[0], measured / profiled))
