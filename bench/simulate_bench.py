"""Whole-simulation wall time per policy on paper instances (10 nodes, 101 jobs).

Writes a Markdown table (default bench/results.md). Target (core issue): andreas under 10 s on
one 2-core machine. Run with `make bench`.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path

from andreas.policies import make_policy, policy_names
from andreas.sim.engine import simulate
from andreas.sim.generate import generate_paper_style, load_template


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("bench/results.md"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--lambdas", default="10000,50000")
    args = ap.parse_args()
    template = load_template("paper")
    lines = [
        "# Simulation benchmark",
        "",
        f"Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}. Paper scenario, 10 nodes, "
        f"101 jobs, instance seed 1; median of {args.repeat} runs; the policy runs on one core.",
        "",
        "| λ (s) | policy | wall s (median) | in policy s | decisions | total cost EUR |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for lam in (float(x) for x in args.lambdas.split(",")):
        scenario = generate_paper_style(template, 10, 1, lam)
        for name in policy_names():
            walls, result = [], None
            for _ in range(args.repeat):
                tic = time.perf_counter()
                result = simulate(scenario, make_policy(name, seed=1))
                walls.append(time.perf_counter() - tic)
            s = result.summary
            lines.append(f"| {lam:g} | {name} | {statistics.median(walls):.3f} | "
                         f"{s['scheduler_seconds']:.3f} | {s['rescheduling_points']} | "
                         f"{s['total_cost']:.3f} |")
            print(lines[-1], flush=True)
    lines += ["", "Target: andreas under 10 s for a whole 10-node, 101-job instance."]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
