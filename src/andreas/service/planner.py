"""The service's planning: a snapshot in, a decision and its forecast out; no database.

One decision of the live service is more than the policy's: the plan the last forecast made
for this moment may be kept (`source: forecast`), or, when completions came in another order
than it foresaw, its starts that fit now (`source: repaired`, unless a fresh decision pays
more than `switch_gain` better), quotas and drained nodes take starts out
(and the policy decides again without the jobs refused: quotas.WithinLimits, in the forecast's
later decisions too), a change of learned speed switches plans, or the later starts foreseen,
only when the forecast says it pays (`source: kept` otherwise), and every job left waiting
says why. `Planner` makes that
decision from a `Snapshot` and what the last decision foresaw; the scheduler (scheduler.py)
builds the snapshot from the database, carries the decision out and records it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ..policies.base import Assignment, Snapshot, check_plan, revisit_at
from ..policies.decision import Reason
from ..sim.forecast import (
    ForeseenDecision,
    JobForecast,
    foreseen_for,
    foreseen_starts,
    still_fits,
)
from .decider import Decider, ForecastCut
from .learning import NOISE_SIGMAS
from .quotas import Quotas, ServiceLimits

log = logging.getLogger("andreas.service")

# replanning reasons a forecast foresees: after only these, the plan it made may be kept
FORESEEABLE = frozenset({"completion", "run-ended", "retry", "revisit"})
SWITCH_GAIN = 0.05  # default share a fresh decision must save to replace the incumbent plan


@dataclass
class Proposal:
    """One decision of the service, before it is carried out."""

    plan: dict[str, Assignment]
    # "policy" (decided afresh), "forecast" (foreseen), "repaired" (the foreseen starts, events
    # having come in another order: foreseen_starts) or "kept" (not switched)
    source: str
    revisit_at: float | None  # jobs held back on purpose must be looked at again then
    why: dict[str, Reason]  # per job the plan leaves out, when the policy or a limit says why
    decision_s: float  # seconds the decision took
    limits: ServiceLimits  # what bounded its starts (its forecast keeps to them too)
    predicted: dict[str, JobForecast] | None = None  # its forecast, where deciding made one
    # the forecast totals (EUR) of the plans weighed against each other, by source, where
    # a switch was weighed (_worth_switching): why the service switched plans, or did not
    weighed: dict[str, float] | None = None
    # the share the fresh decision had to save to be taken, where a switch was weighed
    # (Planner.gain_needed)
    gain_needed: float | None = None
    # nothing unforeseen led to it: its forecast keeps to the decisions the last one foresaw
    follows_foresight: bool = False


@dataclass(frozen=True)
class Incumbent:
    """The plan a fresh decision must beat to be taken (Planner.incumbent): where it comes
    from ("kept", "forecast" or "repaired", its source if it stays), the plan, when to look
    again at the jobs it holds back, and why each job it leaves out waits (None: the fresh
    decision's reasons stand)."""

    name: str
    plan: dict[str, Assignment]
    revisit_at: float | None
    why: dict[str, Reason] | None


def waiting_reasons(snapshot: Snapshot, plan: Mapping, why: Mapping[str, Reason],
                    previous: Mapping[str, dict]) -> dict[str, dict]:
    """Why each job the plan leaves out waits: the decision's reason, else what an earlier
    decision said (a plan kept unchanged), else no capacity. Nothing waits silently."""
    out = {}
    for view in snapshot.jobs:
        if view.job_id in plan:
            continue
        if view.job_id not in why and view.job_id in previous:
            out[view.job_id] = previous[view.job_id]
            continue
        r = why.get(view.job_id) or displaced_by(view, plan, snapshot) or Reason("no_capacity")
        out[view.job_id] = waiting_entry(r)
    return out


def waiting_entry(r: Reason) -> dict:
    """A job's entry in the plan's `waiting`: the reason's kind, sentence, time, node, job."""
    return {"reason": r.kind, "text": r.sentence(), "until": r.until, "node": r.node,
            "job": r.job}


def displaced_by(view, plan: Mapping, snapshot: Snapshot) -> Reason | None:
    """For a running job the plan pauses: the job that takes its node's GPUs (placed there
    now, not running there before), as "paused for job X"; None if there is none."""
    if view.assignment is None:
        return None
    nodes = set(view.assignment.nodes)  # (a gang's every node; any node of a gang taking)
    before = {v.job_id for v in snapshot.jobs
              if v.assignment is not None and nodes & set(v.assignment.nodes)}
    taking = [job_id for job_id, a in plan.items()
              if nodes & set(a.nodes) and job_id not in before]
    return Reason("paused_for", job=taking[0]) if taking else None


def minimal_failing(items: list, fails) -> list:
    """A 1-minimal part of `items` on which `fails` still holds (Zeller's ddmin): removing any
    one element of the result makes it pass. `fails(items)` must hold, `fails([])` not. A
    single culprit is found in about 2 log2 n calls; a pair that fails only together, in
    O(n log n) at worst."""
    n = 2
    while len(items) >= 2:
        size = -(-len(items) // n)
        chunks = [items[i:i + size] for i in range(0, len(items), size)]
        for chunk in chunks:
            if fails(chunk):
                items, n = chunk, 2
                break
        else:
            for chunk in chunks if n > 2 else ():
                rest = [x for x in items if not any(x is c for c in chunk)]
                if fails(rest):
                    items, n = rest, max(n - 1, 2)
                    break
            else:
                if n >= len(items):
                    return items
                n = min(len(items), 2 * n)
    return items


class Planner:
    """Decisions and forecasts for the scheduler, from snapshots alone. It remembers the
    decisions the last forecast foresaw (`foreseen`), how many it kept (`kept`), and why the
    latest forecast was stopped, if it was (`forecast_cut`)."""

    def __init__(self, decider: Decider, policy_name: str, quotas: Quotas,
                 switch_gain: float = SWITCH_GAIN) -> None:
        self.decider = decider
        self.policy_name = policy_name
        self.quotas = quotas
        self.switch_gain = switch_gain
        self.foreseen: list[ForeseenDecision] = []
        self.kept = 0
        self.forecast_cut: str | None = None

    def decide(self, snapshot: Snapshot, running: Mapping[str, Assignment],
               reasons: list[str], owners: Mapping[str, str],
               drained: set[str], speed_error: Mapping[str, float] | None = None) -> Proposal:
        """The plan for `snapshot`, whose `running` jobs run where they say, replanned for
        `reasons`; `owners` (job id -> user) and `drained` nodes bound what may start;
        `speed_error` (job id -> its learned speed's standard error, a share) sets how much a
        switch of plans must save (`gain_needed`)."""
        tic = time.perf_counter()
        limits = self.limits(owners, drained)
        bound = limits if limits.bind else None
        plan = self.foreseen_plan(snapshot, reasons)
        source = "forecast" if plan is not None else "policy"
        if plan is None:
            plan = self.decider.decide(snapshot, bound)
        wake = revisit_at(plan)
        why = dict(getattr(plan, "reasons", {}))  # per waiting job (Decision.reasons)
        chosen = dict(plan)
        if source == "forecast":  # made within the limits of its time: these may have changed
            chosen, refused = limits.apply(snapshot, plan)
            why.update(refused)
        check_plan(snapshot, chosen, self.policy_name)
        predicted = weighed = needed = None
        incumbent = (self.incumbent(snapshot, running, reasons, limits) if source == "policy"
                     else None)
        # the same plan now differs only by what its forecast foresees later, if anything
        if incumbent is not None and (incumbent.plan != chosen
                                      or (incumbent.name == "kept" and self.foreseen)):
            needed = self.gain_needed(snapshot, speed_error or {})
            chosen, source, predicted, weighed = self._worth_switching(
                snapshot, incumbent.plan, chosen, wake, bound, incumbent.name, needed)
            if weighed is None:  # the incumbent no longer fits: no switch was weighed
                needed = None
            if source == incumbent.name:
                wake = incumbent.revisit_at
                why = incumbent.why if incumbent.why is not None else why
        follows = source != "policy" or (set(reasons) <= FORESEEABLE and weighed is None)
        return Proposal(chosen, source, wake, why, time.perf_counter() - tic, limits,
                        predicted, weighed, needed, follows)

    def incumbent(self, snapshot: Snapshot, running: Mapping[str, Assignment],
                  reasons: list[str], limits: ServiceLimits) -> "Incumbent | None":
        """What a fresh decision must beat by more than `switch_gain` (`_worth_switching`)
        after events that leave the last forecast standing but for timing: a learned speed
        that moved, completions in another order than foreseen, or both at once.

        After a changed speed alone, the running plan ("kept") is weighed even when the
        fresh decision runs the same jobs: the later decisions it foresees may differ, and
        switching to them moves waiting jobs to nodes their users were not told. After
        foreseeable events (with or without a changed speed), the plan the last forecast
        foresaw for this moment ("forecast") where one matches, else its starts that fit now
        ("repaired"). None: nothing to weigh (an unforeseen event, or nothing foreseen)."""
        events = set(reasons)
        if events <= {"prediction-moved"}:
            return Incumbent("kept", dict(running), None, None)
        if not events <= FORESEEABLE | {"prediction-moved"} or not self.foreseen:
            return None
        # (after foreseeable events alone, foreseen_plan has looked for it already)
        plan = (foreseen_for(snapshot, self.foreseen, self.policy_name)
                if "prediction-moved" in events else None)
        if plan is not None:
            kept, refused = limits.apply(snapshot, plan)
            if kept == dict(plan):
                return Incumbent("forecast", kept, revisit_at(plan),
                                 {**dict(getattr(plan, "reasons", {})), **refused})
        repair = self.repaired_plan(snapshot, limits)
        return None if repair is None else Incumbent("repaired", repair[0], None, repair[1])

    def gain_needed(self, snapshot: Snapshot, speed_error: Mapping[str, float]) -> float:
        """The share of the incumbent's forecast total a fresh decision must save to replace
        it: `switch_gain`, or NOISE_SIGMAS times the largest standard error of the learned
        speeds of the jobs in view, whichever is larger.

        Why the largest: the forecast totals of both plans rest on every job's speed, and one
        job a few percent slower than believed can reorder the starts after it, so the gain
        can swing by more than that job's own cost (on the VM, a fresh decision forecast 6.8 %
        cheaper, taken on speeds from three or four report pairs, was forecast 6.3 % dearer
        0.17 s later: docs/validation.md). Speeds from few, scattered reports are what early
        switches rest on; with more reports the error falls as 1/sqrt(pairs) and
        `switch_gain` rules again. A job that reports erratically can hold the plan it was
        given at most until the next unforeseen event (an arrival, a failure), where the
        policy decides afresh and nothing is weighed."""
        errors = [speed_error[v.job_id] for v in snapshot.jobs if v.job_id in speed_error]
        return max([self.switch_gain, *(NOISE_SIGMAS * e for e in errors)])

    def limits(self, owners: Mapping[str, str], drained: set[str]) -> ServiceLimits:
        """The limits of a decision: these owners and drained nodes, the configured quotas."""
        return ServiceLimits(dict(owners), self.quotas, frozenset(drained))

    def forecast(self, snapshot: Snapshot, proposal: Proposal,
                 spread: Mapping[str, float] | None = None) -> dict[str, JobForecast]:
        """The rest of the queue under the proposal's plan (which holds jobs back until its
        revisit time, if set), later decisions within its limits; those decisions are kept in
        `foreseen`; unless something unforeseen led to the proposal, they keep to the
        decisions the last forecast foresaw (decider.KeepForeseen). With `spread` (job ->
        share of its speed), each job's forecast carries its range. A forecast stopped at its
        time budget gives none (the predictions shown stay the older ones)."""
        predicted, self.foreseen = self._forecast(
            snapshot, proposal.plan, proposal.revisit_at,
            proposal.limits if proposal.limits.bind else None, spread,
            self.foreseen if proposal.follows_foresight else ())
        return predicted

    def what_if(self, snapshot: Snapshot, job_id: str, limits: ServiceLimits,
                spread: Mapping[str, float] | None = None) -> JobForecast:
        """The forecast of `job_id`, one of the snapshot's jobs, under a decision made now."""
        return self.decider.what_if(snapshot, job_id, limits if limits.bind else None, spread)

    def foreseen_plan(self, snapshot: Snapshot, reasons: list[str]) -> Mapping | None:
        """Keep to the plan the last forecast made for this moment, when what happened is what
        it foresaw (the same jobs remain; no arrival, cancellation or changed prediction).

        The policy made that plan too, for the predicted state, so the schedule the service
        shows is the one it carries out, and a job does not move because of a timing jitter.
        Anything unforeseen, or a plan that no longer fits, means a fresh decision."""
        if not set(reasons) <= FORESEEABLE or not self.foreseen:
            return None
        plan = foreseen_for(snapshot, self.foreseen, self.policy_name)
        self.kept += plan is not None
        return plan

    def repaired_plan(self, snapshot: Snapshot, limits: ServiceLimits
                      ) -> tuple[dict[str, Assignment], dict[str, Reason]] | None:
        """After foreseeable events that no foreseen decision matches (completions in another
        order than forecast), the foreseen starts that fit now (`foreseen_starts`), within
        today's limits, and why each job it leaves out waits; None when nothing was foreseen
        or the repair does not fit."""
        if not self.foreseen:
            return None
        plan, why = foreseen_starts(snapshot, self.foreseen)
        plan, refused = limits.apply(snapshot, plan)
        why.update(refused)
        return (plan, why) if still_fits(snapshot, plan, self.policy_name) else None

    def culprit(self, snapshot: Snapshot, owners: Mapping[str, str],
                drained: set[str]) -> str | None:
        """The waiting job to blame when a decision on `snapshot` fails: the newest job of a
        smallest set of waiting jobs that still makes it fail (with every running job kept),
        found by delta debugging (`minimal_failing`), provided the other waiting jobs plan
        without it. Planning passed before that job came, so it is the odd one. None when
        the decision passes, fails without any waiting job, or fails for the others too (a
        plan step that fails whatever the jobs: the tick fails and is retried, as before).
        One odd job must not stop every user's planning: the scheduler fails that job, with
        the reason, and plans the rest."""
        running = tuple(v for v in snapshot.jobs if v.assignment is not None)
        suspects = [v for v in snapshot.jobs if v.assignment is None]
        limits = self.limits(owners, drained)

        def fails(views: list) -> bool:
            part = replace(snapshot, jobs=running + tuple(views))
            try:
                check_plan(part, self.decider.decide(part, limits if limits.bind else None),
                           self.policy_name)
            except Exception:
                return True
            return False

        if not suspects or not fails(suspects) or fails([]):
            return None
        blamed = minimal_failing(suspects, fails)
        rest = [v for v in suspects if not any(v is b for b in blamed)]
        if not rest or fails(rest):  # no evidence that planning works without them: a step
            return None              # that fails for any job is not that job's fault
        return max(blamed, key=lambda v: (v.job.submit_time, snapshot.jobs.index(v))).job_id

    def _forecast(self, snapshot: Snapshot, plan: Mapping, wake: float | None,
                  limits: ServiceLimits | None, spread: Mapping[str, float] | None = None,
                  previous: Sequence[ForeseenDecision] = ()
                  ) -> tuple[dict[str, JobForecast], list[ForeseenDecision]]:
        try:
            predicted, foreseen = self.decider.forecast(snapshot, plan, wake, limits, spread,
                                                        previous)
        except ForecastCut as cut:  # the plan stands; the predictions shown are older ones
            if self.forecast_cut is None:
                log.warning("%s; the predictions shown are older ones", cut)
            self.forecast_cut = str(cut)
            return {}, []
        except Exception as exc:  # the plan was made and carried out: it stands all the same
            log.exception("the forecast failed; the predictions shown are older ones")
            self.forecast_cut = f"the forecast failed ({type(exc).__name__}: {exc})"
            return {}, []
        self.forecast_cut = None
        return predicted, foreseen

    def _worth_switching(self, snapshot: Snapshot, keep: dict, fresh: dict,
                         wake: float | None, limits: ServiceLimits | None,
                         incumbent: str, gain: float
                         ) -> tuple[dict, str, dict[str, JobForecast] | None,
                                    dict[str, float] | None]:
        """Switch from `keep` (the incumbent `incumbent`: `Planner.incumbent`) to the fresh
        decision only if the forecast says it pays, by more than the `gain` share
        (`gain_needed`). Pausing and moving jobs on every change of estimate would cost more in
        restarts than better estimates save; a job started elsewhere than forecast costs what
        its user was not told. Returns the plan, where it came from, its forecast (None: not
        computed yet) and the forecast totals weighed (None: the incumbent no longer fits)."""
        if not still_fits(snapshot, keep, self.policy_name):
            return fresh, "policy", None, None
        options = {name: self._forecast(snapshot, plan, w, limits, None, previous)
                   for name, plan, w, previous in (("policy", fresh, wake, ()),
                                                   (incumbent, keep, None, self.foreseen))}
        total = {name: sum(f.total_cost for f in o[0].values()) for name, o in options.items()}
        chosen = "policy" if total["policy"] < (1.0 - gain) * total[incumbent] else incumbent
        predicted, self.foreseen = options[chosen]
        return (fresh if chosen == "policy" else keep), chosen, predicted, total
