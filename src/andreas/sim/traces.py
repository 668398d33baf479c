"""Turn production traces into scenario directories: Microsoft Philly and Alibaba PAI (2023).

The cluster comes from the user's cluster.yaml (catalogue GPU names get the catalogue's power);
profiles are the catalogue's Gavel measurements for the cluster's GPU types; the workload comes
from the trace:

- each job's work is its traced duration at its traced GPU count on the reference GPU type
  (P100: Philly ran mostly P100/P40-class GPUs; Alibaba does not say which GPU a pod got),
  turned into epochs (1000 steps each) through its model's profile. A job over 8 GPUs is a gang
  of its real size: the fewest n nodes over which its G GPUs spread evenly (`gang_shape`), each
  epoch n x e(n) times as fast as on one node, e(n) = e2 ^ log2(n) with e2 the median 2-node
  efficiency Sia measured on 8-GPU nodes over Ethernet (`gang_scaling.csv`); `gangs=False`
  keeps the older approximation, an 8-GPU job doing proportionally more work;
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

from ..catalogue import canonical_gpu, catalogue_profiles_path, gang_scaling_path
from ..errors import ScenarioError
from ..io import csv_rows, feasible_configs, read_profiles
from ..model import Cluster, Job, Profiles, Scenario
from .generate import WEIGHT_RANGE, gang_fits

REFERENCE_GPU = "P100"
DUE_FACTORS = (1.2, 2.0, 10.0)
HEAVY_SHARE, HEAVY_FACTOR = 0.2, 5.0
MAX_GPUS = 8
GANG_NETWORK = "rtx2080ti"  # Sia's 8-GPU nodes on commodity Ethernet, as Philly's were
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
    gangs: int = 0  # jobs kept as gangs over several nodes
    skipped_no_room: int = 0  # gangs with more nodes than the cluster has of any allowed type
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


def two_node_efficiency(network: str = GANG_NETWORK) -> float:
    """The median 2-node efficiency of the models Sia measured on `network`'s 8-GPU nodes."""
    values = [float(row["efficiency"]) for _, row in csv_rows(
        gang_scaling_path(), ("gpu_type", "model", "nodes", "efficiency"))
        if row["gpu_type"] == network and row["nodes"] == "2"]
    return float(np.median(values))


def gang_shape(gpus: int, sizes: set[int]) -> tuple[int, int]:
    """(nodes, GPUs per node) of a job of `gpus` GPUs on nodes of at most 8: the fewest nodes
    over which its GPUs spread evenly in a per-node count of `sizes` (those the profiles
    measured: 16 -> 2 x 8, 12 -> 3 x 4), else full 8-GPU nodes (20 -> 3 x 8)."""
    for nodes in range(math.ceil(gpus / MAX_GPUS), gpus + 1):
        if gpus % nodes == 0 and gpus // nodes in sizes:
            return nodes, gpus // nodes
    return math.ceil(gpus / MAX_GPUS), MAX_GPUS


def import_trace(kind: str, path: str | Path, cluster: Cluster, *, limit: int | None = None,
                 start: float = 0.0, seed: int = 1, skip_bad: bool = False,
                 gangs: bool = True) -> tuple[Scenario, ImportReport]:
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
    gang_table: dict[str, dict] = {}
    jobs: list[Job] = []
    e2 = two_node_efficiency() if gangs else 1.0
    sizes = {g for c in catalogue.table.values() for t, g in c if t == REFERENCE_GPU}
    for tj in trace:
        if limit is not None and len(jobs) >= limit:
            break
        nodes, g = gang_shape(tj.gpus, sizes) if gangs and tj.gpus > MAX_GPUS \
            else (1, min(tj.gpus, MAX_GPUS))
        models = sorted(m for m, c in catalogue.table.items() if (REFERENCE_GPU, g) in c)
        model = models[int(rng.integers(len(models)))]
        configs = catalogue.table[model]
        if nodes > 1:
            job = _gang_job(tj, cluster, catalogue.table[model], nodes, g, e2 ** math.log2(nodes),
                            rng, start, f"{model}x{nodes}", gang_table, report)
            if job is not None:
                jobs.append(job)
            continue
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
    if report.gangs:
        report.notes.append(f"{report.gangs} job(s) over {MAX_GPUS} GPUs kept as gangs over "
                            f"several nodes (docs/gangs.md)")
    if report.skipped_no_room:
        report.notes.append(f"{report.skipped_no_room} gang(s) skipped: the cluster has too few "
                            f"nodes of any type they may use")
    return Scenario(cluster, Profiles(table, gangs=gang_table), tuple(jobs),
                    name=f"{kind}-{path.stem}"), report


def _gang_job(tj: TraceJob, cluster: Cluster, configs, nodes: int, g: int, efficiency: float,
              rng, start: float, name: str, gang_table: dict, report: ImportReport
              ) -> Job | None:
    """A trace job over several nodes as a gang of `nodes` x `g` GPUs: each epoch takes the
    one-node time on `g` GPUs over nodes x `efficiency`, on every type of the cluster with
    enough nodes of at least `g` GPUs (the draws are made as for other jobs, so the seeded
    sequence is the same whatever is skipped)."""
    m_draw, w_draw, heavy = rng.integers(len(DUE_FACTORS)), rng.uniform(*WEIGHT_RANGE), \
        rng.random() < HEAVY_SHARE
    allowed = set(cluster.gpu_types) if tj.allowed is None else set(tj.allowed)
    speedup = nodes * efficiency
    usable = {}
    for (gpu_type, gpus), spe in configs.items():
        if gpus == g and gpu_type in allowed and gang_fits(cluster, (gpu_type, g, nodes)):
            usable[(gpu_type, g, nodes)] = spe / speedup
    if not usable:
        report.skipped_no_room += 1
        return None
    report.gangs += 1
    epochs = tj.duration / (configs[(REFERENCE_GPU, g)] / speedup)
    gang_table[name] = usable
    fastest = min(spe * epochs for spe in usable.values())
    submit = round(tj.submit - start, 3)
    return Job(str(tj.job_id), submit, round(submit + DUE_FACTORS[m_draw] * fastest, 3),
               float(w_draw * (HEAVY_FACTOR if heavy else 1.0)), float(epochs), name)


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
