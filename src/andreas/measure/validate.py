"""`andreas validate`: predicted against measured cost on a real workload run by the service.

1. Profile the example training script's models on each configuration (`andreas profile`).
2. Start the live service (local executor, logical GPUs) and submit a seeded workload whose
   arrivals and due dates make the policy pause and move jobs.
3. When every job is done, compare for each job and in total the cost predicted when the job
   was first planned with the cost measured (energy from measured busy time and the power
   table, or with `gpu` the GPUs' own energy counters read by NVML; tardiness from the
   measured completion).
4. Replay the same workload in the simulator with the profiles the scheduler used, and compare
   the simulated schedule with the measured one.

With `profile_error` the scheduler is given profiles that far off (0.3 = 30 % too fast), to
show what online learning recovers.

With `gpu` the workload is the PyTorch example on this machine's NVIDIA GPUs (one node holding
them all, each job on one GPU), the node's power table is the boards' power measured while
profiling (weighted by the workload's planned GPU time per model; restarts at the start-up
power measured), and each job's measured energy is what NVML's counters say its runs drew.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import statistics
import sys
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..catalogue import canonical_gpu
from ..errors import AndreasError
from .nvml import NvmlMeter, gpu_type_name
from .profiler import Measurement, profile_script, read_measurements, write_profiles

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
EXAMPLE = EXAMPLES / "train_numpy.py"
GPU_EXAMPLE = EXAMPLES / "train_pytorch.py"
MODELS = {  # model name -> example script arguments (one core per job, ~0.2-0.5 s per epoch)
    "mlp-s": ["--samples", "150000", "--hidden", "64"],
    "mlp-m": ["--samples", "200000", "--hidden", "160"],
    "mlp-l": ["--samples", "250000", "--hidden", "256"],
}
QUICK_MODELS = {"mlp-q": ["--samples", "40000", "--hidden", "64"]}
_CNN = ["--image", "32", "--samples", "65536", "--batch", "256"]
GPU_MODELS = {  # the PyTorch example at three widths: a few tenths of a second per epoch
    "cnn-s": ["--width", "32", *_CNN],
    "cnn-m": ["--width", "64", *_CNN],
    "cnn-l": ["--width", "128", *_CNN],
}
GPU_QUICK_MODELS = {"cnn-q": ["--width", "16", "--image", "16", "--samples", "8192"]}
CLUSTER_YAML = """\
# Written by andreas validate: two single-GPU nodes of logical GPUs on this machine.
energy_price: 0.25
pue: 1.2
restart_overhead_s: {overhead:.3f}
gpu_types:
  big: {{node_power_w: [350]}}
  small: {{node_power_w: [150]}}
nodes:
  - {{name: big0, gpu_type: big, gpus: 1}}
  - {{name: small0, gpu_type: small, gpus: 1}}
"""
CONFIGS = [("big", 1), ("small", 1)]
GPU_CLUSTER_YAML = """\
# Written by andreas validate --gpu: this machine's {gpus} {product} GPU(s) as one node. The power
# table is the boards' power measured while profiling (NVML), GPU boards only, as NVML
# measures the runs ({powers}), weighted by the workload's planned GPU time per model; a
# restarting GPU draws the mean measured during start-ups.
energy_price: 0.25
pue: 1.2
restart_overhead_s: {overhead:.3f}
gpu_types:
  {gpu_type}: {{node_power_w: [{table}]{restart}}}
nodes:
  - {{name: gpu0, gpu_type: {gpu_type}, gpus: {gpus}}}
"""


@dataclass(frozen=True)
class ValidationSpec:
    jobs: int = 10
    seed: int = 1
    profile_error: float = 0.0
    learn: bool = True
    quick: bool = False
    policy: str = "andreas"
    script: Path = EXAMPLE
    gpu: bool = False  # the PyTorch example on NVIDIA GPUs, energy measured by NVML
    # an earlier run's measured profiles (its work/profiles-measured.csv): no profiling, so
    # that several seeds compare on the same profiles (scripts/gpu-validate.sh SEEDS)
    profiles_from: Path | None = None


@dataclass(frozen=True)
class PlannedJob:
    name: str
    model: str
    epochs: int
    submit_offset_s: float
    deadline_s: float
    priority: int


def example_script(gpu: bool = False) -> Path:
    script = GPU_EXAMPLE if gpu else EXAMPLE
    if not script.is_file():
        raise AndreasError(f"the example training script {script} is missing; validate runs "
                           f"from a source checkout of ANDREAS")
    return script


@dataclass(frozen=True)
class GpuMachine:
    """This machine's NVIDIA GPUs as NVML sees them."""
    meter: NvmlMeter
    product: str
    gpu_type: str
    gpus: int


def gpu_machine() -> GpuMachine:
    """NVML's view of the GPUs, or a clear error where there is none to validate on."""
    meter = NvmlMeter()
    names = meter.names()
    if not names:
        raise AndreasError("--gpu: NVML finds no NVIDIA GPU here (it needs the NVIDIA driver "
                           "and the nvidia-ml-py package); run validate without --gpu")
    if len(set(names)) > 1:
        raise AndreasError(f"--gpu: this machine mixes GPU models ({', '.join(sorted(set(names)))})"
                           f"; validate expects one kind of GPU")
    slug = gpu_type_name(names[0])  # the catalogue's spelling where it knows the GPU
    return GpuMachine(meter, names[0], canonical_gpu(slug) or slug, len(names))


def gpu_cluster_yaml(machine: GpuMachine, measurements: list[Measurement], overhead: float,
                     gpu_seconds: dict[str, float] | None = None) -> str:
    """The node's power table from the boards' measured power: k busy GPUs draw k times the
    mean of the profiled models' power, weighted by the GPU time the workload plans for each
    (`gpu_seconds`; equal weights without it). An idle board is not counted, as per-run NVML
    energy does not count it; a restarting GPU draws the mean power measured in start-ups.
    One draw per GPU type is the paper's model: per job, a model drawing less or more than
    the mean is mispredicted by that much."""
    measured = {m.profile: m.power_w for m in measurements}
    missing = [p for p, w in measured.items() if w is None]
    if missing:
        raise AndreasError(f"--gpu: NVML gave no energy readings while profiling "
                           f"{', '.join(missing)}")
    powers = {p: float(w or 0.0) for p, w in measured.items()}
    weights = ([gpu_seconds.get(p, 0.0) for p in powers] if gpu_seconds
               else [1.0] * len(powers))
    if not sum(weights):
        weights = [1.0] * len(powers)
    mean = sum(w * x for w, x in zip(weights, powers.values())) / sum(weights)
    startups = [m.startup_power_w for m in measurements]
    restart = ("" if any(s is None for s in startups)
               else f", restart_power_w: {statistics.fmean(float(s or 0.0) for s in startups):.1f}")
    table = ", ".join(f"{k * mean:.1f}" for k in range(1, machine.gpus + 1))
    return GPU_CLUSTER_YAML.format(
        gpus=machine.gpus, product=machine.product, gpu_type=machine.gpu_type,
        overhead=overhead, table=table, restart=restart,
        powers=", ".join(f"{p} {w:.1f} W" for p, w in sorted(powers.items())))


def reused_measurements(path: Path, models: dict, configs: list[tuple[str, int]]
                        ) -> list[Measurement]:
    """An earlier run's measurements of exactly these models on these configurations."""
    found = [m for m in read_measurements(path) if m.profile in models]
    have = {(m.profile, m.gpu_type, m.gpus) for m in found}
    missing = [f"{p} on {t}:{g}" for p in models for t, g in configs if (p, t, g) not in have]
    if missing:
        raise AndreasError(f"--profiles-from {path}: no measurement of {', '.join(missing)}; "
                           f"use the profiles of a run with the same models (and --gpu, "
                           f"--quick) as this one")
    return found


def nvml_energy_cost(cluster, joules: float) -> float:
    """EUR for energy NVML measured, at the cluster's (constant) price and PUE."""
    return joules * cluster.eur_per_joule()


def plan_workload(spec: ValidationSpec, spe: dict[str, float]) -> list[PlannedJob]:
    """Seeded jobs, submitted as one batch (a workload known in advance, so the first plan
    forecasts all of it); due dates a multiple of the fastest run time, so that some jobs are
    urgent and the policy pauses and moves others for them."""
    rng = np.random.default_rng(spec.seed)
    models = sorted(spe)
    jobs = []
    for i in range(spec.jobs):
        model = models[int(rng.integers(len(models)))]
        if spec.gpu:  # GPU speeds vary by orders of magnitude: size jobs by run time
            seconds = float(rng.uniform(4, 8) if spec.quick else rng.uniform(8, 20))
            epochs = max(3, round(seconds / spe[model]))
        else:
            epochs = int(rng.integers(6, 10)) if spec.quick else int(rng.integers(30, 80))
        slack = float(rng.choice([2.0, 5.0, 10.0]))
        jobs.append(PlannedJob(f"{model}-{i}", model, epochs, 0.0, slack * epochs * spe[model],
                               int(rng.integers(1, 6))))
    return jobs


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_validation(out: Path, spec: ValidationSpec,
                   say: Callable[[str], None] = lambda text: None) -> dict:
    """Run the whole validation; write OUT/validation.json and OUT/validation.png."""
    import httpx
    import uvicorn

    from ..service.api import create_app
    from ..service.config import read_service_config

    out = Path(out)
    work = out / "work"
    if work.exists() and any(work.iterdir()):
        raise AndreasError(f"{work} exists and is not empty; choose a new --out")
    machine = gpu_machine() if spec.gpu else None
    work.mkdir(parents=True, exist_ok=True)
    if machine:
        models = GPU_QUICK_MODELS if spec.quick else GPU_MODELS
        configs = [(machine.gpu_type, 1)]
    else:
        models = QUICK_MODELS if spec.quick else MODELS
        configs = CONFIGS

    # 1. profiles, measured here and now (on GPUs one model at a time, each alone on GPU 0),
    # or an earlier run's
    measurements: list[Measurement] = []
    if spec.profiles_from is not None:
        measurements = reused_measurements(spec.profiles_from, models, configs)
        say(f"profiles from {spec.profiles_from}")
    for model, args in ({} if measurements else models).items():
        say(f"profiling {model} on {', '.join(f'{t}:{g}' for t, g in configs)}")
        measurements += profile_script(
            [sys.executable, str(spec.script), *args], model, configs,
            epochs=2 if spec.quick else 6, warmup=1,
            min_seconds=0.0 if spec.quick else (8.0 if machine else 20.0),
            parallel=machine is None, meter=machine.meter if machine else None)
    write_profiles(work / "profiles-measured.csv", measurements)
    overhead = statistics.fmean(m.startup_s for m in measurements)
    scale = 1.0 - spec.profile_error  # the scheduler believes jobs are this much faster
    # each model's own draw per GPU where NVML measured it (`power_w`): the planner, the
    # forecasts and the accounting charge it instead of the table's
    used = [Measurement(m.profile, m.gpu_type, m.gpus, m.seconds_per_epoch * scale, m.spread_s,
                        m.samples, m.startup_s, m.power_w) for m in measurements]
    write_profiles(work / "profiles.csv", used)
    measured_spe = {(m.profile, m.gpu_type): m.seconds_per_epoch for m in measurements}
    fastest = {m: min(v for (p, _), v in measured_spe.items() if p == m) for m in models}
    planned = plan_workload(spec, fastest)
    gpu_seconds = {p.model: 0.0 for p in planned}
    for p in planned:
        gpu_seconds[p.model] += p.epochs * fastest[p.model]
    (work / "cluster.yaml").write_text(gpu_cluster_yaml(machine, measurements, overhead,
                                                        gpu_seconds)
                                       if machine else CLUSTER_YAML.format(overhead=overhead))
    port = _free_port()
    (work / "service.yaml").write_text(
        f"cluster: cluster.yaml\nprofiles: profiles.csv\ndata_dir: state\n"
        f"policy: {spec.policy}\npolicy_options: {{seed: {spec.seed}}}\nperiod_s: null\n"
        f"poll_s: 0.2\ngrace_s: 10\nlearn: {'true' if spec.learn else 'false'}\n"
        f"public_url: http://127.0.0.1:{port}\n"
        # the operator's own measuring jobs, on the operator's machine
        "jobs_as_service_user: true\n"
        # a second late costs about what a big node's second of energy costs, or less
        f"priority_weights: {{1: 0.000002, 2: 0.000005, 3: 0.00001, 4: 0.00002, 5: 0.00004}}\n")
    config = read_service_config(work / "service.yaml")

    # 2. the live service, in this process, on a real port (jobs report progress to it)
    token = secrets.token_urlsafe(16)
    app = create_app(config, admin_token=token)
    app.state.scheduler.board.record_history = True  # the prediction history plotted below
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    headers = {"Authorization": f"Bearer {token}"}
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise AndreasError("the service did not start")
            time.sleep(0.05)
        ids: dict[str, str] = {}
        with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
            t0 = time.time()
            r = client.post("/jobs/batch", json=[{
                "name": job.name, "script": str(spec.script), "args": models[job.model],
                "epochs": job.epochs, "deadline_s": job.deadline_s,
                "priority": job.priority, "profile": job.model} for job in planned])
            if r.status_code != 201:
                raise AndreasError(f"submitting the workload failed: {r.text}")
            ids = {job.name: out["id"] for job, out in zip(planned, r.json())}
            say(f"submitted {len(planned)} jobs")
            last = None
            while True:  # a cheap count straight from the store: no load on the machine
                done = _finished(app.state.store)
                if done != last:
                    say(f"{done}/{len(planned)} jobs done")
                    last = done
                if done == len(planned):
                    break
                time.sleep(1.0)
            jobs = {j["id"]: j for j in client.get("/jobs").json()}
            runs = {i: client.get(f"/jobs/{i}/runs").json() for i in jobs}
        failed = [j["name"] for j in jobs.values() if j["state"] != "completed"]
        if failed:
            raise AndreasError(f"jobs did not complete: {', '.join(failed)}; see {work}/state")
        scheduler = app.state.scheduler
        history = list(scheduler.board.history)
        progress = _progress_rows(app.state.store)
    finally:
        server.should_exit = True
        thread.join(timeout=60)

    result = _compare(spec, config, planned, ids, jobs, runs, t0, history, progress,
                      measured_spe, scale)
    if machine:
        result["machine"].update(gpu_product=machine.product, gpus=machine.gpus)
        result["profiled_power_w"] = {m.profile: m.power_w for m in measurements}
        result["profiled_startup_power_w"] = {m.profile: m.startup_power_w
                                               for m in measurements}
    result["profiled_startup_s"] = {f"{m.profile}/{m.gpu_type}:{m.gpus}": m.startup_s
                                    for m in measurements}
    result["simulated"] = _replay(config, planned, ids, jobs, t0, spec, result)
    tmp = out / "validation.json.tmp"
    tmp.write_text(json.dumps(result, indent=2))
    os.replace(tmp, out / "validation.json")
    _plot(result, out / "validation.png")
    return result


def _finished(store) -> int:
    from sqlalchemy import func, select

    from ..service.db import JobRow
    from ..service.states import FINAL_STATES

    with store.session() as s:
        return s.scalar(select(func.count()).where(JobRow.state.in_(FINAL_STATES)))


def _progress_rows(store) -> list[tuple[str, int, float, float]]:
    from sqlalchemy import select

    from ..service.db import ProgressRow

    with store.session() as s:
        return [(p.job_id, p.run_id, p.time, p.epochs_done)
                for p in s.scalars(select(ProgressRow).order_by(ProgressRow.id))]


def _measured_spe(progress, job_id: str, runs: set[int] | None = None) -> float | None:
    """The job's measured seconds per epoch (over the given runs, or all): time over epochs
    between consecutive reports of a run."""
    time_sum = epochs = 0.0
    previous = None
    for j, run, t, e in progress:
        if j != job_id or (runs is not None and run not in runs):
            continue
        if previous and previous[0] == run and e > previous[2]:
            time_sum += t - previous[1]
            epochs += e - previous[2]
        previous = (run, t, e)
    return time_sum / epochs if epochs else None


def _deviation(measured: float, predicted: float) -> float:
    return abs(measured - predicted) / measured if measured > 0 else 0.0


def _compare(spec, config, planned, ids, jobs, runs, t0, history, progress, measured_spe,
             scale) -> dict:
    entries = []
    by_name = {p.name: p for p in planned}
    for name, job_id in ids.items():
        j = jobs[job_id]
        predicted, measured = j["predicted"], j["measured"]
        energy = measured["energy_cost"]  # from busy time and the power table
        if spec.gpu:  # from the boards' energy counters over the job's runs
            if measured["gpu_energy_j_nvml"] is None:
                raise AndreasError(f"NVML measured no energy for job {name}; see {job_id}'s "
                                   f"runs in the service's state")
            energy = nvml_energy_cost(config.cluster, measured["gpu_energy_j_nvml"])
        measured_cost = energy + measured["tardiness_cost"]
        spe_true = _measured_spe(progress, job_id)
        spe_profile = {t: v for (p, t), v in measured_spe.items() if p == by_name[name].model}
        job_runs = [r for r in runs[job_id] if r["stop_reason"] != "start-failed"]
        learned = last_spe = None
        if job_runs:  # the learned estimate for the configuration it ended on, against the
            gpu_type = job_runs[-1]["gpu_type"]  # speed measured in all its runs there
            learned = spe_profile[gpu_type] * scale * j["speed_factor"]
            last_spe = _measured_spe(progress, job_id, {r["id"] for r in job_runs
                                                        if r["gpu_type"] == gpu_type})
        bounds = predicted.get("completion_range")  # the first plan's range, if it had one
        planned_node = first_planned_node(history, job_id, predicted)
        types = {r["gpu_type"] for r in job_runs}
        believed = spe_profile[types.pop()] * scale if len(types) == 1 else None
        entries.append({
            "job": name, "id": job_id, "model": by_name[name].model, "epochs": j["epochs"],
            "predicted_completion_range_s": (None if not bounds
                                             else [bounds[0] - t0, bounds[1] - t0]),
            "completion_within_range": (None if not bounds else
                                        bounds[0] - 1e-6 <= j["completed_at"] <= bounds[1] + 1e-6),
            "submitted_s": j["submitted_at"] - t0, "due_s": j["due_date"] - t0,
            "weight": j["weight"],
            "predicted_cost": predicted["total_cost"],
            "predicted_energy_cost": predicted["energy_cost"],
            "predicted_tardiness_cost": predicted["tardiness_cost"],
            "predicted_completion_s": predicted["completion"] - t0,
            "measured_cost": measured_cost,
            "measured_energy_cost": energy,
            "modelled_energy_cost": measured["energy_cost"],
            "measured_tardiness_cost": measured["tardiness_cost"],
            "measured_completion_s": j["completed_at"] - t0,
            "gpu_energy_j_nvml": measured["gpu_energy_j_nvml"],
            "deviation": _deviation(measured_cost, predicted["total_cost"]),
            "energy_deviation": _deviation(energy, predicted["energy_cost"]),
            "runs": len(job_runs), "nodes": sorted({r["node"] for r in job_runs}),
            "run_nodes": [r["node"] for r in job_runs],  # in order
            "learned_startup_s": j.get("startup_s"),  # from its runs in the service
            "first_planned_node": planned_node,
            "on_planned_node": (None if planned_node is None or not job_runs
                                else all(r["node"] == planned_node for r in job_runs)),
            "pauses": sum(r["stop_reason"] == "pause" for r in job_runs),
            "moves": sum(r["stop_reason"] == "move" for r in job_runs),
            "measured_seconds_per_epoch": spe_true,
            "learned_seconds_per_epoch": learned,
            "final_config_seconds_per_epoch": last_spe,
            "learned_error": (abs(learned - last_spe) / last_spe
                              if learned and last_spe else None),
            # on one GPU type: its measured speed against what the scheduler was told
            "speed_drift": (spe_true / believed - 1.0 if believed and spe_true else None),
        })
    predicted_total = sum(e["predicted_cost"] for e in entries)
    measured_total = sum(e["measured_cost"] for e in entries)
    predicted_energy = sum(e["predicted_energy_cost"] for e in entries)
    measured_energy = sum(e["measured_energy_cost"] for e in entries)
    learned_errors = [e["learned_error"] for e in entries if e["learned_error"] is not None]
    end = max(e["measured_completion_s"] for e in entries)
    last_submit = max(e["submitted_s"] for e in entries)
    after = plans_of_the_workload(history, t0 + last_submit)
    return {
        "spec": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(spec).items()},
        "machine": {"cpus": os.cpu_count(), "executor": "local", "nvml": any(
            e["gpu_energy_j_nvml"] is not None for e in entries)},
        "restart_overhead_s": config.cluster.restart_overhead_s,
        "energy_source": "nvml" if spec.gpu else "power table",
        "predicted_energy_cost": predicted_energy,
        "measured_energy_cost": measured_energy,
        "energy_deviation": _deviation(measured_energy, predicted_energy),
        "predicted_total_cost": predicted_total,
        "measured_total_cost": measured_total,
        "total_deviation": _deviation(measured_total, predicted_total),
        "worst_job_deviation": max(e["deviation"] for e in entries),
        "mean_job_deviation": statistics.fmean(e["deviation"] for e in entries),
        "makespan_s": end,
        "pauses": sum(e["pauses"] for e in entries),
        "moves": sum(e["moves"] for e in entries),
        "worst_learned_error": max(learned_errors) if learned_errors else None,
        "prediction_deviation_at": _deviation_at(after, t0, end, measured_total),
        "prediction_history": [{"time_s": h["time"] - t0, "predicted_total": h["predicted_total"],
                                "deviation": _deviation(measured_total, h["predicted_total"])}
                               for h in after],
        "per_job": per_job_distribution(entries),
        "decision_sources": dict(Counter(h.get("source", "?") for h in after)),
        "decisions": [{"time_s": h["time"] - t0, "reasons": h.get("reasons"),
                       "source": h.get("source"), "weighed": h.get("weighed"),
                       "gain_needed": h.get("gain_needed"),
                       "nodes": h.get("nodes")} for h in after],
        "jobs": entries,
    }


def per_job_distribution(entries: list[dict]) -> dict:
    """How far each job's prediction was off, as a distribution over the jobs: energy and
    total cost deviations (shares of the measured) and the completion error (measured -
    predicted, s): mean, median, 90th percentile and worst (largest in size)."""
    def summary(values: list[float]) -> dict:
        sizes = sorted(abs(v) for v in values)
        return {"mean": statistics.fmean(sizes), "median": statistics.median(sizes),
                "p90": float(np.percentile(sizes, 90)), "worst": sizes[-1]}
    return {
        "energy_deviation": summary([e["energy_deviation"] for e in entries]),
        "cost_deviation": summary([e["deviation"] for e in entries]),
        "completion_error_s": summary([e["measured_completion_s"] - e["predicted_completion_s"]
                                       for e in entries]),
        "mean_completion_error_s": statistics.fmean(
            e["measured_completion_s"] - e["predicted_completion_s"] for e in entries),
        "completions_within_range": _share([e["completion_within_range"] for e in entries]),
        "energy_over_10_percent": off_by_why(entries, 0.1),
    }


def off_by_why(entries: list[dict], share: float) -> dict:
    """The jobs whose energy prediction was off by more than `share`, by why: how many ran
    elsewhere than their first plan said (a plan changed, or a move foreseen), and for those
    on their planned node, the range of their speed's drift from the profile the scheduler
    used (measured / believed - 1: the machine's speed, not the plan)."""
    over = [e for e in entries if e["energy_deviation"] > share]
    on_node = [e for e in over if e["on_planned_node"]]
    drifts = [e["speed_drift"] for e in on_node if e["speed_drift"] is not None]
    return {"jobs": len(over), "on_planned_node": len(on_node),
            "elsewhere": sum(e["on_planned_node"] is False for e in over),
            "speed_drift_on_planned_node": [min(drifts), max(drifts)] if drifts else None}


def _share(flags: list[bool | None]) -> float | None:
    """The share of True among the flags that are set; None if none is."""
    known = [f for f in flags if f is not None]
    return sum(known) / len(known) if known else None


def first_planned_node(history: list[dict], job_id: str, predicted: dict) -> str | None:
    """Where the decision that first forecast `job_id` ran it or first foresaw it start (its
    history entry's `nodes`); None if that decision is not in the history."""
    for h in history:
        if h["time"] == predicted.get("planned_at"):
            return h.get("nodes", {}).get(job_id)
    return None


def plans_of_the_workload(history: list[dict], submitted: float) -> list[dict]:
    """The service's history entries (`Scheduler._record_history`) from the first decision
    that planned the submitted workload: a decision made as the batch came in may have read
    the queue before it and forecast nothing, which would read as a first plan 100 % off."""
    after = [h for h in history if h["time"] >= submitted]
    while after and after[0].get("forecast_jobs") == 0:
        after.pop(0)
    return after


def _deviation_at(history, t0: float, end: float, measured_total: float) -> dict:
    """Deviation of the predicted workload total made at the first plan and by 25, 50, 75 %
    of the makespan: how predictions converge as the service learns."""
    out = {}
    for label, fraction in (("first_plan", 0.0), ("25%", 0.25), ("50%", 0.5), ("75%", 0.75)):
        made = [h for h in history if h["time"] - t0 <= fraction * end + 1e-9] or history[:1]
        if made:
            out[label] = _deviation(measured_total, made[-1]["predicted_total"])
    return out


def _replay(config, planned, ids, jobs, t0, spec, result) -> dict:
    """The same workload in the simulator, with the profiles the scheduler was given; first
    starts pay the start-up, as real processes (and the service's forecasts) do."""
    from ..model import Job, Scenario
    from ..policies import make_policy
    from ..sim.engine import simulate

    scenario_jobs = []
    for p in planned:
        j = jobs[ids[p.name]]
        scenario_jobs.append(Job(p.name, j["submitted_at"] - t0, j["due_date"] - t0,
                                 j["weight"], float(j["epochs"]), p.model))
    scenario_jobs.sort(key=lambda j: (j.submit_time, j.job_id))
    sim = simulate(Scenario(config.cluster, config.profiles, tuple(scenario_jobs), "validate"),
                   make_policy(spec.policy, seed=spec.seed), first_start_overhead=True)
    measured = {e["job"]: e for e in result["jobs"]}
    per_job = []
    for r in sim.jobs:
        m = measured[r.job_id]
        per_job.append({"job": r.job_id, "simulated_completion_s": r.completion_time,
                        "measured_completion_s": m["measured_completion_s"],
                        "completion_difference_s": m["measured_completion_s"] - r.completion_time,
                        "simulated_cost": r.energy_cost + r.tardiness_cost,
                        "measured_cost": m["measured_cost"], "simulated_restarts": r.restarts,
                        "measured_restarts": m["runs"] - 1})
    total = sim.summary["total_cost"]
    return {"total_cost": total, "measured_total_cost": result["measured_total_cost"],
            "deviation": _deviation(result["measured_total_cost"], total),
            "makespan_s": sim.summary["makespan_s"],
            "mean_abs_completion_difference_s": statistics.fmean(
                abs(x["completion_difference_s"]) for x in per_job),
            "jobs": per_job}


def _plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    jobs = result["jobs"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [3, 2]})
    x = np.arange(len(jobs))
    ax1.bar(x - 0.2, [j["predicted_cost"] for j in jobs], 0.4, label="predicted (first plan)")
    ax1.bar(x + 0.2, [j["measured_cost"] for j in jobs], 0.4, label="measured")
    ax1.set_xticks(x, [j["job"] for j in jobs], rotation=45, ha="right", fontsize=8)
    ax1.set_ylabel("cost (EUR)")
    ax1.set_title(f"Per job: worst deviation {100 * result['worst_job_deviation']:.1f} %")
    ax1.legend()
    hist = result["prediction_history"]
    if hist:
        ax2.plot([h["time_s"] for h in hist], [h["predicted_total"] for h in hist],
                 marker=".", label="predicted total at each decision")
    ax2.axhline(result["measured_total_cost"], color="k", ls="--", label="measured total")
    ax2.set_xlabel("time since first submission (s)")
    ax2.set_ylabel("cost (EUR)")
    ax2.set_title(f"Total: deviation {100 * result['total_deviation']:.1f} % (first plans)")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
