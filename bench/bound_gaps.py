"""Gap of each policy to the hindsight lower bound on small paper instances.

Writes a Markdown table (default bench/bound_gaps.md). Small instances only: the bound is a
time-indexed MILP.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from andreas.optim.bound import hindsight_bound
from andreas.policies import make_policy
from andreas.sim.engine import simulate
from andreas.sim.generate import generate_paper_style, load_template

POLICIES = ("fifo", "atc", "greedy", "andreas", "andreas-ls", "andreas-pr", "milp")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("bench/bound_gaps.md"))
    ap.add_argument("--instances", type=int, default=3)
    ap.add_argument("--slots", type=int, default=120)
    args = ap.parse_args()
    template = load_template("paper")
    lines = ["| λ (s) | jobs | bound EUR (optimal?) | " + " | ".join(POLICIES) + " |",
             "|---:|---:|---:|" + "---:|" * len(POLICIES)]
    for lam in (3000.0, 20000.0):
        gaps: dict[str, list[float]] = {p: [] for p in POLICIES}
        bounds, flags, sizes = [], [], []
        for k in range(1, args.instances + 1):
            sc = generate_paper_style(template, 2, k, lam, jobs_per_node=4)
            b = hindsight_bound(sc, slots=args.slots, time_limit=120)
            bounds.append(b.lower_bound)
            flags.append(b.optimal)
            sizes.append(len(sc.jobs))
            for p in POLICIES:
                cost = simulate(sc, make_policy(p, seed=1)).summary["total_cost"]
                gaps[p].append(100 * (cost - b.lower_bound) / b.lower_bound)
            print(lam, k, round(b.lower_bound, 3), b.optimal, flush=True)
        lines.append(f"| {lam:g} | {statistics.mean(sizes):.0f} | "
                     f"{statistics.mean(bounds):.3f} ({sum(flags)}/{len(flags)}) | "
                     + " | ".join(f"+{statistics.mean(gaps[p]):.0f} %" for p in POLICIES) + " |")
    text = ("Mean gap to the hindsight lower bound, 2 nodes (1 TESLA ×4, 1 TURING ×2), "
            f"{args.instances} instances per λ, {args.slots} slots.\n\n" + "\n".join(lines) + "\n")
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
