"""What a policy returns: where each job runs, when to ask again, and why a job waits.

A `Decision` is a read-only mapping job id -> `Assignment` (a job not in it waits), so a
driver applies it as it applied a plain plan. It also carries `revisit_at`, the time by which
the policy must be asked again even if nothing happens (a job held back on purpose must start
then at the latest), and a `Reason` for every job it leaves waiting or paused, so that an
operator can be told why a job does not run.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from dataclasses import dataclass

from .base import Assignment, lookup  # noqa: F401  (lookup: the drivers import it here)

REASON_KINDS = {
    "held_for_company": "held for company until {until}",
    "waiting_for_gpus": "waiting for GPUs on node {node} until {until}",
    "deferred": "deferred to a cheaper hour until {until}",
    "carbon_threshold": "waiting for a cleaner grid (under {detail}) until {until}",
    "carbon_cap": "waiting: the carbon cap leaves no room this window ({detail}) until {until}",
    "no_capacity": "no capacity: no free GPUs in a configuration it can use",
    "waiting_for_nodes": "waiting for {detail}",
    "paused_for": "paused for job {job}",
    "consolidated": "waiting: the queue runs on fewer powered nodes and still ends in time",
    # set by the live service, not by a policy
    "over_quota": "over quota: {detail}",
    "node_drained": "node {node} is drained: nothing new starts there",
    "drained_out": "waiting: every node that can run it is drained ({node})",
}


@dataclass(frozen=True)
class Reason:
    """Why a job waits: one of `REASON_KINDS`, with the time, node, job or detail it names."""

    kind: str
    until: float | None = None
    node: str | None = None
    job: str | None = None
    detail: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in REASON_KINDS:
            raise ValueError(f"unknown reason {self.kind!r}; expected one of "
                             f"{', '.join(REASON_KINDS)}")

    def text(self) -> str:
        until = "-" if self.until is None else f"t={self.until:.0f}s"
        return REASON_KINDS[self.kind].format(until=until, node=self.node, job=self.job,
                                              detail=self.detail)

    def sentence(self) -> str:
        """The reason without its time (which a driver shows on its own clock)."""
        return REASON_KINDS[self.kind].split(" until {until}")[0].format(
            node=self.node, job=self.job, detail=self.detail)


class Decision(Mapping[str, Assignment]):
    """A plan (job id -> assignment), the time to revisit it, and why each left-out job waits."""

    __slots__ = ("_assignments", "revisit_at", "reasons")

    def __init__(self, assignments: Mapping[str, Assignment], revisit_at: float | None = None,
                 reasons: Mapping[str, Reason] | None = None) -> None:
        self._assignments = dict(assignments)
        self.revisit_at = revisit_at
        self.reasons = {k: v for k, v in (reasons or {}).items()
                        if k not in self._assignments}

    @classmethod
    def of(cls, plan: Mapping[str, Assignment]) -> "Decision":
        """`plan` as a Decision (its revisit time and reasons kept, if it has them)."""
        if isinstance(plan, Decision):
            return plan
        return cls(plan, getattr(plan, "revisit_at", None))

    def __getitem__(self, job_id: str) -> Assignment:
        return self._assignments[job_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._assignments)

    def __len__(self) -> int:
        return len(self._assignments)

    # The dict's own methods, not Mapping's generic ones built on __getitem__: a driver looks
    # up every active job in every decision (a replay: millions of look-ups). Read-only views.
    def __contains__(self, job_id: object) -> bool:
        return job_id in self._assignments

    def get(self, job_id, default=None):
        return self._assignments.get(job_id, default)

    def keys(self) -> KeysView[str]:
        return self._assignments.keys()

    def items(self) -> ItemsView[str, Assignment]:
        return self._assignments.items()

    def values(self) -> ValuesView[Assignment]:
        return self._assignments.values()

    def __eq__(self, other: object) -> bool:
        """Equal to any mapping with the same assignments (revisit time and reasons aside)."""
        if isinstance(other, Mapping):
            return self._assignments == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"Decision({self._assignments!r}, revisit_at={self.revisit_at!r}, "
                f"reasons={self.reasons!r})")

    def replaced(self, assignments: Mapping[str, Assignment] | None = None, *,
                 revisit_at: float | None = None, reasons: Mapping[str, Reason] | None = None,
                 ) -> "Decision":
        """A new decision: these assignments; the earlier of the two revisit times; the
        reasons of both (the new ones win) for the jobs it leaves out."""
        times = [t for t in (self.revisit_at, revisit_at) if t is not None]
        return Decision(self._assignments if assignments is None else assignments,
                        min(times) if times else None, {**self.reasons, **(reasons or {})})
