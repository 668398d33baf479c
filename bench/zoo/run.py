"""Run the benchmark zoo: every family of bench/zoo/families.yaml, every policy, one table.

    python bench/zoo/run.py --out bench/zoo.md            # `make zoo`
    python bench/zoo/run.py --families bursts,tight-mixed --policies greedy,andreas \
        --variant 'andreas-nohold=andreas:steps=defer,power_limits' --out /tmp/zoo.md

Each instance's regret of a policy is its total cost (energy + tardiness) divided by the
cheapest total of the *reference* policies on that instance (a randomised policy's cost is its
mean over the seeds). Per family: the geometric mean of regret over the instances with a 95 %
CI (Student t on log-regret), the mean total cost, energy and tardy jobs. Overall: the mean of
the families' log-regrets (every family counts the same), exponentiated. `runs.csv` beside the
table keeps every run; `--reuse LABELS` takes those labels' rows from an earlier runs.csv
instead of running them again (for baselines that a change does not touch).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import math
import sys
import time
from pathlib import Path

import yaml

from andreas.experiments.runner import RunSpec, Task, default_workers, run_all
from andreas.experiments.stats import mean_ci
from andreas.io import read_cluster
from andreas.policies import POLICIES
from andreas.policies.registry import parse_assignments
from andreas.sim.generate import WorkloadShape, generate, load_template
from andreas.sim.traces import import_trace

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ("fifo", "edf", "ps", "wspt", "atc", "greedy", "andreas-paper", "andreas")
FIELDS = ("family", "instance", "label", "seed", "total", "energy", "tardiness", "tardy",
          "restarts", "sched_s")


def build_family(name: str, recipe: dict, instances: int) -> list:
    """The scenarios of one family, built as `andreas generate` / `import-trace` do."""
    if "trace" in recipe:
        cluster = read_cluster(ROOT / recipe["cluster"])
        path = (ROOT / recipe["file"]).resolve()
        out = []
        for start in recipe["starts"][:instances]:
            scenario, _ = import_trace(recipe["trace"], path, cluster, limit=recipe["limit"],
                                       start=float(start), seed=1, skip_bad=True,
                                       gangs=bool(recipe.get("gangs", False)))
            out.append(scenario)
        return out
    template = load_template(recipe["template"] if recipe["template"] == "paper"
                             else ROOT / recipe["template"])
    shape = WorkloadShape(
        lam=float(recipe["lambda"]), jobs_per_node=int(recipe.get("jobs_per_node", 10)),
        due_factor=tuple(recipe["due_factor"]) if "due_factor" in recipe else None,
        weight_range=tuple(recipe.get("weights", WorkloadShape().weight_range)),
        arrivals=recipe.get("arrivals", "poisson"),
        node_types=tuple(recipe["node_types"]) if "node_types" in recipe else None)
    return [generate(template, int(recipe["nodes"]), seed, shape,
                     recipe.get("restart_overhead_s"))
            for seed in range(1, instances + 1)]


def parse_variant(text: str) -> tuple[str, str, dict]:
    """'label=policy:key=value;key=value' -> (label, policy, options); a value may hold commas."""
    label, _, rest = text.partition("=")
    policy, _, opts = rest.partition(":")
    if not label or policy not in POLICIES:
        raise SystemExit(f"--variant: expected LABEL=POLICY[:key=value;...], got {text!r}")
    return label, policy, parse_assignments([o for o in opts.split(";") if o], policy)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default="", help="comma-separated; default all")
    ap.add_argument("--families-file", type=Path, default=ROOT / "bench" / "zoo" / "families.yaml",
                    help="the recipes (default: bench/zoo/families.yaml)")
    ap.add_argument("--instances", type=int, default=5)
    ap.add_argument("--policies", default=",".join(REFERENCE))
    ap.add_argument("--variant", action="append", default=[],
                    help="LABEL=POLICY:key=value;... (repeatable); reported, not a reference")
    ap.add_argument("--seeds", default="1", help="seeds of randomised policies, e.g. 1,2")
    ap.add_argument("--workers", type=int, default=default_workers())
    ap.add_argument("--reuse", default="", help="labels whose rows come from --runs-in")
    ap.add_argument("--runs-in", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "zoo.md")
    args = ap.parse_args(argv)

    spec = yaml.safe_load(args.families_file.read_text())["families"]
    names = [f for f in args.families.split(",") if f] or list(spec)
    unknown = [f for f in names if f not in spec]
    if unknown:
        raise SystemExit(f"--families: unknown {', '.join(unknown)}; expected {', '.join(spec)}")
    labels = {p: (p, {}) for p in args.policies.split(",") if p}
    for v in args.variant:
        label, policy, options = parse_variant(v)
        labels[label] = (policy, options)
    reference = [p for p in labels if p in REFERENCE]
    seeds = [int(s) for s in args.seeds.split(",")]
    reuse = {x for x in args.reuse.split(",") if x}
    old = []
    if reuse:
        runs_in = args.runs_in or args.out.with_suffix(".runs.csv")
        old = [r for r in csv.DictReader(runs_in.open()) if r["label"] in reuse
               and r["family"] in names]

    instances, tasks, keys = {}, [], []
    for fam in names:
        t0 = time.perf_counter()
        instances[fam] = build_family(fam, spec[fam], args.instances)
        print(f"{fam}: {len(instances[fam])} instances, "
              f"{sum(len(s.jobs) for s in instances[fam])} jobs "
              f"({time.perf_counter() - t0:.1f} s to build)", file=sys.stderr, flush=True)
        for i, scenario in enumerate(instances[fam]):
            for label, (policy, options) in labels.items():
                if label in reuse:
                    continue
                for seed in (seeds if POLICIES[policy].randomized else [None]):
                    tasks.append(Task(RunSpec(i, policy, seed), scenario, None, options))
                    keys.append((fam, i, label, seed))
    print(f"{len(tasks)} runs on {args.workers} workers", file=sys.stderr, flush=True)
    rows = [dict(r) for r in old]
    t0 = time.perf_counter()
    done = [0]

    def tick(_i: int) -> None:
        done[0] += 1
        if done[0] % 25 == 0 or done[0] == len(tasks):
            print(f"  {done[0]}/{len(tasks)} runs, {time.perf_counter() - t0:.0f} s",
                  file=sys.stderr, flush=True)

    for (fam, i, label, seed), result in zip(keys, run_all(tasks, args.workers, tick)):
        s = result.summary
        rows.append(dict(family=fam, instance=i, label=label, seed="" if seed is None else seed,
                         total=s["total_cost"], energy=s["energy_cost"],
                         tardiness=s["tardiness_cost"], tardy=s["tardy_jobs"],
                         restarts=s["restarts"], sched_s=s["scheduler_seconds"]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    runs_out = args.out.with_suffix(".runs.csv")
    with runs_out.open("w", newline="") as f:
        w = csv.DictWriter(f, FIELDS)
        w.writeheader()
        w.writerows(rows)
    table = summarise(rows, names, list(labels), reference)
    write_markdown(table, names, list(labels), reference, args, len(tasks),
                   time.perf_counter() - t0, len(old))
    write_figure(table, names, list(labels), args.out.with_suffix(".png"))
    print(f"wrote {args.out}, {runs_out}, {args.out.with_suffix('.png')}", file=sys.stderr)
    return 0


def summarise(rows: list[dict], families: list[str], labels: list[str],
              reference: list[str]) -> dict:
    """(family, label) -> statistics; (None, label) -> overall."""
    cost: dict[tuple, list[dict]] = {}
    for r in rows:
        cost.setdefault((r["family"], int(r["instance"]), r["label"]), []).append(r)

    def mean(rs, key):
        return sum(float(r[key]) for r in rs) / len(rs)

    out: dict = {}
    family_logs: dict[str, list[float]] = {lab: [] for lab in labels}
    for fam in families:
        n = 1 + max(int(r["instance"]) for r in rows if r["family"] == fam)
        best = [min(mean(cost[(fam, i, ref)], "total") for ref in reference
                    if (fam, i, ref) in cost) for i in range(n)]
        empty = [i for i, b in enumerate(best) if b <= 0]
        if empty:  # regret divides by the best cost
            raise SystemExit(f"family {fam!r}, instance {empty[0]}: the best policy costs "
                             f"{best[empty[0]]:g} EUR, and regret needs a positive cost (an "
                             f"empty trace window? check its starts and limit)")
        for lab in labels:
            runs = [cost.get((fam, i, lab)) for i in range(n)]
            if any(r is None for r in runs):
                continue
            logs = [math.log(mean(rs, "total") / b) for rs, b in zip(runs, best)]
            est = mean_ci(logs)
            out[(fam, lab)] = dict(
                regret=math.exp(est.mean), low=math.exp(est.low), high=math.exp(est.high),
                worst=math.exp(max(logs)), total=sum(mean(rs, "total") for rs in runs) / n,
                energy=sum(mean(rs, "energy") for rs in runs) / n,
                tardy=sum(mean(rs, "tardy") for rs in runs) / n,
                sched=sum(mean(rs, "sched_s") for rs in runs) / n)
            family_logs[lab].append(est.mean)
    for lab in labels:
        if len(family_logs[lab]) == len(families):
            est = mean_ci(family_logs[lab])
            out[(None, lab)] = dict(regret=math.exp(est.mean), low=math.exp(est.low),
                                    high=math.exp(est.high),
                                    worst=max(out[(f, lab)]["regret"] for f in families))
    return out


def shown(path: Path) -> str:
    """`path` relative to the repository when inside it (as the tables name files)."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def notes_for(families_file: Path) -> Path:
    """The hand-written notes appended to a table kept in bench/: bench/zoo/notes.md for the
    zoo's families.yaml, bench/zoo/NAME-notes.md for NAME.yaml (the hold-out set)."""
    stem = families_file.stem
    return families_file.with_name("notes.md" if stem == "families" else f"{stem}-notes.md")


def write_markdown(table: dict, families: list[str], labels: list[str], reference: list[str],
                   args, n_runs: int, seconds: float, reused: int) -> None:
    day = dt.date.today().isoformat()
    lines = [f"# Benchmark zoo ({day})", "",
             f"Written by `python bench/zoo/run.py` ({n_runs} runs in {seconds:.0f} s on "
             f"{args.workers} workers" + (f", {reused} taken from an earlier runs.csv" if reused
                                          else "") +
             f"; seeds of randomised policies: {args.seeds}). Regret = a "
             f"policy's total cost / the cheapest of {', '.join(reference)} on the same "
             "instance; geometric means with 95 % CI over instances, overall over families "
             f"(each counts the same). Families: {shown(args.families_file)}.", "",
             "## Overall", "", "| policy | regret (95 % CI) | worst family |",
             "|---|---|---|"]
    for lab in sorted(labels, key=lambda lab: table.get((None, lab), {}).get("regret", 1e9)):
        o = table.get((None, lab))
        if o:
            lines.append(f"| {lab} | {o['regret']:.3f} ({o['low']:.3f}-{o['high']:.3f}) | "
                         f"{o['worst']:.3f} |")
    lines += ["", "## Regret per family (geometric mean over instances)", "",
              "| family | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
    for fam in families:
        cells = [f"{table[(fam, lab)]['regret']:.3f}" if (fam, lab) in table else "-"
                 for lab in labels]
        lines.append(f"| {fam} | " + " | ".join(cells) + " |")
    lines += ["", "## Mean total cost (EUR), energy (EUR) and tardy jobs per family", "",
              "| family | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
    for fam in families:
        cells = []
        for lab in labels:
            c = table.get((fam, lab))
            cells.append("-" if c is None else
                         f"{c['total']:.2f} ({c['energy']:.2f}, {c['tardy']:.1f})")
        lines.append(f"| {fam} | " + " | ".join(cells) + " |")
    lines += ["", "## Worst instance regret and mean decision time (s in the policy per run)",
              "", "| family | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
    for fam in families:
        cells = [f"{table[(fam, lab)]['worst']:.2f} / {table[(fam, lab)]['sched']:.1f}"
                 if (fam, lab) in table else "-" for lab in labels]
        lines.append(f"| {fam} | " + " | ".join(cells) + " |")
    notes = notes_for(args.families_file)
    if args.out.resolve().parent == (ROOT / "bench").resolve() and notes.exists():
        lines += ["", notes.read_text().rstrip()]
    args.out.write_text("\n".join(lines) + "\n")


def write_figure(table: dict, families: list[str], labels: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    grid = np.array([[table.get((f, lab), {}).get("regret", np.nan) for lab in labels]
                     for f in families + [None]])
    fig, ax = plt.subplots(figsize=(1.1 * len(labels) + 3, 0.45 * len(families) + 2))
    # the scale ends at regret 2: the differences that matter among good policies are small
    im = ax.imshow(np.log10(grid), cmap="RdYlGn_r", vmin=0, vmax=math.log10(2), aspect="auto")
    ax.set_xticks(range(len(labels)), labels, rotation=35, ha="right")
    ax.set_yticks(range(len(families) + 1), families + ["overall"])
    for (r, c), v in np.ndenumerate(grid):
        if not np.isnan(v):
            ax.text(c, r, f"{v:.2f}", ha="center", va="center", fontsize=7)
    fig.colorbar(im, ax=ax, label="log10 regret (cost / best policy's); 0.3 = 2x and above")
    ax.set_title("Benchmark zoo: geometric-mean regret per family")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
