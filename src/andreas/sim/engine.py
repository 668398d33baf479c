"""The discrete-event simulator: one driver of the scheduling core, on a simulated clock.

Events are arrivals, completions and optional periodic ticks. At each event time the simulator
builds a `Snapshot`, asks the policy for a plan, and applies it: jobs keep running, are paused,
resized or moved (each restart pays `restart_overhead_s` with GPUs held and powered), or start.
Energy is integrated node by node as busy-GPU counts change; every stretch is logged as a
`Segment`, from which `andreas.cost.account_segments` recomputes all costs independently.
"""

from __future__ import annotations

import math
import time as wallclock
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Mapping

from ..cost import tardiness_cost
from ..errors import AndreasError
from ..model import Job, Scenario, Segment
from ..policies import pinning
from ..policies.base import Assignment, JobView, Policy, Snapshot, check_plan, revisit_at, stops_job
from ..policies.decision import Decision

EPS = 1e-9


class SimulationError(AndreasError):
    pass


@dataclass
class _Stretch:
    """A job's current hold on GPUs of one node in one configuration."""

    node: int
    gpus: int
    seconds_per_epoch: float
    start: float
    restart_end: float  # progress starts here (start + overhead on a restart)
    epochs: float = 0.0
    limit_w: float | None = None  # GPU power limit; None = default
    saved_w: float = 0.0  # watts below the node table's draw for this job's GPUs
    restart_saved_w: float = 0.0  # and, until restart_end, this much more (GpuType.restart_w)

    def saved_at(self, t: float) -> float:
        """Watts below the table's draw in the piece that starts at `t`."""
        return self.saved_w + (self.restart_saved_w if t < self.restart_end else 0.0)


@dataclass
class _JobState:
    job: Job
    remaining: float
    stretch: _Stretch | None = None
    started: bool = False
    restarts: int = 0
    first_start: float | None = None
    completion: float | None = None
    energy_joules: float = 0.0
    energy_eur: float = 0.0  # with a tariff, priced interval by interval

    def completion_time(self, now: float) -> float:
        s = self.stretch
        assert s is not None
        return max(now, s.restart_end) + self.remaining * s.seconds_per_epoch


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


@dataclass
class SimulationResult:
    policy: str
    seed: int | None
    scenario: Scenario
    segments: list[Segment]
    jobs: list[JobRecord]
    rescheduling_points: int
    scheduler_seconds: float
    energy_joules: float
    period: float | None = None
    summary: dict = field(default_factory=dict)
    energy_eur: float | None = None  # set with a tariff: the price integrated over time

    def __post_init__(self) -> None:
        cluster = self.scenario.cluster
        energy = (self.energy_joules * cluster.eur_per_joule() if self.energy_eur is None
                  else self.energy_eur)
        tardiness = sum(r.tardiness_cost for r in self.jobs)
        self.summary = {
            "policy": self.policy,
            "seed": self.seed,
            "scenario": self.scenario.name,
            "total_cost": energy + tardiness,
            "energy_cost": energy,
            "tardiness_cost": tardiness,
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
                 first_start_overhead: bool = False,
                 first_revisit: float | None = None) -> None:
        """`start` and `preset` let a live driver forecast from now: jobs submitted by `start`
        begin in the state their `JobView` gives (running where it has an assignment, with its
        remaining restart overhead), and the policy is first asked at the next event, or at
        `first_revisit` if the preset plan asked to be revisited then (`Decision.revisit_at`).
        `record_decisions` keeps every decision in `decisions` (the forecast's foreseen plans;
        off by default: on a long trace it holds every active job at every event).
        `period_only` asks the policy only at the period's ticks (round-based, as Gavel does),
        not at every arrival and completion: a bounded number of decisions on long traces.
        `first_start_overhead` makes a job's first start pay the restart overhead too (not
        counted as a restart): real processes start up (interpreter, data, CUDA) before their
        first epoch, which the paper's model leaves out."""
        if period is not None and period <= 0:
            raise AndreasError(f"period must be > 0 seconds, got {period}")
        if period_only and period is None:
            raise AndreasError("period_only needs a period")
        self.period_only = period_only
        self.first_start_overhead = first_start_overhead
        self.scenario = scenario
        self.cluster = scenario.cluster
        self.policy = policy
        self.period = period
        self.seed = seed
        self.on_progress = on_progress
        self.node_names = [n.name for n in self.cluster.nodes]
        self.node_index = {n: i for i, n in enumerate(self.node_names)}
        self.node_power = [self.cluster.gpu_types[n.gpu_type].node_power_w
                           for n in self.cluster.nodes]
        self.node_idle = [self.cluster.gpu_types[n.gpu_type].idle_w for n in self.cluster.nodes]
        self.busy = [0] * len(self.node_names)
        self.saved = [0.0] * len(self.node_names)  # watts saved by power limits, per node
        self.segments: list[Segment] = []
        self.states: dict[str, _JobState] = {}
        self.energy_joules = 0.0
        self.energy_eur = 0.0
        self.tariff = self.cluster.tariff
        self.scheduler_seconds = 0.0
        self.points = 0
        self.start = start
        self.preset = dict(preset or {})
        self.record_decisions = record_decisions
        self.decisions: list[tuple[float, frozenset[str], Mapping]] = []  # (time, jobs, plan)
        # when the last plan asked to be revisited (Decision.revisit_at), even if nothing happens
        self.revisit = math.inf if first_revisit is None else first_revisit

    # ------------------------------------------------------------------ main loop
    def run(self) -> SimulationResult:
        pending = deque(self.scenario.jobs)  # sorted by submission time
        active: dict[str, _JobState] = {}
        done: list[_JobState] = []
        total = len(pending)
        now = self.start
        next_tick = self.period if self.period else math.inf
        decided = True
        if self.preset:
            self._apply_preset(pending, active, now)
            if self.period:
                next_tick = (math.floor(now / self.period + EPS) + 1) * self.period
        while pending or active:
            running = [s for s in active.values() if s.stretch is not None]
            t_arrival = pending[0].submit_time if pending else math.inf
            t_done = min((s.completion_time(now) for s in running), default=math.inf)
            t_tick = next_tick if active else math.inf
            t_price = math.inf  # with a tariff, waiting jobs are reconsidered as prices change
            if self.tariff is not None and len(running) < len(active):
                t_price = self.tariff.next_change(now)
            # Rounds (period_only) are the only decision points; elsewhere, a revisit is one.
            t_revisit = self.revisit if active and not self.period_only else math.inf
            t_next = min(t_arrival, t_done, t_tick, t_price, t_revisit)
            # With a tariff, jobs may wait for cheaper hours, but not past their due dates.
            # (Between rounds the policy has not been asked yet: the next tick is ahead.)
            # A plan that holds jobs back on purpose names when to revisit them.
            stalled = (not running and active and not pending and decided
                       and self.revisit == math.inf)
            if stalled and (self.tariff is None
                            or all(s.job.due_date <= now for s in active.values())):
                raise SimulationError(
                    f"policy {self.policy.name!r} left {len(active)} job(s) waiting on an idle "
                    f"cluster at t={now:.1f}s with nothing left to wait for")
            self._advance(running, now, t_next)
            now = t_next
            for s in running:
                if s.completion_time(now) <= now + EPS * max(1.0, now):
                    self._finish(s, now)
                    del active[s.job.job_id]
                    done.append(s)
            while pending and pending[0].submit_time <= now:
                job = pending.popleft()
                active[job.job_id] = self.states[job.job_id] = _JobState(job, job.epochs)
            if self.period:
                next_tick = (math.floor(now / self.period + EPS) + 1) * self.period
            if t_next == t_revisit:
                self.revisit = math.inf  # asked now; the new plan may ask again
            decided = bool(active) and (not self.period_only or t_next == t_tick)
            if decided:
                self._decide(now, active)
            if self.on_progress:
                self.on_progress(now, len(done), total)
        return self._result()

    def _apply_preset(self, pending: deque, active: dict[str, _JobState], now: float) -> None:
        while pending and pending[0].submit_time <= now:
            job = pending.popleft()
            s = active[job.job_id] = self.states[job.job_id] = _JobState(job, job.epochs)
            view = self.preset.get(job.job_id)
            if view is None:
                continue
            s.started = view.started
            if view.assignment is not None:
                s.started, s.first_start = True, now
                self._hold(s, view.assignment, now, now + view.restart_remaining_s)
        if active and not any(s.stretch for s in active.values()) and self.revisit == math.inf:
            self._decide(now, active)

    def _advance(self, running: list[_JobState], t0: float, t1: float) -> None:
        """Integrate energy and progress over [t0, t1], during which no job starts or ends
        (a restart that ends inside it, where restarts draw less, splits the energy)."""
        if t1 <= t0:
            return
        restarting = [st for st in map(_held, running) if st.restart_saved_w
                      and t0 < st.restart_end]
        ends = sorted({st.restart_end for st in restarting if st.restart_end < t1})
        for a, b in zip([t0, *ends], [*ends, t1]):
            self._energy(running, restarting, a, b)
        for s in running:
            st = _held(s)
            progress = max(0.0, t1 - max(t0, st.restart_end)) / st.seconds_per_epoch
            progress = min(progress, s.remaining)
            s.remaining -= progress
            st.epochs += progress

    def _energy(self, running: list[_JobState], restarting: list[_Stretch], t0: float,
                t1: float) -> None:
        """Energy over [t0, t1], during which every draw is constant; `restarting` are the
        stretches whose restarts draw less (GpuType.restart_w) and have not ended by t0."""
        dt = t1 - t0
        priced = self.cluster.energy_eur if self.tariff is not None else None
        saved = self.saved
        if restarting:
            saved = list(saved)
            for st in restarting:
                if t0 < st.restart_end:
                    saved[st.node] += st.restart_saved_w
        for n, b in enumerate(self.busy):
            watts = self.node_power[n][b - 1] - saved[n] if b else self.node_idle[n]
            if watts:
                self.energy_joules += watts * dt
                if priced:
                    self.energy_eur += priced(watts, t0, t1)
        for s in running:
            st = _held(s)
            b = self.busy[st.node]
            share = self.node_power[st.node][b - 1] * st.gpus / b - st.saved_at(t0)
            s.energy_joules += share * dt
            if priced:
                s.energy_eur += priced(share, t0, t1)

    def _finish(self, s: _JobState, now: float) -> None:
        assert s.stretch is not None
        s.stretch.epochs += s.remaining
        s.remaining = 0.0
        s.completion = now
        self._close(s, now)

    # ------------------------------------------------------------------ decisions
    def _decide(self, now: float, active: dict[str, _JobState]) -> None:
        snapshot = Snapshot(now, self.cluster, self.scenario.profiles, tuple(
            self._view(s, now) for s in active.values()))
        tic = wallclock.perf_counter()
        plan = pinning.decide(self.policy, snapshot)
        self.scheduler_seconds += wallclock.perf_counter() - tic
        wake = revisit_at(plan)
        self.revisit = wake if wake is not None and wake > now else math.inf
        self.points += 1
        if self.record_decisions:
            self.decisions.append((now, frozenset(active), Decision.of(plan)))
        check_plan(snapshot, plan, self.policy.name)
        starts: list[tuple[_JobState, Assignment]] = []
        for job_id, s in active.items():
            target = plan.get(job_id)
            st = s.stretch
            if st is not None:
                current = Assignment(self.node_names[st.node], st.gpus, st.limit_w)
                if not stops_job(current, target):
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

    def _view(self, s: _JobState, now: float) -> JobView:
        st = s.stretch
        if st is None:
            return JobView(s.job, s.remaining, None, s.started)
        return JobView(s.job, s.remaining, Assignment(self.node_names[st.node], st.gpus,
                                                      st.limit_w), True,
                       max(0.0, st.restart_end - now))

    def _start(self, s: _JobState, target: Assignment, now: float) -> None:
        restart_end = now
        if s.started:
            s.restarts += 1
            restart_end = now + self.cluster.restart_overhead_s
        elif self.first_start_overhead:
            restart_end = now + self.cluster.restart_overhead_s
        s.started = True
        if s.first_start is None:
            s.first_start = now
        self._hold(s, target, now, restart_end)

    def _hold(self, s: _JobState, target: Assignment, now: float, restart_end: float) -> None:
        """Give `s` the GPUs of `target` from `now`, progressing from `restart_end`."""
        n = self.node_index[target.node]
        config = (self.cluster.nodes[n].gpu_type, target.gpus)
        profiles = self.scenario.profiles
        spe = profiles.seconds_per_epoch(s.job.profile, *config, target.power_limit_w)
        saved = profiles.saved_w(s.job.profile, config, target.power_limit_w) * target.gpus
        restart_saved = (self.cluster.gpu_types[config[0]].restart_saving_w(target.gpus)
                         if restart_end > now else 0.0)
        s.stretch = _Stretch(n, target.gpus, spe, now, restart_end, 0.0, target.power_limit_w,
                             saved, restart_saved)
        self.busy[n] += target.gpus
        self.saved[n] += saved

    def _close(self, s: _JobState, now: float) -> None:
        """End the current stretch at `now` and log its restart and run segments."""
        st = s.stretch
        assert st is not None
        node = self.cluster.nodes[st.node]
        restart_stop = min(st.restart_end, now)
        if restart_stop > st.start:
            self.segments.append(Segment(s.job.job_id, node.name, node.gpu_type, st.gpus,
                                         st.start, restart_stop, 0.0, "restart", st.limit_w,
                                         st.saved_w + st.restart_saved_w))
        if now > st.restart_end:
            self.segments.append(Segment(s.job.job_id, node.name, node.gpu_type, st.gpus,
                                         st.restart_end, now, st.epochs, "run", st.limit_w,
                                         st.saved_w))
        self.busy[st.node] -= st.gpus
        self.saved[st.node] = self.saved[st.node] - st.saved_w if self.busy[st.node] else 0.0
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
                                     s.energy_joules * eur_per_j if self.tariff is None
                                     else s.energy_eur, s.restarts))
        result = SimulationResult(self.policy.name, self.seed, self.scenario, self.segments,
                                  records, self.points, self.scheduler_seconds,
                                  self.energy_joules, self.period,
                                  energy_eur=None if self.tariff is None else self.energy_eur)
        stats = getattr(self.policy, "stats", None)  # e.g. milp: time-outs and worst gap
        if isinstance(stats, dict):
            result.summary["policy_stats"] = dict(stats)
        return result


def simulate(scenario: Scenario, policy: Policy, *, period: float | None = None,
             seed: int | None = None,
             on_progress: Callable[[float, int, int], None] | None = None,
             period_only: bool = False, first_start_overhead: bool = False
             ) -> SimulationResult:
    """Simulate `policy` on `scenario` and return segments, per-job records and the summary."""
    return Simulator(scenario, policy, period=period, seed=seed, on_progress=on_progress,
                     period_only=period_only, first_start_overhead=first_start_overhead).run()
