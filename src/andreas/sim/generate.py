"""Workload generators. `generate_paper_style` follows the ANDREAS authors' generator rules.

A *template* directory holds what does not depend on the instance: `template.yaml` (a
`cluster.yaml` without `nodes`), `profiles.csv`, and `job_classes.csv`
(`job_class,profile,epochs`). The embedded `paper` template is the authors' real-cluster data.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

import numpy as np

from ..errors import ScenarioError
from ..io import feasible_configs, read_cluster, read_profiles
from ..model import Cluster, Job, Node, Profiles, Scenario

EMBEDDED_TEMPLATES = ("paper",)
WEIGHT_RANGE = (0.0253709514, 0.0443991650)  # EUR per second late, the authors' range
DEFAULT_LAMBDA = 50000.0


@dataclass(frozen=True)
class JobClass:
    name: str
    profile: str
    epochs: float


@dataclass(frozen=True)
class Template:
    cluster: Cluster  # without nodes
    profiles: Profiles
    job_classes: tuple[JobClass, ...]
    name: str


def template_dir(name_or_path: str | Path) -> Path:
    if str(name_or_path) in EMBEDDED_TEMPLATES:
        return Path(str(resources.files("andreas") / "data" / str(name_or_path)))
    return Path(name_or_path)


def load_template(name_or_path: str | Path) -> Template:
    directory = template_dir(name_or_path)
    if not directory.is_dir():
        raise ScenarioError(directory, "not a directory; expected an embedded template name "
                            f"({', '.join(EMBEDDED_TEMPLATES)}) or a template directory")
    cluster = read_cluster(directory / "template.yaml", require_nodes=False)
    profiles = read_profiles(directory / "profiles.csv", cluster)
    path = directory / "job_classes.csv"
    classes = []
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            for field in ("job_class", "profile", "epochs"):
                if field not in (reader.fieldnames or []):
                    raise ScenarioError(path, "missing column", line=1, field=field)
            for row in reader:
                if row["profile"] not in profiles.table:
                    raise ScenarioError(path, f"unknown profile {row['profile']!r}",
                                        line=reader.line_num, field="profile")
                try:
                    epochs = float(row["epochs"])
                except ValueError:
                    epochs = -1.0
                if not epochs > 0:
                    raise ScenarioError(path, f"expected epochs > 0, got {row['epochs']!r}",
                                        line=reader.line_num, field="epochs")
                classes.append(JobClass(row["job_class"], row["profile"], epochs))
    except FileNotFoundError:
        raise ScenarioError(path, "file not found") from None
    if not classes:
        raise ScenarioError(path, "expected at least one job class")
    return Template(cluster, profiles, tuple(classes), directory.name)


ARRIVAL_PATTERNS = ("poisson", "bursts", "daily")
DAY_S = 86400.0


@dataclass(frozen=True)
class WorkloadShape:
    """How a generated workload departs from the authors' rules (the defaults are theirs).

    - `due_factor` (lo, hi): due date = submit + U(lo, hi) x the job's fastest run time on the
      cluster; None keeps the paper's rule, submit + U(fastest, slowest run time).
    - `weight_range` (lo, hi): tardiness weight ~ U(lo, hi) EUR per second late.
    - `arrivals`: "poisson" (exponential gaps, mean lambda/N); "bursts" (groups of
      `burst_size` jobs within a minute, group gaps exponential with the same mean rate);
      "daily" (Poisson with a rate that swings +-80 % over a day, peak at noon).
    - `node_types`: the GPU types of nodes 1, 2, ... cycled (default: the template's, in order).
    """

    lam: float = DEFAULT_LAMBDA
    jobs_per_node: int = 10
    due_factor: tuple[float, float] | None = None
    weight_range: tuple[float, float] = WEIGHT_RANGE
    arrivals: str = "poisson"
    burst_size: int = 10
    node_types: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not self.lam > 0:
            raise ValueError("lambda must be > 0")
        if self.jobs_per_node < 1:
            raise ValueError("jobs per node must be >= 1")
        if self.due_factor is not None and not 0 < self.due_factor[0] <= self.due_factor[1]:
            raise ValueError(f"due factor: expected 0 < lo <= hi, got {self.due_factor}")
        if not 0 <= self.weight_range[0] <= self.weight_range[1]:
            raise ValueError(f"weights: expected 0 <= lo <= hi, got {self.weight_range}")
        if self.arrivals not in ARRIVAL_PATTERNS:
            raise ValueError(f"arrivals: expected one of {', '.join(ARRIVAL_PATTERNS)}, got "
                             f"{self.arrivals!r}")
        if self.burst_size < 1:
            raise ValueError("burst size must be >= 1")


def paper_nodes(cluster: Cluster, n_nodes: int,
                node_types: tuple[str, ...] | None = None) -> tuple[Node, ...]:
    """Node i gets type types[i mod k] with the most GPUs its power list covers."""
    if node_types is None:
        types = list(cluster.gpu_types.values())
    else:
        unknown = [t for t in node_types if t not in cluster.gpu_types]
        if unknown or not node_types:
            raise ValueError(f"node types: {', '.join(unknown) or 'none given'} not in the "
                             f"template (expected some of {', '.join(cluster.gpu_types)})")
        types = [cluster.gpu_types[t] for t in node_types]
    return tuple(Node(f"n{i + 1:02d}-{t.name.lower()}", t.name, len(t.node_power_w))
                 for i, t in ((i, types[i % len(types)]) for i in range(n_nodes)))


def arrival_times(rng: np.random.Generator, n_jobs: int, mean_gap: float, pattern: str,
                  burst_size: int = 10) -> np.ndarray:
    """`n_jobs` submit times from 0, sorted, at a mean rate of one per `mean_gap` seconds."""
    if pattern == "poisson":
        gaps = rng.exponential(mean_gap, size=n_jobs - 1)
        return np.concatenate(([0.0], np.cumsum(gaps)))
    if pattern == "bursts":
        n_bursts = -(-n_jobs // burst_size)
        starts = np.concatenate(([0.0], np.cumsum(rng.exponential(
            mean_gap * burst_size, size=n_bursts - 1))))
        within = rng.uniform(0.0, 60.0, size=n_jobs)
        within[0] = 0.0
        times = np.repeat(starts, burst_size)[:n_jobs] + within
        return np.sort(times)
    # daily: thinning of a Poisson process at the peak rate
    peak = 1.8 / mean_gap
    times = [0.0]
    t = 0.0
    while len(times) < n_jobs:
        t += rng.exponential(1.0 / peak)
        rate = (1.0 + 0.8 * np.sin(2 * np.pi * (t / DAY_S - 0.25))) / mean_gap
        if rng.random() * peak < rate:
            times.append(t)
    return np.array(times)


def generate_paper_style(template: Template, n_nodes: int, seed: int,
                         lam: float = DEFAULT_LAMBDA, jobs_per_node: int = 10,
                         restart_overhead_s: float | None = None) -> Scenario:
    """The authors' rules: jobs_per_node·N jobs plus one at t = 0, exponential inter-arrival
    times with mean λ/N, a uniformly drawn job class, due date = submit + U(t_min, t_max) over the
    allowed configurations, weight ~ U(0.0254, 0.0444) EUR/s."""
    return generate(template, n_nodes, seed, WorkloadShape(lam, jobs_per_node),
                    restart_overhead_s)


def gang_fits(cluster: Cluster, config: tuple[str, int, int]) -> bool:
    """Whether `cluster` has enough nodes of a gang configuration's type with its GPUs."""
    return bool(feasible_configs(cluster, [config]))


def generate(template: Template, n_nodes: int, seed: int, shape: WorkloadShape = WorkloadShape(),
             restart_overhead_s: float | None = None) -> Scenario:
    """A workload of `shape` on `n_nodes` nodes of `template`; with the default shape, the
    authors' rules (`generate_paper_style`), draw for draw."""
    if n_nodes < 1:
        raise ValueError("n_nodes must be >= 1")
    base = template.cluster
    overhead = base.restart_overhead_s if restart_overhead_s is None else restart_overhead_s
    if overhead < 0:
        raise ValueError("restart overhead must be >= 0")
    cluster = replace(base, nodes=paper_nodes(base, n_nodes, shape.node_types),
                      restart_overhead_s=overhead)  # price, carbon and the rest as given
    rng = np.random.default_rng(seed)
    n_jobs = shape.jobs_per_node * n_nodes + 1
    submits = arrival_times(rng, n_jobs, shape.lam / n_nodes, shape.arrivals, shape.burst_size)
    classes = rng.integers(0, len(template.job_classes), size=n_jobs)
    due_u = rng.random(n_jobs)
    weights = rng.uniform(*shape.weight_range, size=n_jobs)
    jobs = []
    for i in range(n_jobs):
        jc = template.job_classes[classes[i]]
        configs = template.profiles.configs(jc.profile)
        times = [configs[c] * jc.epochs for c in feasible_configs(cluster, configs)] + [
            spe * jc.epochs for c, spe in template.profiles.gangs.get(jc.profile, {}).items()
            if gang_fits(cluster, c)]
        if not times:
            raise ScenarioError(template.name, f"job class {jc.name} has no allowed "
                                f"configuration on a {n_nodes}-node cluster")
        t_min, t_max = min(times), max(times)
        submit = float(submits[i])
        if shape.due_factor is None:
            due = submit + t_min + float(due_u[i]) * (t_max - t_min)
        else:
            lo, hi = shape.due_factor
            due = submit + (lo + float(due_u[i]) * (hi - lo)) * t_min
        jobs.append(Job(f"job{i:04d}", round(submit, 3), round(due, 3), float(weights[i]),
                        jc.epochs, jc.profile))
    used = {jc.profile for jc in template.job_classes}
    given = template.profiles
    profiles = Profiles({p: c for p, c in given.table.items() if p in used},
                        power={p: c for p, c in given.power.items() if p in used},
                        startup={p: c for p, c in given.startup.items() if p in used},
                        gangs={p: {c: spe for c, spe in cs.items() if gang_fits(cluster, c)}
                               for p, cs in given.gangs.items() if p in used},
                        spread_slowdown={p: c for p, c in given.spread_slowdown.items()
                                         if p in used})
    return Scenario(cluster, profiles, tuple(jobs), name=f"{template.name}-n{n_nodes}-s{seed}")
