"""Carbon-aware scheduling: emissions, energy cost and tardiness per policy and carbon price.

Replays the paper scenario (10 nodes, λ = 10000 s, 101 jobs over about 29 hours) under the real
hourly wholesale prices (0.92 EUR per USD) and the real hourly carbon intensity (direct,
gCO2eq/kWh) of the same zone and days, both from green-dcc (../shared/data/public; the
intensity is Electricity Maps'): CAISO from 2023-05-07 and PJM from 2023-09-12. For each
carbon price (EUR per tonne CO2eq, in the objective through cluster.yaml's `carbon_price`)
it compares fifo, edf, andreas and the carbon-threshold baseline (threshold: the window's
median intensity; maximum delay 4 h). Writes a Markdown table (default bench/carbon.md).

    python bench/carbon_demo.py [--instances 3] [--carbon-prices 0,100,400]
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import replace
from pathlib import Path

from benchmeta import measured_line

from andreas.io import Fields, load_located_yaml, read_carbon, read_tariff
from andreas.model import Scenario, Tariff
from andreas.policies import make_policy
from andreas.sim.engine import simulate
from andreas.sim.generate import generate_paper_style, load_template

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "public"
ZONES = {
    "CAISO 2023-05-07": ("US-CAL-CISO", "2023-05-07 00:00"),
    "PJM 2023-09-12": ("US-MIDA-PJM", "2023-09-12 00:00"),
}
POLICIES = ("fifo", "edf", "andreas", "carbon-threshold")


def series(key: str, text: str, reader) -> Tariff:
    """A cluster.yaml `key` mapping read as the scenario loader reads it."""
    path = ROOT / "bench" / ".series.yaml"
    path.write_text(f"{key}: {text}\n")
    try:
        doc = Fields(path, load_located_yaml(path))
        return reader(path, Fields(path, doc.get(key), key))
    finally:
        path.unlink()


def run(instances: int, carbon_prices: list[float]) -> list[str]:
    lines = []
    for window, (zone, start) in ZONES.items():
        price = series("energy_price", f"{{csv: '{DATA / f'price_{zone}_2023_hourly_usd_mwh.csv'}'"
                       f", start: '{start}', scale: 0.92}}", read_tariff)
        carbon = series("carbon_intensity", f"{{csv: '{DATA / f'carbon_{zone}_2023_hourly.csv'}'"
                        f", start: '{start}'}}", read_carbon)
        first = int(carbon.offset_s // carbon.step_s)
        threshold = statistics.median(carbon.prices[first:first + 30])
        lines += [f"\n### {window} (threshold {threshold:.0f} g/kWh)\n",
                  "| carbon EUR/t | policy | total EUR | energy EUR | carbon EUR | "
                  "kg CO2eq | tardiness EUR | tardy jobs |",
                  "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for carbon_price in carbon_prices:
            rows: dict[str, list[tuple[float, ...]]] = {p: [] for p in POLICIES}
            for seed in range(1, instances + 1):
                base = generate_paper_style(load_template("paper"), 10, seed, lam=10000)
                cluster = replace(base.cluster, tariff=price, energy_price=price.mean(0, 86400),
                                  carbon=carbon, carbon_price=carbon_price)
                scenario = Scenario(cluster, base.profiles, base.jobs, f"{window} #{seed}")
                for name in POLICIES:
                    options = {"threshold_g": threshold} if name == "carbon-threshold" else {
                        "seed": 1}
                    s = simulate(scenario, make_policy(name, **options)).summary
                    rows[name].append((s["total_cost"], s["energy_cost"], s["carbon_cost"],
                                       s["emissions_kg"], s["tardiness_cost"], s["tardy_jobs"]))
            for name in POLICIES:
                m = [statistics.fmean(r[i] for r in rows[name]) for i in range(6)]
                lines.append(f"| {carbon_price:g} | {name} | {m[0]:.3f} | {m[1]:.3f} | "
                             f"{m[2]:.3f} | {m[3]:.2f} | {m[4]:.3f} | {m[5]:.1f} |")
                print(window, lines[-1], flush=True)
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--instances", type=int, default=3)
    ap.add_argument("--carbon-prices", default="0,100,400")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "carbon.md")
    args = ap.parse_args()
    prices = [float(x) for x in args.carbon_prices.split(",")]
    lines = ["# Carbon price, emissions, cost and tardiness per policy", "",
             measured_line(), f"Means over {args.instances} generated paper instances "
             "(seeds 1..n); total = energy + carbon (the carbon price x the emissions) + "
             "tardiness. See docs/carbon.md."]
    lines += run(args.instances, prices)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
