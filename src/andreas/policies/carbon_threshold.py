"""A carbon-threshold baseline, as the tools operators deploy today (Compute Gardener's
Kubernetes plugin): a waiting job starts only while the grid's carbon intensity is under a
threshold, or once it has waited a maximum delay. It ignores due dates and prices; it is here
so that users can compare what they would otherwise run with the policies that price carbon
(`carbon_price` in cluster.yaml, docs/carbon.md).

Jobs that may start are placed as the non-preemptive baselines place them (baselines.py:
`order`, the cheapest configuration that meets the due date, best fit); running jobs are
never moved. The decision asks to be revisited at the next change of the intensity or when
the first held job's maximum delay runs out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from ..errors import AndreasError
from .base import Plan, Snapshot
from .baselines import OrderedNonPreemptive
from .decision import Decision, Reason
from .options import at_least, dataclass_options, option
from .registry import register
from .search.orderings import ORDERINGS


@dataclass(frozen=True)
class ThresholdOptions:
    threshold_g: float = option(
        200.0, "start waiting jobs only while the grid's carbon intensity is under this "
               "(gCO2eq/kWh)")
    max_delay_s: float = option(
        4 * 3600.0, "or once a job has waited this long (seconds since its submission)")
    order: str = option("edf", "the order jobs allowed to start are served in: "
                               + ", ".join(o for o in ORDERINGS if o != "pressure"))

    def __post_init__(self) -> None:
        at_least("threshold_g", self.threshold_g, 0.0)
        at_least("max_delay_s", self.max_delay_s, 0.0)
        if self.order not in ORDERINGS or self.order == "pressure":
            raise AndreasError(f"order must be one of "
                             f"{', '.join(o for o in ORDERINGS if o != 'pressure')}, "
                             f"got {self.order!r}")


@dataclass
class CarbonThreshold:
    options: ThresholdOptions
    name: str = "carbon-threshold"
    preempts: ClassVar[bool] = False  # running jobs are kept: drivers may leave them out

    def decide(self, snapshot: Snapshot) -> Plan:
        carbon = snapshot.cluster.carbon
        opts, now = self.options, snapshot.time
        place = OrderedNonPreemptive(self.name, ORDERINGS[opts.order])
        if carbon is None:  # no intensity known: the plain baseline
            return place.decide(snapshot)
        clean = carbon.price_at(now) < opts.threshold_g
        held = [] if clean else [v for v in snapshot.jobs if v.assignment is None
                                 and now - v.job.submit_time < opts.max_delay_s]
        if not held:
            return place.decide(snapshot)
        kept = {v.job_id for v in held}
        plan = place.decide(replace(snapshot, jobs=tuple(
            v for v in snapshot.jobs if v.job_id not in kept)))
        until = min([carbon.next_change(now)]
                    + [v.job.submit_time + opts.max_delay_s for v in held])
        reason = Reason("carbon_threshold", until=until, detail=f"{opts.threshold_g:g} g/kWh")
        return Decision(plan, revisit_at=until, reasons={job_id: reason for job_id in kept})


@register("carbon-threshold", randomized=False,
          summary="start jobs only while the grid's carbon intensity is under a threshold, or "
                  "after a maximum delay (as Compute Gardener); never preempts",
          options=dataclass_options(ThresholdOptions))
def _carbon_threshold(**options) -> CarbonThreshold:
    options.pop("seed", None)
    return CarbonThreshold(ThresholdOptions(**options))
