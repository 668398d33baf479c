"""Parameter sweeps in the paper's style: node counts × arrival rates λ × K instances × policies.

Results go to a long-format `sweep.csv`, one row per run. Each finished run is appended at once,
so an interrupted sweep resumes where it stopped (`run_sweep` skips runs already in the file, and
drops a last line cut short); at the end the file is rewritten in canonical order, so a resumed
sweep and an uninterrupted one give the same bytes.
"""

from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..errors import AndreasError, ScenarioError
from ..io import CLUSTER_FILE, load_scenario
from ..model import Scenario
from ..policies import POLICIES, make_policy
from ..sim.generate import Template, generate_paper_style, template_dir
from .compare import BASELINES, reduction_columns, write_csv
from .runner import RunSpec, Task, run_all
from .stats import mean_ci

KEY_COLUMNS = ("nodes", "lambda", "instance", "policy", "seed")
METRIC_COLUMNS = ("total_cost", "energy_cost", "tardiness_cost", "tardy_jobs", "restarts",
                  "jobs")
CARBON_METRICS = ("emissions_kg", "carbon_cost")
SWEEP_COLUMNS = KEY_COLUMNS + METRIC_COLUMNS  # a paper-style sweep's file, as it has always been
_PARSE: dict[str, Callable[[str], object]] = {
    "nodes": int, "lambda": float, "instance": int, "scenario": str, "carbon_price": float,
    "policy": str, "seed": lambda v: None if v in ("", None) else int(v)}


@dataclass(frozen=True)
class SweepConfig:
    """One sweep's grid. Instances are either generated from a template (`nodes` x `lambdas` x
    `instances`, the paper's style) or, when `scenario_dirs` is given, those scenario
    directories (e.g. real trace windows from `andreas import-trace`). `carbon_prices` adds an
    axis: each instance is run at each price (EUR per tonne CO2eq), its carbon intensity kept."""

    template: str
    nodes: tuple[int, ...]
    lambdas: tuple[float, ...]
    instances: int
    policies: tuple[str, ...]
    seeds: tuple[int, ...]
    period: float | None
    params: dict
    scenario_dirs: tuple[str, ...] = ()
    carbon_prices: tuple[float, ...] = ()

    @property
    def key_columns(self) -> tuple[str, ...]:
        where = ("scenario",) if self.scenario_dirs else ("nodes", "lambda", "instance")
        return where + (("carbon_price",) if self.carbon_prices else ()) + ("policy", "seed")

    @property
    def metric_columns(self) -> tuple[str, ...]:
        return METRIC_COLUMNS + (CARBON_METRICS if self.carbon_prices else ())

    @property
    def columns(self) -> tuple[str, ...]:
        return self.key_columns + self.metric_columns

    def instance_keys(self) -> list[tuple]:
        """Every instance (the key's columns before the policy), in canonical order."""
        where = ([(d,) for d in self.scenario_dirs] if self.scenario_dirs else
                 [(n, lam, k) for n in self.nodes for lam in self.lambdas
                  for k in range(1, self.instances + 1)])
        if self.carbon_prices:
            return [w + (c,) for w in where for c in self.carbon_prices]
        return where

    def keys(self) -> list[tuple]:
        """Every run, in canonical order: an instance's key, then (policy, seed)."""
        return [w + (p, s) for w in self.instance_keys() for p in self.policies
                for s in (self.seeds if POLICIES[p].randomized else [None])]

    def settings(self) -> dict:
        """What must match for a resume to be valid (not the grid: it may grow)."""
        out: dict[str, object] = {"template": self.template, "period": self.period,
                                  "params": self.params, "seeds": list(self.seeds)}
        if self.scenario_dirs or self.carbon_prices:  # older sweeps' settings stay as they were
            out["columns"] = list(self.key_columns)
        return out


def read_rows(path: Path, config: SweepConfig | None = None) -> dict[tuple, dict]:
    """Rows already in `sweep.csv`, by key; a line cut short by an interruption is dropped."""
    columns = config.columns if config is not None else SWEEP_COLUMNS
    keys = config.key_columns if config is not None else KEY_COLUMNS
    rows: dict[tuple, dict] = {}
    if not path.exists():
        return rows
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != columns:
            raise AndreasError(f"{path}:1: not a sweep file of this kind (expected columns "
                               f"{','.join(columns)})")
        for row in reader:
            if None in row.values() or None in row:
                continue  # truncated or overlong line
            try:
                key = tuple(_PARSE[c](row[c]) for c in keys)
                parsed = {c: float(row[c]) for c in columns if c not in keys}
            except ValueError:
                continue
            rows[key] = {**dict(zip(keys, key)), **parsed}
    return rows


def _row(key: tuple, summary: dict, config: SweepConfig) -> dict:
    return {**dict(zip(config.key_columns, key)),
            **{c: float(summary[c]) for c in config.metric_columns}}


def instance_scenario(config: SweepConfig, template: Template | None, where: tuple,
                      loaded: dict[str, Scenario]) -> Scenario:
    """The scenario an instance key names: generated, or read (once) from its directory; at the
    key's carbon price when the sweep has that axis."""
    if config.scenario_dirs:
        directory = where[0]
        if directory not in loaded:
            loaded[directory] = load_scenario(directory)
        scenario = loaded[directory]
        source = Path(directory) / CLUSTER_FILE
    else:
        assert template is not None
        scenario = generate_paper_style(template, where[0], where[2], where[1])
        source = template_dir(config.template) / "template.yaml"
    if not config.carbon_prices:
        return scenario
    if scenario.cluster.carbon is None:
        raise ScenarioError(source, "no carbon intensity given; --carbon-prices needs one "
                            "(docs/carbon.md)", field="carbon_intensity")
    cluster = replace(scenario.cluster, carbon_price=float(where[-1]))
    return Scenario(cluster, scenario.profiles, scenario.jobs, scenario.name)


def run_sweep(config: SweepConfig, template: Template | None, out_dir: Path, *,
              workers: int = 1, on_done: Callable[[int], None] | None = None,
              max_runs: int | None = None,
              ray_address: str | None = None) -> tuple[list[dict], int]:
    """Run what is missing from `out_dir/sweep.csv`; return (all rows, runs done now).

    `template` generates the instances (None when the sweep names scenario directories).
    `max_runs` stops early after that many new runs (as an interruption would)."""
    for p in config.policies:
        make_policy(p)
    out_dir.mkdir(parents=True, exist_ok=True)
    settings_path = out_dir / "sweep-settings.json"
    if settings_path.exists():
        old = json.loads(settings_path.read_text())
        if old != json.loads(json.dumps(config.settings())):
            raise AndreasError(f"{settings_path}: this sweep was started with other settings "
                               f"({old}); use another --out to start a new one")
    path = out_dir / "sweep.csv"
    done = read_rows(path, config)
    todo = [k for k in config.keys() if k not in done]
    if max_runs is not None:
        todo = todo[:max_runs]
    scenarios: dict[tuple, Scenario] = {}
    loaded: dict[str, Scenario] = {}
    tasks = []
    for key in todo:
        where, (p, s) = key[:-2], key[-2:]
        if where not in scenarios:
            scenarios[where] = instance_scenario(config, template, where, loaded)
        tasks.append(Task(RunSpec(0, p, s), scenarios[where], config.period,
                          dict(config.params)))
    if not settings_path.exists():  # only once every instance could be built
        settings_path.write_text(json.dumps(config.settings(), indent=2) + "\n")
    # Rewrite what is valid (drops a cut-short line), then append each run as it finishes.
    _write_canonical(path, done, config)
    with path.open("a", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=config.columns)
        for key, result in zip(todo, run_all(tasks, workers, on_done, ray_address)):
            row = _row(key, result.summary, config)
            writer.writerow(_csv_values(row))
            f.flush()
            os.fsync(f.fileno())
            done[key] = row
    if max_runs is None or len(todo) < max_runs:
        _write_canonical(path, done, config)
    return [done[k] for k in config.keys() if k in done], len(todo)


def _csv_values(row: dict) -> dict:
    return {k: ("" if v is None else repr(v) if isinstance(v, float) else v)
            for k, v in row.items()}


def _write_canonical(path: Path, rows: dict[tuple, dict], config: SweepConfig) -> None:
    order = {k: i for i, k in enumerate(config.keys())}
    keys = sorted(rows, key=lambda k: (order.get(k, len(order)), str(k)))
    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=config.columns)
        writer.writeheader()
        for k in keys:
            writer.writerow(_csv_values(rows[k]))
    tmp.replace(path)


# --------------------------------------------------------------------------- aggregation
def aggregate(rows: Sequence[dict], policies: Sequence[str]) -> list[dict]:
    """Per (nodes, λ, policy): mean total cost with 95 % CI over instances × seeds, and the %
    reduction against each baseline, per instance (seed means first), averaged with CI."""
    out = []
    cells = sorted({(r["nodes"], r["lambda"]) for r in rows})
    baselines = [b for b in BASELINES if b in policies]
    for n, lam in cells:
        cell = [r for r in rows if r["nodes"] == n and r["lambda"] == lam]
        instances = sorted({r["instance"] for r in cell})
        inst_mean = {}
        for p in policies:
            for k in instances:
                xs = [r["total_cost"] for r in cell if r["policy"] == p and r["instance"] == k]
                inst_mean[(k, p)] = sum(xs) / len(xs) if xs else math.nan
        for p in policies:
            mine = [r for r in cell if r["policy"] == p]
            if not mine:
                continue
            est = mean_ci(r["total_cost"] for r in mine)
            entry = {"nodes": n, "lambda": lam, "policy": p, "runs": len(mine),
                     "total_cost_mean": est.mean, "total_cost_ci_low": est.low,
                     "total_cost_ci_high": est.high}
            entry.update(reduction_columns(inst_mean, instances, p, baselines))
            out.append(entry)
    return out


def reduction_markdown(summary: Sequence[dict], policy: str = "andreas") -> str:
    """The paper-style table: mean % cost reduction of `policy` against each baseline, one row
    per λ, one column group per node count."""
    mine = [r for r in summary if r["policy"] == policy]
    baselines = [b for b in BASELINES if mine and f"reduction_vs_{b}_pct" in mine[0]]
    nodes = sorted({r["nodes"] for r in mine})
    lambdas = sorted({r["lambda"] for r in mine})
    by = {(r["nodes"], r["lambda"]): r for r in mine}
    head = "| λ (s) | " + " | ".join(f"N={n} vs {b}" for n in nodes for b in baselines) + " |"
    lines = [f"Mean % total-cost reduction of `{policy}` (95 % CI half-width), per instance then "
             "averaged", "", head, "|---:|" + "---:|" * (len(nodes) * len(baselines))]
    for lam in lambdas:
        cells = []
        for n in nodes:
            for b in baselines:
                r = by.get((n, lam))
                if r is None or math.isnan(r[f"reduction_vs_{b}_pct"]):
                    cells.append("–")
                else:
                    half = (r[f"reduction_vs_{b}_ci_high"] - r[f"reduction_vs_{b}_ci_low"]) / 2
                    cells.append(f"{r[f'reduction_vs_{b}_pct']:.1f} (±{half:.1f})")
        lines.append(f"| {lam:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


GROUP_METRICS = ("total_cost", "energy_cost", "tardiness_cost", "tardy_jobs", "restarts")


def aggregate_groups(rows: Sequence[dict], by: Sequence[str], policies: Sequence[str],
                     metrics: Sequence[str]) -> list[dict]:
    """Mean of each metric with its 95 % CI over every run of a group (instances x seeds), one
    entry per value of the `by` columns (policy last, in the order given)."""
    groups = sorted({tuple(r[c] for c in by if c != "policy") for r in rows})
    out = []
    for g in groups:
        for p in policies:
            mine = [r for r in rows if r["policy"] == p
                    and tuple(r[c] for c in by if c != "policy") == g]
            if not mine:
                continue
            entry: dict = {**dict(zip([c for c in by if c != "policy"], g)), "policy": p,
                           "runs": len(mine)}
            for m in metrics:
                est = mean_ci(r[m] for r in mine)
                entry.update({f"{m}_mean": est.mean, f"{m}_ci_low": est.low,
                              f"{m}_ci_high": est.high})
            out.append(entry)
    return out


def group_markdown(summary: Sequence[dict], carbon: bool) -> str:
    """Per (carbon price,) policy: the mean of each cost over the runs, with the 95 % CI
    half-width of the total and of the emissions."""
    def half(r: dict, m: str) -> str:
        return f" (±{(r[f'{m}_ci_high'] - r[f'{m}_ci_low']) / 2:.3g})"

    head = ["carbon EUR/t"] if carbon else []
    head += ["policy", "runs", "total EUR", "energy EUR"] + (["carbon EUR", "kg CO2eq"]
                                                             if carbon else [])
    head += ["tardiness EUR", "tardy jobs", "restarts"]
    lines = ["Means over the instances and seeds (95 % CI half-width)", "",
             "| " + " | ".join(head) + " |",
             "| " + " | ".join("---" if h == "policy" else "---:" for h in head) + " |"]
    for r in summary:
        cells = [f"{r['carbon_price']:g}"] if carbon else []
        cells += [r["policy"], str(r["runs"]),
                  f"{r['total_cost_mean']:.3f}{half(r, 'total_cost')}",
                  f"{r['energy_cost_mean']:.3f}"]
        if carbon:
            cells += [f"{r['carbon_cost_mean']:.3f}",
                      f"{r['emissions_kg_mean']:.3f}{half(r, 'emissions_kg')}"]
        cells += [f"{r['tardiness_cost_mean']:.3f}", f"{r['tardy_jobs_mean']:.2f}",
                  f"{r['restarts_mean']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_sweep_outputs(rows: Sequence[dict], policies: Sequence[str], out_dir: Path,
                        config: SweepConfig | None = None) -> str:
    """summary.csv and the figures; returns the name of the Markdown table written. A paper-
    style sweep gets reductions.md and lines against λ and node count; a sweep of scenario
    directories or of carbon prices gets table.md (means per carbon price and policy) and,
    with carbon prices, pareto.png (emissions against cost and tardiness)."""
    from . import figures as F
    if config is not None and (config.scenario_dirs or config.carbon_prices):
        carbon = bool(config.carbon_prices)
        by = ("carbon_price", "policy") if carbon else ("policy",)
        summary = aggregate_groups(rows, by, policies,
                                   GROUP_METRICS + (CARBON_METRICS if carbon else ()))
        write_csv(out_dir / "summary.csv", summary)
        (out_dir / "table.md").write_text(group_markdown(summary, carbon), encoding="utf-8")
        if carbon:
            from .pareto import draw_pareto
            draw_pareto(summary, policies, out_dir / "pareto.png")
        return "table.md"
    summary = aggregate(rows, policies)
    write_csv(out_dir / "summary.csv", summary)
    (out_dir / "reductions.md").write_text(reduction_markdown(summary), encoding="utf-8")
    draw_sweep_lines(summary, policies, out_dir, F)
    return "reductions.md"


def sweep_line_data(summary: Sequence[dict], x: str, panel: str, y: str,
                    policies: Sequence[str]) -> dict:
    """{panel value: {policy: (xs, mean, low, high)}} for line plots with CI bands."""
    low, high = (y.replace("_mean", "_ci_low").replace("_pct", "_ci_low"),
                 y.replace("_mean", "_ci_high").replace("_pct", "_ci_high"))
    out: dict = {}
    for pv in sorted({r[panel] for r in summary}):
        out[pv] = {}
        for p in policies:
            rs = sorted((r for r in summary if r[panel] == pv and r["policy"] == p),
                        key=lambda r: r[x])
            if rs and y in rs[0]:
                out[pv][p] = tuple(np.array([r[k] for r in rs], dtype=float)
                                   for k in (x, y, low, high))
    return out


def draw_sweep_lines(summary: Sequence[dict], policies: Sequence[str], out_dir: Path, F) -> None:
    plt = F.plt
    colors = F.policy_colors(list(policies))
    specs = [("lambda", "nodes", "total_cost_mean", "mean total cost (EUR)", "cost_vs_lambda"),
             ("nodes", "lambda", "total_cost_mean", "mean total cost (EUR)", "cost_vs_nodes")]
    for b in BASELINES:
        if summary and f"reduction_vs_{b}_pct" in summary[0]:
            specs += [("lambda", "nodes", f"reduction_vs_{b}_pct", f"% cost reduction vs {b}",
                       f"reduction_vs_{b}_vs_lambda"),
                      ("nodes", "lambda", f"reduction_vs_{b}_pct", f"% cost reduction vs {b}",
                       f"reduction_vs_{b}_vs_nodes")]
    for x, panel, y, label, name in specs:
        data = sweep_line_data(summary, x, panel, y, policies)
        fig, axes = plt.subplots(1, len(data), figsize=(4.2 * len(data), 3.9), squeeze=False,
                                 layout="constrained")
        for ax, (pv, lines) in zip(axes[0], data.items()):
            for p, (xs, mean, lo, hi) in lines.items():
                if y.startswith("reduction") and p in BASELINES:
                    continue
                ax.plot(xs, mean, marker="o", color=colors[p], label=p)
                ax.fill_between(xs, lo, hi, color=colors[p], alpha=0.2)
            ax.set_title(f"{panel} = {pv:g}")
            ax.set_xlabel("λ (s)" if x == "lambda" else "nodes")
            if x == "lambda":
                ax.set_xscale("log")
            ticks = sorted({v for xs, *_ in lines.values() for v in xs})
            ax.set_xticks(ticks, [f"{v:g}" for v in ticks], rotation=30 if x == "lambda" else 0)
            ax.minorticks_off()
            if y == "total_cost_mean":
                ax.set_yscale("log")
        axes[0, 0].set_ylabel(label)
        axes[0, -1].legend(fontsize=8)
        fig.suptitle(f"{label} against {'λ' if x == 'lambda' else 'node count'}; bands: 95 % CI")
        fig.savefig(out_dir / f"{name}.png")
        plt.close(fig)
