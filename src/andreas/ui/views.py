"""What the dashboard's pages show, built from the service's parts (the store, the plan board,
the costs so far): no HTTP here.

A user sees their own jobs; an admin sees all. Another user's run on the Gantt chart is a grey
"busy" bar without its id, as on `/nodes`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..experiments.figures import power_series
from ..service.db import JobRow, User, run_places
from ..service.gpus import gpu_holders, gpus_by_type
from ..service.plan_board import PlanInfo
from ..service.schemas import JobOut
from ..service.services import Services
from ..service.states import ACTIVE_STATES, FINAL_STATES
from ..service.store import Store
from ..service.store import jobs as job_rows
from .svg import Bar, gantt, job_colour, step_chart

STATES = ACTIVE_STATES + FINAL_STATES
PAST_S = 3600.0  # the Gantt chart shows the last hour of runs
POWER_WINDOW_S = 6 * 3600.0  # and the cluster page the last six hours of power


def user_names(store: Store) -> list[str]:
    with store.session() as s:
        return job_rows.user_names(s)


@dataclass
class PlanView:
    svg: str
    held: list[dict] = field(default_factory=list)  # jobs held back on purpose, with until
    late: list[str] = field(default_factory=list)  # jobs the forecast ends late
    bars: int = 0


def plan_view(svc: Services, user: User, now: float) -> PlanView:
    """The Gantt chart: every node GPU a lane; the last hour's runs as they ran; from now on,
    the latest forecast (running jobs to their predicted end, later starts where the
    forecast's decisions put them); a "now" line; late jobs marked."""
    nodes = svc.nodes()
    lanes = [f"{n.name}/{i}" for n in nodes for i in n.gpu_indices]
    info = svc.board.latest
    with svc.store.session() as s:
        owned = job_rows.owned_job_ids(s, user)
        jobs = {j.id: j for j in job_rows.all_jobs(s)}
        runs = job_rows.runs_since(s, now - PAST_S)
    shown = [j for j in sorted(jobs.values(), key=lambda j: (j.submitted_at, j.id))
             if owned is None or j.id in owned]
    colour = {j.id: job_colour(i) for i, j in enumerate(shown)}
    names = [j.name for j in shown]
    label = {j.id: j.name if names.count(j.name) == 1 else f"{j.name} ·{j.id[-4:]}"
             for j in shown}

    def mine(job_id: str) -> bool:
        return owned is None or job_id in owned

    bars: list[Bar] = []
    taken: dict[str, list[tuple[float, float]]] = {lane: [] for lane in lanes}
    for r in runs:
        job = jobs[r.job_id]
        end = r.ended_at if r.ended_at is not None else now
        late = job.completed_at is not None and job.completed_at > job.due_date and \
            r.ended_at is not None and abs(r.ended_at - job.completed_at) < 1e-6
        for lane in _lanes_of(r):
            taken.setdefault(lane, []).append((r.started_at, end))
            bars.append(_bar(lane, r.started_at, end, job, colour, label, mine(job.id), "run",
                             late, r.id, f"run {r.id}, {r.stop_reason or r.state}"))
    late_jobs = []
    for job_id, f in info.forecast.items():
        job = jobs.get(job_id)
        if job is None or job.state in FINAL_STATES or f["completion"] <= now:
            continue
        late = f["completion"] > job.due_date + 1e-6
        if late and mine(job_id):
            late_jobs.append(job_id)
        live = next((r for r in runs if r.job_id == job_id and r.ended_at is None), None)
        if live is not None:
            for lane in _lanes_of(live):
                taken.setdefault(lane, []).append((now, f["completion"]))
                bars.append(_bar(lane, now, f["completion"], job, colour, label, mine(job_id),
                                 "forecast", late, None, "forecast"))
            continue
        start = max(now, f["start"] or now)
        where = _planned_node(info, job_id, start)
        if where is None:
            continue
        nodes, gpus = where
        free = [[lane for lane in lanes if lane.rsplit("/", 1)[0] == node and not any(
            a < f["completion"] and start < b for a, b in taken.get(lane, []))][:gpus]
            for node in nodes]  # a gang's GPUs on each of its nodes
        for lane in (lane for on_node in free for lane in on_node):
            taken[lane].append((start, f["completion"]))
            bars.append(_bar(lane, start, f["completion"], job, colour, label, mine(job_id),
                             "forecast", late, None, "forecast"))
    # the window: from the oldest run shown (at most an hour back) to the last forecast end
    # (at most two days ahead), a little wider on both sides
    t0 = max(min([b.start for b in bars] + [now - 60.0]), now - PAST_S)
    t1 = min(max([b.end for b in bars] + [now + 60.0]), now + 48 * 3600.0)
    pad = 0.03 * (t1 - t0)
    t0, t1 = t0 - pad, t1 + pad
    held = [{"job": job_id, "text": w["text"], "until": w["until"]}
            for job_id, w in info.waiting.items() if w.get("until") and mine(job_id)]
    return PlanView(gantt(lanes, bars, t0, t1, now), held, late_jobs, len(bars))


def _bar(lane: str, start: float, end: float, job: JobRow, colour: dict, label: dict,
         mine: bool, kind: str, late: bool, run_id: int | None, what: str) -> Bar:
    if not mine:
        return Bar(lane, start, end, "busy", "", "busy", False, "", run_id, "another user's job")
    return Bar(lane, start, end, label.get(job.id, job.name), colour.get(job.id, job_colour(0)),
               kind, late, job.id, run_id, f"{job.name} ({job.id}): {what}")


def _planned_node(info: PlanInfo, job_id: str, start: float
                  ) -> tuple[tuple[str, ...], int] | None:
    """Where the plan or the forecast's later decisions start `job_id`: its nodes (a gang's
    every one) and GPUs on each."""
    a = info.assignments.get(job_id)
    if a is not None:
        return (a["node"], *a.get("more_nodes", ())), a["gpus"]
    for decision in info.foreseen:
        if decision.time >= start - 1.0 and job_id in decision.plan:
            target = decision.plan[job_id]
            return target.nodes, target.gpus
    return None


def _lanes_of(run) -> list[str]:
    """The Gantt lanes (node/GPU) a run holds: on every node of a gang."""
    return [f"{node}/{i}" for node, indices in run_places(run) for i in indices]


def forecast_charts(svc: Services, job: JobOut, now: float) -> list[str]:
    """The job's predicted end and the cost still to come as predicted at each decision since
    the service started, against its due date and what it has cost so far (or in all)."""
    from ..clock import moment

    points = svc.board.forecast_points(job.id)
    if not points:
        return []
    end = job.completed_at if job.completed_at is not None else now
    times = [p[0] for p in points] + [max(end, points[-1][0] + 1.0)]
    measured = (job.measured or {}).get("total_cost")

    def clock(t: float) -> str:
        when = moment(t)
        return "-" if when is None else when.strftime("%H:%M:%S")

    ends = step_chart(times, [p[1] for p in points], unit="", title="Predicted end, by "
                      "decision", label=clock, reference=(job.due_date, "due"), floor=None)
    costs = step_chart(times, [p[2] for p in points], unit="EUR", title="Cost still to come "
                       "(EUR), as predicted at each decision", label=lambda v: f"{v:.4f}",
                       reference=None if measured is None else (
                           measured, "spent in all" if job.completed_at else "spent so far"))
    return [ends, costs]


@dataclass
class ClusterView:
    nodes: list[dict]
    by_type: list[dict]
    power_now_w: float
    power_svg: str
    costs: dict
    decisions_per_min: float
    decision_s_mean: float
    decision_s_last: float
    decisions: int


def cluster_view(svc: Services, user: User, now: float) -> ClusterView:
    """Nodes and GPUs busy by type, power now and over the last hours (modelled from busy
    GPUs, as the costs are), costs so far, and how often and how fast decisions are made."""
    with svc.store.session() as s:
        held = gpu_holders(s, job_rows.owned_job_ids(s, user))
        runs = job_rows.runs_since(s, now - POWER_WINDOW_S)
    executor_nodes = svc.nodes()
    nodes = [{"name": n.name, "gpu_type": n.gpu_type, "gpus": n.gpus,
              "busy": len(held.get(n.name, {})), "jobs": sorted(set(held.get(n.name, {}).values()))}
             for n in executor_nodes]
    by_type = [{"gpu_type": t, "gpus": gpus, "busy": busy}
               for t, (gpus, busy) in gpus_by_type(executor_nodes, held).items()]
    cluster, segments = svc.accounting.segments(runs, now)
    series = power_series(segments, cluster)
    times = [max(float(t), now - POWER_WINDOW_S) for t in series.times]
    values = [float(v) for v in series.power_w]
    if times and times[-1] < now:  # idle since the last run ended
        times.append(now)
        values.append(sum(cluster.gpu_types[n.gpu_type].idle_w for n in cluster.nodes))
    power_now = values[-1] if values else 0.0
    recent = svc.board.decisions_since(now - 600.0)
    measured = svc.accounting.measured()
    plan = svc.board.latest
    return ClusterView(
        nodes, by_type, power_now,
        step_chart(times, values, unit="W", title="Cluster power, last 6 hours (modelled)"),
        {"energy_cost": measured["energy_cost"], "energy_kwh": measured["energy_kwh"],
         "tardiness_cost": measured["tardiness_cost"],
         "emissions_kg": measured.get("emissions_kg"),
         "carbon_g_per_kwh": cluster.carbon.price_at(now) if cluster.carbon else None},
        len(recent) / 10.0, sum(d for _, d in recent) / len(recent) if recent else 0.0,
        plan.decision_s, plan.decisions)
