"""Workload generators. `generate_paper_style` follows the ANDREAS authors' generator rules.

A *template* directory holds what does not depend on the instance: `template.yaml` (a
`cluster.yaml` without `nodes`), `profiles.csv`, and `job_classes.csv`
(`job_class,profile,epochs`). The embedded `paper` template is the authors' real-cluster data.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
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


def paper_nodes(cluster: Cluster, n_nodes: int) -> tuple[Node, ...]:
    """Node i gets type types[i mod k] with the most GPUs its power list covers."""
    types = list(cluster.gpu_types.values())
    return tuple(Node(f"n{i + 1:02d}-{t.name.lower()}", t.name, len(t.node_power_w))
                 for i, t in ((i, types[i % len(types)]) for i in range(n_nodes)))


def generate_paper_style(template: Template, n_nodes: int, seed: int,
                         lam: float = DEFAULT_LAMBDA, jobs_per_node: int = 10,
                         restart_overhead_s: float | None = None) -> Scenario:
    """The authors' rules: jobs_per_node·N jobs plus one at t = 0, exponential inter-arrival
    times with mean λ/N, a uniformly drawn job class, due date = submit + U(t_min, t_max) over the
    allowed configurations, weight ~ U(0.0254, 0.0444) EUR/s."""
    if n_nodes < 1:
        raise ValueError("n_nodes must be >= 1")
    if lam <= 0:
        raise ValueError("lambda must be > 0")
    base = template.cluster
    overhead = base.restart_overhead_s if restart_overhead_s is None else restart_overhead_s
    if overhead < 0:
        raise ValueError("restart overhead must be >= 0")
    cluster = Cluster(base.gpu_types, paper_nodes(base, n_nodes), base.energy_price, base.pue,
                      overhead, base.tariff)
    rng = np.random.default_rng(seed)
    n_jobs = jobs_per_node * n_nodes + 1
    gaps = rng.exponential(lam / n_nodes, size=n_jobs - 1)
    submits = np.concatenate(([0.0], np.cumsum(gaps)))
    classes = rng.integers(0, len(template.job_classes), size=n_jobs)
    due_u = rng.random(n_jobs)
    weights = rng.uniform(*WEIGHT_RANGE, size=n_jobs)
    jobs = []
    for i in range(n_jobs):
        jc = template.job_classes[classes[i]]
        configs = template.profiles.configs(jc.profile)
        times = [configs[c] * jc.epochs for c in feasible_configs(cluster, configs)]
        if not times:
            raise ScenarioError(template.name, f"job class {jc.name} has no allowed "
                                f"configuration on a {n_nodes}-node cluster")
        t_min, t_max = min(times), max(times)
        submit = float(submits[i])
        jobs.append(Job(f"job{i:04d}", round(submit, 3),
                        round(submit + t_min + float(due_u[i]) * (t_max - t_min), 3),
                        float(weights[i]), jc.epochs, jc.profile))
    used = {jc.profile for jc in template.job_classes}
    profiles = Profiles({p: c for p, c in template.profiles.table.items() if p in used})
    return Scenario(cluster, profiles, tuple(jobs), name=f"{template.name}-n{n_nodes}-s{seed}")
