"""Cost against decision budget: what an anytime `andreas` gives up when each decision may take
at most N ms (option decision_budget_ms, policies/budget.py).

Whole simulations of paper-generator instances (10 and 20 nodes, a light and a heavy load,
seeds 1-3) with `andreas` at each budget; each run's total cost is divided by the same
instance's cost without a budget, and the table gives the geometric mean of that ratio, the
largest ratio, and the mean and largest decision time. Writes bench/budget.md and
bench/budget.png (`make bench-budget`). With a budget, results depend on the machine's speed
and load: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from benchmeta import measured_line

from andreas.policies import make_policy
from andreas.sim.engine import simulate
from andreas.sim.generate import generate_paper_style, load_template

ROOT = Path(__file__).resolve().parents[1]
BUDGETS_MS = (1, 3, 10, 30, 100, 300, 1000)


def instances(seeds: int):
    template = load_template("paper")
    for nodes in (10, 20):
        for lam in (10000.0, 40000.0):
            for seed in range(1, seeds + 1):
                yield (f"{nodes} nodes, λ {lam:g}, seed {seed}",
                       generate_paper_style(template, nodes, seed, lam))


class Timed:
    """The policy, with each decision's wall time kept."""

    def __init__(self, policy):
        self.policy, self.name, self.times = policy, policy.name, []

    def decide(self, snapshot):
        import time

        tic = time.perf_counter()
        plan = self.policy.decide(snapshot)
        self.times.append(time.perf_counter() - tic)
        return plan


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("bench/budget.md"))
    ap.add_argument("--seeds", type=int, default=2)
    args = ap.parse_args()
    rows: dict[float, list[tuple[float, float, float]]] = {b: [] for b in BUDGETS_MS}
    for label, scenario in instances(args.seeds):
        base = Timed(make_policy("andreas", seed=1))
        reference = simulate(scenario, base).summary["total_cost"]
        print(f"{label}: {reference:.2f} EUR without a budget, decisions up to "
              f"{max(base.times) * 1000:.0f} ms", flush=True)
        for budget in BUDGETS_MS:
            timed = Timed(make_policy("andreas", seed=1, decision_budget_ms=budget))
            cost = simulate(scenario, timed).summary["total_cost"]
            rows[budget].append((cost / reference, sum(timed.times) / len(timed.times),
                                 max(timed.times)))
    lines = ["# Cost against decision budget (andreas)", "",
             measured_line("Generated") + " Paper-generator instances: 10 and 20 nodes, "
             f"λ 10000 and 40000 s, seeds 1-{args.seeds} ({len(rows[BUDGETS_MS[0]])} in all). "
             "Cost ratio: total cost with the budget / without one, same instance.", "",
             "| budget ms | cost ratio (geo. mean) | worst ratio | mean decision ms | "
             "max decision ms |", "|---:|---:|---:|---:|---:|"]
    for budget in BUDGETS_MS:
        r = rows[budget]
        geo = math.exp(sum(math.log(x[0]) for x in r) / len(r))
        lines.append(f"| {budget} | {geo:.4f} | {max(x[0] for x in r):.4f} | "
                     f"{1000 * sum(x[1] for x in r) / len(r):.1f} | "
                     f"{1000 * max(x[2] for x in r):.0f} |")
        print(lines[-1], flush=True)
    lines += ["", "A decision may outrun its budget by the planning tables and the deterministic "
              "pass, which always complete. Past the budget the plan steps (holding, "
              "consolidation) are skipped too. The budget is wall time: a busier machine buys "
              "fewer passes."]
    args.out.write_text("\n".join(lines) + "\n")
    _figure(rows, args.out.with_suffix(".png"))
    print(f"wrote {args.out}")


def _figure(rows, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budgets = list(rows)
    geo = [math.exp(sum(math.log(x[0]) for x in rows[b]) / len(rows[b])) for b in budgets]
    worst = [max(x[0] for x in rows[b]) for b in budgets]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(budgets, geo, marker="o", label="geometric mean")
    ax.plot(budgets, worst, marker="s", linestyle="--", label="worst instance")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("decision budget (ms)")
    ax.set_ylabel("cost / cost without budget")
    ax.set_title("andreas: cost against decision budget")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
