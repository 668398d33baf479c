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
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..errors import AndreasError
from ..model import Scenario
from ..policies import POLICIES, make_policy
from ..sim.generate import Template, generate_paper_style
from .compare import BASELINES, reduction_columns, write_csv
from .runner import RunSpec, Task, run_all
from .stats import mean_ci

KEY_COLUMNS = ("nodes", "lambda", "instance", "policy", "seed")
METRIC_COLUMNS = ("total_cost", "energy_cost", "tardiness_cost", "tardy_jobs", "restarts",
                  "jobs")
SWEEP_COLUMNS = KEY_COLUMNS + METRIC_COLUMNS


@dataclass(frozen=True)
class SweepConfig:
    template: str
    nodes: tuple[int, ...]
    lambdas: tuple[float, ...]
    instances: int
    policies: tuple[str, ...]
    seeds: tuple[int, ...]
    period: float | None
    params: dict

    def keys(self) -> list[tuple]:
        """Every run, in canonical order: (nodes, lambda, instance, policy, seed)."""
        return [(n, lam, k, p, s) for n in self.nodes for lam in self.lambdas
                for k in range(1, self.instances + 1) for p in self.policies
                for s in (self.seeds if POLICIES[p].randomized else [None])]

    def settings(self) -> dict:
        """What must match for a resume to be valid (not the grid: it may grow)."""
        return {"template": self.template, "period": self.period, "params": self.params,
                "seeds": list(self.seeds)}


def _key(row: dict) -> tuple:
    seed = row["seed"]
    return (int(row["nodes"]), float(row["lambda"]), int(row["instance"]), row["policy"],
            None if seed in ("", None) else int(seed))


def read_rows(path: Path) -> dict[tuple, dict]:
    """Rows already in `sweep.csv`, by key; a line cut short by an interruption is dropped."""
    rows: dict[tuple, dict] = {}
    if not path.exists():
        return rows
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != SWEEP_COLUMNS:
            raise AndreasError(f"{path}:1: not a sweep file (expected columns "
                               f"{','.join(SWEEP_COLUMNS)})")
        for row in reader:
            if None in row.values() or None in row:
                continue  # truncated or overlong line
            try:
                key = _key(row)
                parsed = {c: float(row[c]) for c in METRIC_COLUMNS}
            except ValueError:
                continue
            rows[key] = {**dict(zip(KEY_COLUMNS, key)), **parsed}
    return rows


def _row(key: tuple, summary: dict) -> dict:
    return {**dict(zip(KEY_COLUMNS, key)), **{c: float(summary[c]) for c in METRIC_COLUMNS}}


def run_sweep(config: SweepConfig, template: Template, out_dir: Path, *, workers: int = 1,
              on_done: Callable[[int], None] | None = None,
              max_runs: int | None = None,
              ray_address: str | None = None) -> tuple[list[dict], int]:
    """Run what is missing from `out_dir/sweep.csv`; return (all rows, runs done now).

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
    else:
        settings_path.write_text(json.dumps(config.settings(), indent=2) + "\n")
    path = out_dir / "sweep.csv"
    done = read_rows(path)
    todo = [k for k in config.keys() if k not in done]
    if max_runs is not None:
        todo = todo[:max_runs]
    scenarios: dict[tuple, Scenario] = {}
    tasks = []
    for key in todo:
        n, lam, k, p, s = key
        if (n, lam, k) not in scenarios:
            sc = generate_paper_style(template, n, k, lam)
            scenarios[(n, lam, k)] = sc
        tasks.append(Task(RunSpec(0, p, s), scenarios[(n, lam, k)], config.period,
                          dict(config.params)))
    # Rewrite what is valid (drops a cut-short line), then append each run as it finishes.
    _write_canonical(path, done, config)
    with path.open("a", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=SWEEP_COLUMNS)
        for key, result in zip(todo, run_all(tasks, workers, on_done, ray_address)):
            row = _row(key, result.summary)
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
        writer = csv.DictWriter(f, fieldnames=SWEEP_COLUMNS)
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


def write_sweep_outputs(rows: Sequence[dict], policies: Sequence[str], out_dir: Path) -> None:
    from . import figures as F
    summary = aggregate(rows, policies)
    write_csv(out_dir / "summary.csv", summary)
    (out_dir / "reductions.md").write_text(reduction_markdown(summary), encoding="utf-8")
    draw_sweep_lines(summary, policies, out_dir, F)


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
