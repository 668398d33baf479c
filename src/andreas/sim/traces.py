"""Turn production traces into scenario directories: Microsoft Philly and Alibaba PAI (2023).

The cluster comes from the user's cluster.yaml (catalogue GPU names get the catalogue's power);
profiles are the catalogue's Gavel measurements for the cluster's GPU types; the workload comes
from the trace:

- each job's work is its traced duration at its traced GPU count on the reference GPU type
  (P100: Philly ran mostly P100/P40-class GPUs; Alibaba does not say which GPU a pod got),
  turned into epochs (1000 steps each) through its model's profile. Jobs over 8 GPUs are counted
  as 8-GPU jobs doing proportionally more work (our jobs run on one node);
- the model is drawn, seeded, uniformly among the catalogue models that have a profile at the
  job's GPU count (at most 8) on the reference type;
- due date = submit + m × the job's fastest run time on the cluster, m drawn from
  {1.2, 2, 10} (Gavel's rule); weight = U(0.0254, 0.0444) EUR/s, × 5 for 20 % of the jobs.
Alibaba: only pods that got GPUs and ran (Running or Succeeded, num_gpu ≥ 1); a pod sharing a
fraction of a GPU counts as one GPU; `gpu_spec`, when set, limits the job to those GPU types
(names outside the catalogue are ignored; a job none of whose types is in the cluster is
skipped and counted).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..catalogue import canonical_gpu, catalogue_profiles_path
from ..errors import ScenarioError
from ..io import csv_rows, feasible_configs, read_profiles
from ..model import Cluster, Job, Profiles, Scenario
from .generate import WEIGHT_RANGE

REFERENCE_GPU = "P100"
DUE_FACTORS = (1.2, 2.0, 10.0)
HEAVY_SHARE, HEAVY_FACTOR = 0.2, 5.0
MAX_GPUS = 8
PHILLY_COLUMNS = ("submit_time_s", "duration_s", "num_gpus")
ALIBABA_COLUMNS = ("name", "num_gpu", "gpu_spec", "pod_phase", "creation_time",
                   "deletion_time", "scheduled_time")


@dataclass
class ImportReport:
    rows: int = 0
    jobs: int = 0
    skipped_bad: int = 0
    skipped_not_run: int = 0
    skipped_no_gpu_type: int = 0
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TraceJob:
    line: int
    job_id: str
    submit: float
    duration: float
    gpus: int
    allowed: tuple[str, ...] | None  # GPU types the job may use; None = any


def _number(path: Path, line: int, row: dict, column: str, *, integer: bool = False,
            minimum: float | None = None) -> float:
    text = (row.get(column) or "").strip()
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        raise ScenarioError(path, f"expected {'an integer' if integer else 'a number'}, got "
                            f"{text!r}", line=line, field=column) from None
    if not math.isfinite(value) or (minimum is not None and value < minimum):
        raise ScenarioError(path, f"expected a value >= {minimum}, got {text!r}", line=line,
                            field=column)
    return value


def read_philly(path: Path, report: ImportReport, skip_bad: bool) -> list[TraceJob]:
    jobs = []
    for line, row in csv_rows(path, PHILLY_COLUMNS, pad_short=True):
        report.rows += 1
        try:
            submit = _number(path, line, row, "submit_time_s", minimum=0)
            duration = _number(path, line, row, "duration_s", minimum=0)
            gpus = int(_number(path, line, row, "num_gpus", integer=True, minimum=1))
        except ScenarioError:
            if not skip_bad:
                raise
            report.skipped_bad += 1
            continue
        if duration <= 0:
            report.skipped_not_run += 1
            continue
        jobs.append(TraceJob(line, f"philly-{line - 1}", submit, duration, gpus, None))
    return jobs


def read_alibaba(path: Path, report: ImportReport, skip_bad: bool) -> list[TraceJob]:
    jobs = []
    for line, row in csv_rows(path, ALIBABA_COLUMNS, pad_short=True):
        report.rows += 1
        try:
            gpus = int(_number(path, line, row, "num_gpu", integer=True, minimum=0))
            phase = (row.get("pod_phase") or "").strip()
            if gpus < 1 or phase not in ("Running", "Succeeded"):
                report.skipped_not_run += 1
                continue
            created = _number(path, line, row, "creation_time", minimum=0)
            started = _number(path, line, row, "scheduled_time", minimum=0)
            ended = _number(path, line, row, "deletion_time", minimum=0)
        except ScenarioError:
            if not skip_bad:
                raise
            report.skipped_bad += 1
            continue
        if ended <= started:
            report.skipped_not_run += 1
            continue
        spec = (row.get("gpu_spec") or "").strip()
        allowed = None
        if spec:
            allowed = tuple(dict.fromkeys(c for c in (canonical_gpu(s) for s in spec.split("|"))
                                          if c is not None))
        jobs.append(TraceJob(line, row["name"].strip() or f"pod-{line - 1}", created,
                             ended - started, gpus, allowed))
    return jobs


def import_trace(kind: str, path: str | Path, cluster: Cluster, *, limit: int | None = None,
                 start: float = 0.0, seed: int = 1, skip_bad: bool = False
                 ) -> tuple[Scenario, ImportReport]:
    path = Path(path)
    report = ImportReport()
    readers = {"philly": read_philly, "alibaba": read_alibaba}
    if kind not in readers:
        raise ScenarioError(path, f"unknown trace kind {kind!r}; expected philly or alibaba")
    trace = [j for j in readers[kind](path, report, skip_bad) if j.submit >= start]
    trace.sort(key=lambda j: (j.submit, j.line))
    catalogue = read_profiles(catalogue_profiles_path(), _with_reference(cluster))
    rng = np.random.default_rng(seed)
    table: dict[str, dict] = {}
    jobs: list[Job] = []
    for tj in trace:
        if limit is not None and len(jobs) >= limit:
            break
        g = min(tj.gpus, MAX_GPUS)
        models = sorted(m for m, c in catalogue.table.items() if (REFERENCE_GPU, g) in c)
        model = models[int(rng.integers(len(models)))]
        configs = catalogue.table[model]
        epochs = tj.duration * (tj.gpus / g) / configs[(REFERENCE_GPU, g)]
        allowed_types = set(cluster.gpu_types) if tj.allowed is None else \
            set(tj.allowed) & set(cluster.gpu_types)
        name = model if tj.allowed is None else f"{model}@{'+'.join(sorted(allowed_types))}"
        usable = {c: spe for c, spe in configs.items() if c[0] in allowed_types}
        usable = {c: usable[c] for c in feasible_configs(cluster, usable)}
        m_draw, w_draw, heavy = rng.integers(len(DUE_FACTORS)), rng.uniform(*WEIGHT_RANGE), \
            rng.random() < HEAVY_SHARE
        if not usable:
            report.skipped_no_gpu_type += 1
            continue
        table[name] = usable
        fastest = min(spe * epochs for spe in usable.values())
        submit = round(tj.submit - start, 3)
        jobs.append(Job(str(tj.job_id), submit,
                        round(submit + DUE_FACTORS[m_draw] * fastest, 3),
                        float(w_draw * (HEAVY_FACTOR if heavy else 1.0)), float(epochs), name))
    report.jobs = len(jobs)
    if report.skipped_no_gpu_type:
        report.notes.append(f"{report.skipped_no_gpu_type} job(s) allowed only GPU types the "
                            "cluster does not have")
    return Scenario(cluster, Profiles(table), tuple(jobs), name=f"{kind}-{path.stem}"), report


def _with_reference(cluster: Cluster) -> Cluster:
    """The catalogue profiles are read against every catalogued GPU type, so that the reference
    type is known even when the cluster has none of it."""
    from ..catalogue import gpu_catalogue
    from ..model import GpuType
    types = dict(cluster.gpu_types)
    for name, spec in gpu_catalogue().items():
        types.setdefault(name, GpuType(name, spec.node_power_w(spec.gpus_per_node)))
    return Cluster(types, cluster.nodes, cluster.energy_price, cluster.pue,
                   cluster.restart_overhead_s, cluster.tariff)
