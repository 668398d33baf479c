"""Carbon-aware scheduling: emissions, energy cost and tardiness per policy and carbon price.

Replays the paper scenario (10 nodes, λ = 10000 s, 101 jobs over about 29 hours), or windows
of a zoo family (`--workload philly-windows`: real jobs and due dates), under the real
hourly wholesale prices (0.92 EUR per USD) and the real hourly carbon intensity (direct,
gCO2eq/kWh) of the same zone and days, both from green-dcc (../shared/data/public; the
intensity is Electricity Maps'): CAISO from 2023-05-07 and PJM from 2023-09-12. For each
carbon price (EUR per tonne CO2eq, in the objective through cluster.yaml's `carbon_price`)
it compares fifo, edf, andreas and the carbon-threshold baseline (threshold: the window's
median intensity; maximum delay 4 h). Writes a Markdown table (default bench/carbon.md).

    python bench/carbon_demo.py [--instances 3] [--carbon-prices 0,100,400]
    python bench/carbon_demo.py --workload philly-windows --carbon-prices 0,100 --append
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import yaml
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


def paper_instances(instances: int) -> list[Scenario]:
    """The paper scenario (10 nodes, λ = 10000 s), seeds 1..instances."""
    return [generate_paper_style(load_template("paper"), 10, seed, lam=10000)
            for seed in range(1, instances + 1)]


def zoo_instances(family: str, instances: int) -> list[Scenario]:
    """A zoo family's first instances (bench/zoo/families.yaml: e.g. philly-windows, 120 real
    jobs from each start on a 6-node, 8-GPU cluster)."""
    sys.path.insert(0, str(ROOT / "bench" / "zoo"))
    from run import build_family  # bench/zoo/run.py

    recipes = yaml.safe_load((ROOT / "bench" / "zoo" / "families.yaml").read_text())["families"]
    return build_family(family, recipes[family], instances)


def zone_series(window: str) -> tuple[Tariff, Tariff, float]:
    """A ZONES window's hourly price (EUR/kWh) and intensity series, and the threshold the
    carbon-threshold baseline gets there (the median intensity of the first 30 hours)."""
    zone, start = ZONES[window]
    price = series("energy_price", f"{{csv: '{DATA / f'price_{zone}_2023_hourly_usd_mwh.csv'}'"
                   f", start: '{start}', scale: 0.92}}", read_tariff)
    carbon = series("carbon_intensity", f"{{csv: '{DATA / f'carbon_{zone}_2023_hourly.csv'}'"
                    f", start: '{start}'}}", read_carbon)
    first = int(carbon.offset_s // carbon.step_s)
    return price, carbon, statistics.median(carbon.prices[first:first + 30])


def run(instances: int, carbon_prices: list[float], workload: str) -> list[str]:
    lines = []
    bases = paper_instances(instances) if workload == "paper" else zoo_instances(workload,
                                                                                  instances)
    for window in ZONES:
        price, carbon, threshold = zone_series(window)
        lines += [f"\n### {window} (threshold {threshold:.0f} g/kWh)\n",
                  "| carbon EUR/t | policy | total EUR | energy EUR | carbon EUR | "
                  "kg CO2eq | tardiness EUR | tardy jobs |",
                  "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for carbon_price in carbon_prices:
            rows: dict[str, list[tuple[float, ...]]] = {p: [] for p in POLICIES}
            for seed, base in enumerate(bases, 1):
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
    ap.add_argument("--append", action="store_true", help="add to --out, not replace it")
    ap.add_argument("--workload", default="paper",
                    help="paper, or a zoo family (philly-windows, alibaba-windows, ...)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "carbon.md")
    args = ap.parse_args()
    prices = [float(x) for x in args.carbon_prices.split(",")]
    what = ("generated paper instances (seeds 1..n)" if args.workload == "paper" else
            f"instances of the zoo family {args.workload} (bench/zoo/families.yaml)")
    lines = [f"## {args.workload}", "", measured_line(),
             f"Means over the first {args.instances} {what}; total = energy + carbon (the "
             "carbon price x the emissions) + tardiness. See docs/carbon.md."]
    lines += run(args.instances, prices, args.workload)
    text = "\n".join(lines) + "\n"
    if args.append and args.out.exists():
        text = args.out.read_text() + "\n" + text
    else:
        text = "# Carbon price, emissions, cost and tardiness per policy\n\n" + text
    args.out.write_text(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
