"""A plan step written outside the package: never pause a job that is almost done.

    andreas simulate my-scenario --policy andreas --out run \
        --set steps=consolidate,wait,company,examples.plan_step:FinishNearlyDone \
        --set finish_nearly_done.share=0.2

(run from the repository root, so that `examples` can be imported; docs/plan-steps.md).
"""

from dataclasses import dataclass
from typing import ClassVar

from andreas.errors import AndreasError
from andreas.policies.decision import Decision
from andreas.policies.options import option
from andreas.policies.steps.registry import StepContext


@dataclass(frozen=True)
class FinishNearlyDone:
    """Keep running, where it runs, a job with less than `share` of its epochs left that the
    decision would pause, if its GPUs are still free in the decision: its restart would cost
    more than the little energy a pause could save."""

    share: float = 0.1
    name: ClassVar[str] = "finish_nearly_done"  # also its options' prefix

    @dataclass(frozen=True)
    class Options:  # the policy takes finish_nearly_done.share
        share: float = option(0.1, "keep running a job with less than this share of its "
                              "epochs left")

        def __post_init__(self) -> None:
            if not 0.0 <= self.share <= 1.0:
                raise AndreasError(f"finish_nearly_done.share must be in [0, 1], got "
                                   f"{self.share}")

    @classmethod
    def configure(cls, options: Options) -> "FinishNearlyDone":
        return cls(options.share)  # always on when named in `steps`

    def apply(self, snapshot, decision: Decision, ctx: StepContext) -> Decision:
        free = {n.name: n.gpus for n in snapshot.cluster.nodes}
        for a in decision.values():
            free[a.node] -= a.gpus  # GPUs the decision leaves free on each node
        keep = dict(decision)
        for view in snapshot.jobs:
            a = view.assignment  # where it runs now (None: waiting)
            nearly_done = view.remaining_epochs < self.share * view.job.epochs
            if a is not None and view.job_id not in keep and nearly_done \
                    and free[a.node] >= a.gpus:
                keep[view.job_id] = a
                free[a.node] -= a.gpus
        return decision.replaced(keep)
