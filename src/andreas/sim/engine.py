"""The discrete-event simulator: one driver of the scheduling core, on a simulated clock.

Events (arrivals, completions, round ticks, price changes, revisits; `events.py`) sit on one
heap. At each event time the simulator builds a `Snapshot`, asks the policy for a plan, and
applies it: jobs keep running, are paused, resized or moved (each restart pays
`restart_overhead_s` with GPUs held and powered), or start. A job's progress is a function of
time within its stretch, and a node's energy is counted only when what runs on it changes, so
an event costs work for what it touches; every stretch is logged as a `Segment`, from which
`andreas.cost.account_segments` recomputes all costs independently.
"""

from __future__ import annotations

import math
import time as wallclock
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Mapping, Sequence

from ..cost import (
    carbon_cost,
    job_draw_w,
    job_saved_w,
    node_draw_w,
    own_power_saved_w,
    tardiness_cost,
)
from ..errors import AndreasError
from ..model import Cluster, GpuType, Job, Node, Scenario, Segment, config_key
from ..policies import pinning
from ..policies.base import (
    Assignment,
    JobView,
    Plan,
    Policy,
    Snapshot,
    check_plan,
    lookup,
    preempts,
    revisit_at,
    stops_job,
)
from ..policies.carbon_cap import Intent, admit
from ..policies.decision import Decision, Reason
from .collector import paced_for_simulation
from .events import EPS, Arrival, Completion, EventQueue, Timer
from .segment_log import SegmentLog


class SimulationError(AndreasError):
    pass


@dataclass(slots=True)
class _Stretch:
    """A job's current hold on GPUs of one node in one configuration (a gang: `gpus` on each
    of `node` and `more`). Its progress is a function of time, read when needed
    (`epochs_at`), not updated at every event."""

    node: int
    gpus: int
    seconds_per_epoch: float
    start: float
    restart_end: float  # progress starts here (start + overhead on a restart)
    todo: float  # epochs left when the stretch began
    assignment: Assignment  # as the plan gave it
    limit_w: float | None = None  # GPU power limit; None = default
    saved_w: float = 0.0  # watts below the node table's draw for this job's GPUs
    restart_saved_w: float = 0.0  # and, until restart_end, this much more (GpuType.restart_w)
    more: tuple[int, ...] = ()  # a gang's other nodes

    def epochs_at(self, t: float) -> float:
        """Epochs done in this stretch by time `t`."""
        return min(self.todo, max(0.0, t - self.restart_end) / self.seconds_per_epoch)

    def end(self) -> float:
        """When the job finishes if it keeps this stretch."""
        return self.restart_end + self.todo * self.seconds_per_epoch


@dataclass(eq=False, slots=True)
class _JobState:
    job: Job
    remaining: float  # epochs left at the start of the current stretch (or now, if waiting)
    index: int  # arrival order: jobs ending together are closed in it
    stretch: _Stretch | None = None
    started: bool = False
    restarts: int = 0
    first_start: float | None = None
    completion: float | None = None
    energy_joules: float = 0.0
    energy_eur: float = 0.0  # with a tariff, priced interval by interval
    emissions_g: float = 0.0  # with the grid's carbon intensity, interval by interval
    stamp: int = 0  # bumped at each new stretch: older completion events no longer hold


@dataclass(eq=False, slots=True)
class _NodeState:
    """One node's draw: busy GPUs, watts saved by power limits, the jobs on it, and the time
    up to which its energy (and its jobs' shares) has been counted."""

    kind: GpuType
    since: float
    busy: int = 0
    saved: float = 0.0
    jobs: dict[str, _JobState] = field(default_factory=dict)


def _held(s: _JobState) -> _Stretch:
    """The stretch of a job known to hold GPUs (a running job)."""
    assert s.stretch is not None
    return s.stretch


@dataclass(frozen=True)
class JobRecord:
    job_id: str
    submit_time: float
    due_date: float
    first_start: float
    completion_time: float
    tardiness_s: float
    tardiness_cost: float
    energy_cost: float
    restarts: int
    emissions_kg: float | None = None  # with the grid's carbon intensity (Cluster.carbon)


@dataclass
class SimulationResult:
    policy: str
    seed: int | None
    scenario: Scenario
    segments: Sequence[Segment]  # a SegmentLog from the simulator
    jobs: list[JobRecord]
    rescheduling_points: int
    scheduler_seconds: float
    energy_joules: float
    period: float | None = None
    summary: dict = field(default_factory=dict)
    energy_eur: float | None = None  # set with a tariff: the price integrated over time
    emissions_g: float | None = None  # set with the grid's carbon intensity

    def __post_init__(self) -> None:
        cluster = self.scenario.cluster
        energy = (self.energy_joules * cluster.eur_per_joule() if self.energy_eur is None
                  else self.energy_eur)
        tardiness = sum(r.tardiness_cost for r in self.jobs)
        carbon = {} if self.emissions_g is None else {
            "carbon_cost": carbon_cost(cluster, self.emissions_g),
            "emissions_kg": self.emissions_g / 1000.0}
        self.summary = {
            "policy": self.policy,
            "seed": self.seed,
            "scenario": self.scenario.name,
            "total_cost": energy + carbon.get("carbon_cost", 0.0) + tardiness,
            "energy_cost": energy,
            "tardiness_cost": tardiness,
            **carbon,
            "energy_kwh": self.energy_joules / 3.6e6,
            "jobs": len(self.jobs),
            "tardy_jobs": sum(1 for r in self.jobs if r.tardiness_s > 0),
            "total_tardiness_s": sum(r.tardiness_s for r in self.jobs),
            "makespan_s": max((r.completion_time for r in self.jobs), default=0.0),
            "rescheduling_points": self.rescheduling_points,
            "restarts": sum(r.restarts for r in self.jobs),
            "scheduler_seconds": self.scheduler_seconds,
            "period_s": self.period,
        }


class Simulator:
    """Runs one policy over one scenario. Use `simulate()` for the one-call form."""

    def __init__(self, scenario: Scenario, policy: Policy, *, period: float | None = None,
                 seed: int | None = None,
                 on_progress: Callable[[float, int, int], None] | None = None,
                 start: float = 0.0, preset: Mapping[str, JobView] | None = None,
                 record_decisions: bool = False, period_only: bool = False,
                 first_start_overhead: bool = False, every_round: bool = False,
                 first_revisit: float | None = None,
                 after_decision: Callable[[], None] | None = None) -> None:
        """`start` and `preset` let a live driver forecast from now: jobs submitted by `start`
        begin in the state their `JobView` gives (running where it has an assignment, with its
        remaining restart overhead), and the policy is first asked at the next event, or at
        `first_revisit` if the preset plan asked to be revisited then (`Decision.revisit_at`).
        `record_decisions` keeps every decision in `decisions` (the forecast's foreseen plans;
        off by default: on a long trace it holds every active job at every event).
        `period_only` asks the policy only at the period's ticks (round-based, as Gavel does),
        not at every arrival and completion: a bounded number of decisions on long traces. A
        round is a decision point only if something happened since the last decision (a job
        arrived or ended, the price changed, a held job's revisit time came): the decision
        points of an event-by-event run, each put off to the next round. `every_round` asks at
        quiet rounds too (the policy then sees the same jobs where it left them, later).
        `first_start_overhead` makes a job's first start pay the restart overhead too (not
        counted as a restart): real processes start up (interpreter, data, CUDA) before their
        first epoch, which the paper's model leaves out. `after_decision` is called after each
        decision has been applied (`simulate` collects garbage there: collector.py)."""
        if period is not None and period <= 0:
            raise AndreasError(f"period must be > 0 seconds, got {period}")
        if period_only and period is None:
            raise AndreasError("period_only needs a period")
        self.period_only = period_only
        self.every_round = every_round
        self.first_start_overhead = first_start_overhead
        self.scenario = scenario
        self.cluster = scenario.cluster  # what the energy costs and emits (the accounting)
        self.seen = scenario.cluster.as_planned  # what policies see: carbon priced in
        # a carbon cap is enforced here, on every decision (policies.carbon_cap); policies
        # and their forecasts plan without it
        self.cap = self.cluster.carbon_cap if self.cluster.carbon is not None else None
        if self.cap is not None:
            self.seen = replace(self.seen, carbon_cap=None)
            self.window_end = self.cap.window_of(start)[1]
        self.window_base_g = 0.0  # emissions when the current cap window began
        self.window_emitted_g: list[float] = []  # each closed window's emissions
        self.cap_forced = 0  # windows that began with no job admissible (one ran anyway)
        self.policy = policy
        self.period = period
        self.seed = seed
        self.on_progress = on_progress
        self.node_names = [n.name for n in self.cluster.nodes]
        self.node_index = self.cluster.node_positions
        self.node_types = [n.gpu_type for n in self.cluster.nodes]
        self.job_ids: list[str] = []  # by _JobState.index
        self.segments = SegmentLog(self.job_ids,
                                   [(n.name, n.gpu_type) for n in self.cluster.nodes])
        self.states: dict[str, _JobState] = {}
        self.energy_joules = 0.0
        self.energy_eur = 0.0
        self.emissions_g = 0.0
        self.tariff = self.seen.tariff  # the policy is asked again when its price changes
        self.priced = self.cluster.energy_eur if self.cluster.tariff is not None else None
        self.emits = self.cluster.carbon_g if self.cluster.carbon is not None else None
        self.scheduler_seconds = 0.0
        self.points = 0
        self.start = start
        self.preset = dict(preset or {})
        self.record_decisions = record_decisions
        self.decisions: list[tuple[float, frozenset[str], Mapping]] = []  # (time, jobs, plan)
        # when the last plan asked to be revisited (Decision.revisit_at), even if nothing happens
        self.revisit = math.inf if first_revisit is None else first_revisit
        # a policy that keeps running jobs as they run is asked about the waiting ones alone;
        # with gangs, through the whole snapshot (the gang planner needs every node and what
        # runs there: policies/gangs.py)
        self.waiting_only = not preempts(policy) and not scenario.profiles.gangs
        self.after_decision = after_decision

    # ------------------------------------------------------------------ main loop
    def run(self) -> SimulationResult:
        now = self.start
        kinds = self.cluster.gpu_types
        self.nodes = [_NodeState(kinds[n.gpu_type], now) for n in self.cluster.nodes]
        self.queue = queue = EventQueue()
        self.active: dict[str, _JobState] = {}
        self.running = 0
        self.done = 0
        self.held_changes = 0  # GPUs taken or released: the free cluster is rebuilt
        self._free: tuple[int, Cluster] | None = None
        self._partial: dict[tuple[str, int], Node] = {}
        jobs = self.scenario.jobs  # sorted by submission time
        first = 0
        if self.preset:
            while first < len(jobs) and jobs[first].submit_time <= now:
                first += 1
        self.arrivals_left = len(jobs) - first
        for job in jobs[first:]:
            queue.push(Arrival(job.submit_time, job))
        tick, price, revisit = Timer("tick"), Timer("price"), Timer("revisit")
        if self.preset:
            self._apply_preset(jobs[:first], now)
        decided = changed = True
        while self.arrivals_left or self.active:
            self._arm(tick, price, revisit, now)
            active = self.active
            if (not self.running and active and not self.arrivals_left and decided
                    and self.revisit == math.inf
                    and (self.tariff is None
                         or all(s.job.due_date <= now for s in active.values()))):
                raise SimulationError(
                    f"policy {self.policy.name!r} left {len(active)} job(s) waiting on an idle "
                    f"cluster at t={now:.1f}s with nothing left to wait for")
            now = queue.next_time(self)
            if self.cap is not None and now >= self.window_end:
                self._roll_windows(now)  # before this batch changes what any node draws
            batch = queue.pop_batch(self, now)
            finishing = sorted((e for e in batch if isinstance(e, Completion)),
                               key=lambda e: e.state.index)
            for event in finishing:
                event.fire(self, now)
            for event in batch:
                if not isinstance(event, Completion):
                    event.fire(self, now)
            if revisit.fired:
                self.revisit = math.inf  # asked now; the new plan may ask again
            changed = changed or price.fired or any(
                isinstance(e, (Arrival, Completion)) for e in batch)
            decided = bool(self.active) and (not self.period_only or tick.fired and (
                changed or self.every_round or self.revisit <= now + EPS))
            tick.fired = price.fired = revisit.fired = False
            if decided:
                changed = False
                self._decide(now, self.active)
                if self.after_decision is not None:
                    self.after_decision()
            if self.on_progress:
                self.on_progress(now, self.done, len(jobs))
        for n in range(len(self.nodes)):
            self._settle(n, now)
        if self.cap is not None:
            self._roll_windows(now)
            self.window_emitted_g.append(self.emissions_g - self.window_base_g)
        return self._result()

    def _arm(self, tick: Timer, price: Timer, revisit: Timer, now: float) -> None:
        """Point the timers at their next times: the next round while jobs are active; with a
        tariff, the next price change while a job waits; the plan's revisit time (not in
        rounds, where the rounds are the only decision points)."""
        active = bool(self.active)
        if self.period:
            at = (math.floor(now / self.period + EPS) + 1) * self.period
            tick.arm(self.queue, at if active else math.inf)
        if self.tariff is not None:
            waiting = self.running < len(self.active)
            price.arm(self.queue, self.tariff.next_change(now) if waiting else math.inf)
        revisit.arm(self.queue, self.revisit if active and not self.period_only else math.inf)

    def activate(self, job: Job) -> None:
        """A job arrives (Arrival events, and the preset's jobs)."""
        s = _JobState(job, job.epochs, len(self.states))
        self.job_ids.append(job.job_id)
        self.active[job.job_id] = self.states[job.job_id] = s

    def finish(self, s: _JobState, now: float) -> None:
        """A job ends its last epoch (Completion events)."""
        st = s.stretch
        assert st is not None
        self._close(s, now, epochs=st.todo)
        s.completion = now
        del self.active[s.job.job_id]
        self.done += 1

    def _apply_preset(self, jobs: tuple[Job, ...], now: float) -> None:
        for job in jobs:
            self.activate(job)
            s = self.states[job.job_id]
            view = self.preset.get(job.job_id)
            if view is None:
                continue
            s.started = view.started
            if view.assignment is not None:
                s.started, s.first_start = True, now
                self._hold(s, view.assignment, now, now + view.restart_remaining_s)
        if self.active and not self.running and self.revisit == math.inf:
            self._decide(now, self.active)

    def _settle(self, n: int, t: float) -> None:
        """Count node n's energy, and its jobs' shares, up to `t`: the draw is constant since
        the node last changed, except where a restart on it ends (restarts draw less)."""
        node = self.nodes[n]
        t0 = node.since
        if t <= t0:
            return
        node.since = t
        restarting = [st for s in node.jobs.values() if (st := s.stretch) is not None
                      and st.restart_saved_w and t0 < st.restart_end]
        if not restarting:  # one piece (the common case: no restart drawing less)
            self._energy(node, restarting, t0, t)
            return
        ends = sorted({st.restart_end for st in restarting if st.restart_end < t})
        for a, b in zip([t0, *ends], [*ends, t]):
            self._energy(node, restarting, a, b)

    def _energy(self, node: _NodeState, restarting: list[_Stretch], t0: float,
                t1: float) -> None:
        """Node energy over [t0, t1], during which its draw is constant; `restarting` are the
        stretches on it whose restarts draw less (GpuType.restart_w)."""
        dt = t1 - t0
        priced, emits = self.priced, self.emits
        b = node.busy
        saved = node.saved + sum(st.restart_saved_w for st in restarting
                                 if t0 < st.restart_end) if b else 0.0
        watts = node_draw_w(node.kind, b, saved)
        if watts:
            self.energy_joules += watts * dt
            if priced:
                self.energy_eur += priced(watts, t0, t1)
            if emits:
                self.emissions_g += emits(watts, t0, t1)
        if not node.jobs:
            return
        for s in node.jobs.values():  # each job's share, less what it saves (more while it
            # restarts, until restart_end)
            st = _held(s)
            share = job_draw_w(node.kind, b, st.gpus, st.saved_w + (
                st.restart_saved_w if t0 < st.restart_end else 0.0))
            s.energy_joules += share * dt
            if priced:
                s.energy_eur += priced(share, t0, t1)
            if emits:
                s.emissions_g += emits(share, t0, t1)

    # ------------------------------------------------------------------ decisions
    def _decide(self, now: float, active: dict[str, _JobState]) -> None:
        if self.waiting_only:
            self._decide_waiting(now, active)
            return
        snapshot = Snapshot(now, self.seen, self.scenario.profiles,
                            self._views(active.values(), now), self.first_start_overhead)
        self.points += 1
        plan = self._ask(snapshot, lambda snap: pinning.decide(self.policy, snap))
        if self.cap is not None:
            plan = self._capped(snapshot, plan, now, {})
        if self.record_decisions:
            self.decisions.append((now, frozenset(active), Decision.of(plan)))
        starts: list[tuple[_JobState, Assignment]] = []
        target_of = lookup(plan)
        for job_id, s in active.items():
            target = target_of(job_id)
            st = s.stretch
            if st is not None:
                if target is st.assignment:  # kept as it runs (plans reuse one per place)
                    continue
                if not stops_job(st.assignment, target):
                    assert target is not None
                    if target.power_limit_w != st.limit_w:  # a new cap, no restart
                        restart_end = st.restart_end
                        self._close(s, now)
                        self._hold(s, target, now, max(now, restart_end))
                    continue
                self._close(s, now)
            if target is not None:
                starts.append((s, target))
        for s, target in starts:
            self._start(s, target, now)

    def _ask(self, snapshot: Snapshot, decide: Callable[[Snapshot], Plan]) -> Plan:
        """`decide(snapshot)`, timed; the revisit time it asks for noted; the plan checked."""
        tic = wallclock.perf_counter()
        plan = decide(snapshot)
        self.scheduler_seconds += wallclock.perf_counter() - tic
        wake = revisit_at(plan)
        self.revisit = wake if wake is not None and wake > snapshot.time else math.inf
        check_plan(snapshot, plan, self.policy.name)
        return plan

    def _capped(self, snapshot: Snapshot, plan: Plan, now: float,
                kept_running: Mapping[str, _JobState]) -> Plan:
        """`plan` within the carbon cap (policies.carbon_cap.admit): the jobs it cannot
        afford this window wait, with a reason; the policy is asked again when the budget is
        spent or the window ends. `kept_running`: jobs a policy that never preempts keeps as
        they run (not in its plan; always admitted)."""
        assert self.cap is not None
        for n in range(len(self.nodes)):
            self._settle(n, now)
        left = self.cap.kg * 1000.0 - (self.emissions_g - self.window_base_g)
        views = {v.job_id: v for v in snapshot.jobs}
        keyed = []
        for job_id, s in kept_running.items():
            st = _held(s)
            keyed.append((0, s.job.due_date, job_id,
                          Intent(job_id, st.node, st.gpus, st.end(), must=True,
                                 above_w=max(0.0, -st.saved_w), more=st.more)))
        for job_id, target in plan.items():
            view = views[job_id]
            n = self.node_index[target.node]
            kept = view.assignment is not None and not stops_job(view.assignment, target)
            gpu_type = self.node_types[n]
            own = own_power_saved_w(self.cluster.gpu_types[gpu_type], target.gpus,
                                    snapshot.profiles.gpu_power_w(
                                        view.job.profile, config_key(gpu_type, target.gpus,
                                                                     target.node_count)))
            keyed.append((0 if kept else 1, view.job.due_date, job_id, Intent(
                job_id, n, target.gpus, now + snapshot.run_s(view, gpu_type, target),
                must=kept and not view.job.preemptible, splittable=not self.waiting_only,
                above_w=max(0.0, -own),
                more=tuple(self.node_index[m] for m in target.more_nodes))))
        keyed.sort(key=lambda k: k[:3])
        admission = admit(self.cluster, now, left, [k[3] for k in keyed])
        self.cap_forced += admission.forced
        if admission.revisit_at is not None:
            self.revisit = min(self.revisit, admission.revisit_at)
        refused = [j for j in plan if j not in admission.admitted]
        if not refused:
            return plan
        detail = f"{max(left, 0.0) / 1000:.3g} of {self.cap.kg:g} kg left"
        return Decision.of(plan).replaced(
            {j: a for j, a in plan.items() if j in admission.admitted},
            revisit_at=admission.revisit_at,
            reasons={j: Reason("carbon_cap", until=self.window_end, detail=detail)
                     for j in refused})

    def _roll_windows(self, now: float) -> None:
        """Close every cap window that ended by `now`: each node's draw counted up to the
        window's end, the window's emissions kept for the summary."""
        assert self.cap is not None
        while now >= self.window_end:
            for n in range(len(self.nodes)):
                self._settle(n, self.window_end)
            self.window_emitted_g.append(self.emissions_g - self.window_base_g)
            self.window_base_g = self.emissions_g
            self.window_end += self.cap.window_s

    def _decide_waiting(self, now: float, active: dict[str, _JobState]) -> None:
        """A decision of a policy that keeps running jobs as they run (`preempts` False): it
        sees the waiting jobs alone, on a cluster of the GPUs left free (the snapshot
        `pinning.decide` would give it), so the work follows the queue, not every running
        job. Nothing waiting: nothing to decide."""
        self.points += 1
        self.revisit = math.inf
        waiting = [s for s in active.values() if s.stretch is None]
        if not waiting:
            if self.record_decisions:
                self.decisions.append((now, frozenset(active), Decision.of(
                    {k: _held(s).assignment for k, s in active.items()})))
            return
        snapshot = Snapshot(now, self._free_cluster(), self.scenario.profiles,
                            self._views(waiting, now), self.first_start_overhead)
        plan = self._ask(snapshot, lambda snap: self.policy.decide(snap)
                         if snap.cluster.nodes else {})
        if self.cap is not None:
            plan = self._capped(snapshot, plan, now, {k: s for k, s in active.items()
                                                      if s.stretch is not None})
        if self.record_decisions:
            kept = {k: _held(s).assignment for k, s in active.items() if s.stretch is not None}
            self.decisions.append((now, frozenset(active),
                                   Decision.of(plan).replaced({**plan, **kept})))
        for s in waiting:
            target = plan.get(s.job.job_id)
            if target is not None:
                self._start(s, target, now)

    def _free_cluster(self) -> Cluster:
        """The cluster as the GPUs no job holds: each node with its free GPUs, full nodes left
        out (as `pinning.without_pinned` does). Rebuilt only when some job took or released
        GPUs since the last call."""
        if self._free is None or self._free[0] != self.held_changes:
            nodes = []
            for node, state in zip(self.cluster.nodes, self.nodes):
                free = node.gpus - state.busy
                if free == node.gpus:
                    nodes.append(node)
                elif free > 0:
                    key = (node.name, free)
                    part = self._partial.get(key)
                    if part is None:
                        part = self._partial[key] = replace(node, gpus=free)
                    nodes.append(part)
            self._free = (self.held_changes, replace(self.seen, nodes=tuple(nodes)))
        return self._free[1]

    @staticmethod
    def _views(states: Iterable[_JobState], now: float) -> tuple[JobView, ...]:
        """The jobs as the policy sees them at `now` (one loop: a replay makes a view of
        every active job at every decision)."""
        views: list[JobView] = []
        add = views.append
        for s in states:
            st = s.stretch
            if st is None:
                add(JobView(s.job, s.remaining, None, s.started))
            else:
                left = st.restart_end - now  # restart still to pay
                add(JobView(s.job, s.remaining - st.epochs_at(now), st.assignment, True,
                            left if left > 0.0 else 0.0))
        return tuple(views)

    def _start(self, s: _JobState, target: Assignment, now: float) -> None:
        restart_end = now
        if s.started or self.first_start_overhead:
            # its profile's measured start-up on the target, else the cluster's overhead
            restart_end = now + self.scenario.profiles.restart_s(
                s.job.profile, config_key(self.node_types[self.node_index[target.node]],
                                          target.gpus, target.node_count),
                self.cluster.restart_overhead_s)
        if s.started:
            s.restarts += 1
        s.started = True
        if s.first_start is None:
            s.first_start = now
        self._hold(s, target, now, restart_end)

    def _hold(self, s: _JobState, target: Assignment, now: float, restart_end: float) -> None:
        """Give `s` the GPUs of `target` from `now`, progressing from `restart_end`, and put its
        completion on the heap."""
        n = self.node_index[target.node]
        more = tuple(self.node_index[m] for m in target.more_nodes) if target.more_nodes \
            else ()
        for i in (n, *more):
            if now > self.nodes[i].since:
                self._settle(i, now)
        gpu_type = self.node_types[n]
        profiles = self.scenario.profiles
        count = 1 + len(more)
        spe = profiles.seconds_per_epoch(s.job.profile, gpu_type, target.gpus,
                                         target.power_limit_w, count,
                                         count > 1 and self.cluster.spans_groups(target.nodes))
        kind = self.cluster.gpu_types[gpu_type]
        # below the table's share while it trains: its power limit and its own draw (on each
        # of a gang's nodes)
        saved = job_saved_w(self.cluster, profiles, s.job.profile, gpu_type, target.gpus,
                            target.power_limit_w, count)
        # while it restarts, its GPUs draw the type's restart draw (or the table's), not the
        # profile's training draw: the restart's saving is counted from the table's share
        restart_saved = (kind.restart_saving_w(target.gpus)
                         - own_power_saved_w(kind, target.gpus, profiles.gpu_power_w(
                             s.job.profile, config_key(gpu_type, target.gpus, count)))
                         if restart_end > now else 0.0)
        st = s.stretch = _Stretch(n, target.gpus, spe, now, restart_end, s.remaining, target,
                                  target.power_limit_w, saved, restart_saved, more)
        for i in (n, *more):
            node = self.nodes[i]
            node.busy += target.gpus
            node.saved += saved
            node.jobs[s.job.job_id] = s
        self.running += 1
        self.held_changes += 1
        s.stamp += 1
        self.queue.push(Completion(st.end(), s, s.stamp))

    def _close(self, s: _JobState, now: float, epochs: float | None = None) -> None:
        """End the current stretch at `now` (after `epochs` epochs; default: as far as it
        got) and log its restart and run segments."""
        st = s.stretch
        assert st is not None
        if epochs is None:  # stopped before its end: its completion event no longer holds
            self.queue.supersede(self)
        done = st.epochs_at(now) if epochs is None else epochs
        s.remaining -= done
        restart_stop = min(st.restart_end, now)
        for i in ((st.node, *st.more) if st.more else (st.node,)):
            state = self.nodes[i]
            if now > state.since:
                self._settle(i, now)
            # a gang logs a segment per node; its epochs once, on its first node
            if restart_stop > st.start:
                self.segments.append(s.index, i, st.gpus, st.start, restart_stop, 0.0,
                                     "restart", st.limit_w, st.saved_w + st.restart_saved_w)
            if now > st.restart_end:
                self.segments.append(s.index, i, st.gpus, st.restart_end, now,
                                     done if i == st.node else 0.0, "run", st.limit_w,
                                     st.saved_w)
            state.busy -= st.gpus
            state.saved = state.saved - st.saved_w if state.busy else 0.0
            del state.jobs[s.job.job_id]
        self.running -= 1
        self.held_changes += 1
        s.stretch = None

    # ------------------------------------------------------------------ results
    def _result(self) -> SimulationResult:
        eur_per_j = self.cluster.eur_per_joule()
        records = []
        for s in self.states.values():
            job = s.job
            assert s.completion is not None and s.first_start is not None
            tardy = max(0.0, s.completion - job.due_date)
            records.append(JobRecord(job.job_id, job.submit_time, job.due_date, s.first_start,
                                     s.completion, tardy,
                                     tardiness_cost(job.tardiness_weight, s.completion,
                                                    job.due_date),
                                     s.energy_joules * eur_per_j if self.priced is None
                                     else s.energy_eur, s.restarts,
                                     None if self.emits is None else s.emissions_g / 1000.0))
        result = SimulationResult(self.policy.name, self.seed, self.scenario, self.segments,
                                  records, self.points, self.scheduler_seconds,
                                  self.energy_joules, self.period,
                                  energy_eur=None if self.priced is None else self.energy_eur,
                                  emissions_g=None if self.emits is None else self.emissions_g)
        if self.cap is not None:
            cap_g = self.cap.kg * 1000.0
            result.summary.update({
                "carbon_cap_kg": self.cap.kg,
                "carbon_cap_worst_kg": max(self.window_emitted_g, default=0.0) / 1000.0,
                "carbon_cap_over_kg": sum(max(0.0, w - cap_g)
                                          for w in self.window_emitted_g) / 1000.0,
                "carbon_cap_forced": self.cap_forced})
        stats = getattr(self.policy, "stats", None)  # e.g. milp: time-outs and worst gap
        if isinstance(stats, dict):
            result.summary["policy_stats"] = dict(stats)
        return result


def simulate(scenario: Scenario, policy: Policy, *, period: float | None = None,
             seed: int | None = None,
             on_progress: Callable[[float, int, int], None] | None = None,
             period_only: bool = False, first_start_overhead: bool = False,
             every_round: bool = False) -> SimulationResult:
    """Simulate `policy` on `scenario` and return segments, per-job records and the summary
    (with the garbage collector paced for a run: collector.py)."""
    with paced_for_simulation() as between_decisions:
        return Simulator(scenario, policy, period=period, seed=seed, on_progress=on_progress,
                         period_only=period_only, first_start_overhead=first_start_overhead,
                         every_round=every_round, after_decision=between_decisions).run()
