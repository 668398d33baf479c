"""Online learning of a job's speed from its progress reports.

Profiles are estimates; the job's real seconds per epoch show in the reports it sends. The
estimator is the ratio of measured to profiled time over every pair of consecutive reports
within one run (so the start-up before the first report of a run is left out):

    factor = sum(dt) / sum(d_epochs * profiled_seconds_per_epoch(configuration of the run))

It weighs each configuration by the time spent on it, and scales the profile for every
configuration by the same factor (the job's other configurations are predicted from the one
it ran on). The scheduler replans when the factor moves by more than `replan_deviation` and by
more than its reports' noise (`worth_replanning`).
"""

from __future__ import annotations

from typing import Iterator, Mapping, Protocol, Sequence

FACTOR_BOUNDS = (1e-3, 1e3)
"""A learned factor is believed within these: the reports come from the job itself, and a job
that posts progress as fast as it can must not make its own run time vanish (a run of 0 s
once stopped every user's planning) or grow without end."""


class Report(Protocol):
    run_id: int
    time: float
    epochs_done: float


def _pairs(reports: Sequence[Report], profiled_spe: Mapping[int, float | None]
           ) -> Iterator[tuple[float, float]]:
    """(measured seconds, profiled seconds) over each pair of consecutive reports of one run
    that made progress on a configuration with a profiled speed."""
    previous: Report | None = None
    for report in reports:
        if previous is not None and previous.run_id == report.run_id:
            d_epochs = report.epochs_done - previous.epochs_done
            spe = profiled_spe.get(report.run_id)
            if d_epochs > 0 and spe:
                yield report.time - previous.time, d_epochs * spe
        previous = report


def speed_factor(reports: Sequence[Report], profiled_spe: Mapping[int, float | None],
                 ) -> float | None:
    """Measured / profiled time over consecutive reports of the same run; None until there
    is at least one such pair with progress."""
    measured = profiled = 0.0
    for dt, expected in _pairs(reports, profiled_spe):
        measured += dt
        profiled += expected
    if profiled <= 0 or measured <= 0:
        return None
    return min(FACTOR_BOUNDS[1], max(FACTOR_BOUNDS[0], measured / profiled))


STARTUP_BOUNDS = (0.0, 86400.0)
"""A learned start-up is believed within these (a day at most): the job's own reports set it."""


class RunStart(Protocol):
    id: int
    started_at: float
    epochs_at_start: float


def startup_s(runs: Sequence[RunStart], reports: Sequence[Report],
              spe: Mapping[int, float | None]) -> float | None:
    """The mean start-up of the runs that reported: from a run's launch to its first report,
    less the epochs that report counts at the run's seconds per epoch (`spe`, learned); None
    until a run reported. Like the speed, it is learned from the job's own reports."""
    first: dict[int, Report] = {}
    for report in reports:
        first.setdefault(report.run_id, report)
    measured = []
    for run in runs:
        report = first.get(run.id)
        seconds = spe.get(run.id)
        if report is None or not seconds:
            continue
        epochs = max(0.0, report.epochs_done - run.epochs_at_start)
        measured.append(report.time - run.started_at - epochs * seconds)
    if not measured:
        return None
    return min(STARTUP_BOUNDS[1], max(STARTUP_BOUNDS[0], sum(measured) / len(measured)))


def speed_spread(reports: Sequence[Report], profiled_spe: Mapping[int, float | None],
                 ) -> float | None:
    """How much the job's speed varies: the standard deviation of measured / profiled time
    over its consecutive report pairs, as a share of their mean; None until there are three
    pairs. Forecast ranges (`sim.forecast.forecast_range`) take each job this much faster
    and slower."""
    return _spread([dt / expected for dt, expected in _pairs(reports, profiled_spe)])


def _spread(ratios: list[float]) -> float | None:
    """The standard deviation of `ratios` as a share of their mean; None under 3 of them."""
    if len(ratios) < 3:
        return None
    mean = sum(ratios) / len(ratios)
    if mean <= 0:
        return None
    var = sum((r - mean) ** 2 for r in ratios) / (len(ratios) - 1)
    return min(1.0, var ** 0.5 / mean)


MIN_PAIRS = 3
"""Pairs of reports a learned speed needs before its moves may replan (the fewest that give a
spread, `speed_spread`)."""


def learned_factor(reports: Sequence[Report], profiled_spe: Mapping[int, float | None],
                   ) -> float | None:
    """`speed_factor` once MIN_PAIRS pairs of reports back it; None before: until then the
    profile stands (and the move from it is judged at once, by `worth_replanning`, rather
    than spent on the first noisy pairs, after which no later move would be large)."""
    if sum(1 for _ in _pairs(reports, profiled_spe)) < MIN_PAIRS:
        return None
    return speed_factor(reports, profiled_spe)


def worth_replanning(old: float, new: float, reports: Sequence[Report],
                     profiled_spe: Mapping[int, float | None], deviation: float) -> bool:
    """Whether the learned factor's move from `old` to `new` warrants a new plan: it moved by
    more than `deviation` x `old`, and by more than twice the new estimate's standard error
    (the spread of its report pairs x `new` / sqrt(pairs)), from at least MIN_PAIRS pairs.

    Why: on a shared or throttled machine a job's epochs jitter, so its first pair or two of
    reports say little; replanning on them paused and moved jobs for noise, and each job the
    new plan placed elsewhere cost other than its forecast said (docs/service-measured.md).
    The new factor is used all the same by the next decision, whatever its reason."""
    if abs(new - old) <= deviation * old:
        return False
    ratios = [dt / expected for dt, expected in _pairs(reports, profiled_spe)]
    if len(ratios) < MIN_PAIRS:
        return False
    spread = _spread(ratios) or 0.0
    return abs(new - old) > 2.0 * spread * new / len(ratios) ** 0.5
