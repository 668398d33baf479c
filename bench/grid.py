"""The 12-cell grid that docs/beyond-the-paper.md measures policy changes on.

Paper instances on 5 and 10 nodes × λ = 1000, 2000, 3000, 4000, 5000, 10000 s, instance seeds
A-B, policy seed 1. Writes every run's total cost to a JSON file; with --against, prints for
each cell the mean cost over instances, the other file's, their ratio, and the mean of the
cell ratios (the number the docs report as "after ÷ before").

    python bench/grid.py --policies greedy,andreas --seeds 1-5 --out before.json
    ...change something...
    python bench/grid.py --policies greedy,andreas --seeds 1-5 --out after.json \\
        --against before.json
    python bench/grid.py --policies andreas --seeds 1-5 --out off.json \\
        --params '{"consolidate.margin": null}' --against after.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from multiprocessing import Pool
from pathlib import Path

from andreas.cli import parse_seeds
from andreas.policies import make_policy
from andreas.sim.engine import simulate
from andreas.sim.generate import generate_paper_style, load_template

NODES = (5, 10)
LAMBDAS = (1000.0, 2000.0, 3000.0, 4000.0, 5000.0, 10000.0)


def _run(task: tuple[int, float, int, str, str]) -> tuple[str, float]:
    nodes, lam, seed, policy, params = task
    scenario = generate_paper_style(load_template("paper"), nodes, seed, lam)
    result = simulate(scenario, make_policy(policy, seed=1, **json.loads(params)))
    return f"{nodes}|{lam}|{seed}|{policy}", result.summary["total_cost"]


def cell_means(costs: dict[str, float]) -> dict[tuple[str, int, float], float]:
    cells: dict[tuple[str, int, float], list[float]] = defaultdict(list)
    for key, cost in costs.items():
        nodes, lam, _, policy = key.split("|")
        cells[(policy, int(nodes), float(lam))].append(cost)
    return {cell: statistics.mean(v) for cell, v in cells.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policies", default="greedy,andreas")
    ap.add_argument("--seeds", default="1-5", help="instance seeds, e.g. 1-5 or 101-105")
    ap.add_argument("--params", default="{}", help="policy keyword arguments as JSON")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--against", type=Path, help="a grid file to divide by, cell by cell")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    try:  # fail before running anything
        json.loads(args.params)
    except json.JSONDecodeError as e:
        ap.error(f"--params: expected a JSON object, {e}")
    if args.against is not None and not args.against.is_file():
        ap.error(f"--against: {args.against}: no such file")
    tasks = [(n, lam, s, p, args.params) for n in NODES for lam in LAMBDAS
             for s in parse_seeds(args.seeds) for p in args.policies.split(",")]
    with Pool(args.workers) as pool:
        costs = dict(pool.imap(_run, tasks, chunksize=1))
    args.out.write_text(json.dumps(costs, indent=0, sort_keys=True) + "\n")
    print(f"wrote {args.out}: {len(costs)} runs")
    if args.against is None:
        return
    after, before = cell_means(costs), cell_means(json.loads(args.against.read_text()))
    for policy in args.policies.split(","):
        ratios = []
        for (p, nodes, lam), cost in sorted(after.items()):
            if p == policy and (p, nodes, lam) in before:
                ratios.append(cost / before[(p, nodes, lam)])
                print(f"{policy:>12} {nodes:>3} nodes λ {lam:>6g}: {cost:10.3f} / "
                      f"{before[(p, nodes, lam)]:10.3f} = {ratios[-1]:.4f}")
        if ratios:
            print(f"{policy:>12} mean of {len(ratios)} cell ratios: {statistics.mean(ratios):.4f}")


if __name__ == "__main__":
    main()
