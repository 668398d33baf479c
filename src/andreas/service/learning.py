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

from dataclasses import dataclass
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
            expected = d_epochs * spe if d_epochs > 0 and spe else 0.0
            if expected > 0:  # (a product that underflows to 0 would divide the spread)
                yield report.time - previous.time, expected
        previous = report


def speed_factor(reports: Sequence[Report], profiled_spe: Mapping[int, float | None],
                 ) -> float | None:
    """Measured / profiled time over consecutive reports of the same run; None until there
    is at least one such pair with progress."""
    return speed_evidence(reports, profiled_spe).factor


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
    return speed_evidence(reports, profiled_spe).spread


MIN_PAIRS = 3
"""Pairs of reports a learned speed needs before it is believed and its moves may replan (the
fewest that give a spread, `speed_spread`)."""

NOISE_SIGMAS = 2.0
"""Standard errors a learned speed's move, or the gain a plan switch rests on, must exceed
before the service acts on it (`worth_replanning`, `planner.Planner.gain_needed`)."""


def standard_error(spread: float | None, pairs: int | None) -> float | None:
    """The standard error of a learned factor as a share of it: the spread of its report
    pairs / sqrt(pairs); None before MIN_PAIRS pairs or without a spread (the profile
    stands then, and nothing rests on the learned factor)."""
    if spread is None or pairs is None or pairs < MIN_PAIRS:
        return None
    return spread / pairs ** 0.5


@dataclass(frozen=True)
class SpeedEvidence:
    """What a job's progress reports say of its speed, from one pass over them (a job's
    every report is read again at each new one)."""

    factor: float | None  # `speed_factor`
    spread: float | None  # `speed_spread`
    pairs: int  # consecutive report pairs with progress on a profiled configuration

    @property
    def learned(self) -> float | None:
        """The factor once MIN_PAIRS pairs back it; None before: until then the profile
        stands (and the move from it is judged at once, by `worth_replanning`, rather than
        spent on the first noisy pairs, after which no later move would be large)."""
        return self.factor if self.pairs >= MIN_PAIRS else None

    @property
    def error(self) -> float | None:
        """The learned factor's standard error, a share of it (`standard_error`)."""
        return standard_error(self.spread, self.pairs)


def speed_evidence(reports: Sequence[Report], profiled_spe: Mapping[int, float | None],
                   ) -> SpeedEvidence:
    """The factor, the spread and the number of pairs of `reports`."""
    pairs = list(_pairs(reports, profiled_spe))
    measured = sum(dt for dt, _ in pairs)
    profiled = sum(expected for _, expected in pairs)
    factor = (None if profiled <= 0 or measured <= 0 else
              min(FACTOR_BOUNDS[1], max(FACTOR_BOUNDS[0], measured / profiled)))
    return SpeedEvidence(factor, _spread([dt / expected for dt, expected in pairs]),
                         len(pairs))


def _spread(ratios: list[float]) -> float | None:
    """The standard deviation of `ratios` as a share of their mean; None under 3 of them."""
    if len(ratios) < 3:
        return None
    mean = sum(ratios) / len(ratios)
    if mean <= 0:
        return None
    var = sum((r - mean) ** 2 for r in ratios) / (len(ratios) - 1)
    return min(1.0, var ** 0.5 / mean)


def worth_replanning(old: float, evidence: SpeedEvidence, deviation: float) -> bool:
    """Whether the learned factor's move from `old` to `evidence.learned` warrants a new
    plan: it moved by more than `deviation` x `old`, and by more than NOISE_SIGMAS times the
    new estimate's standard error (the spread of its report pairs x the factor /
    sqrt(pairs)), from at least MIN_PAIRS pairs.

    Why: on a shared or throttled machine a job's epochs jitter, so its first pair or two of
    reports say little; replanning on them paused and moved jobs for noise, and each job the
    new plan placed elsewhere cost other than its forecast said (docs/service-measured.md).
    The new factor is used all the same by the next decision, whatever its reason."""
    new = evidence.learned
    if new is None or abs(new - old) <= deviation * old:
        return False
    return abs(new - old) > NOISE_SIGMAS * (evidence.error or 0.0) * new
