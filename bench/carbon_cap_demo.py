"""What a daily carbon cap costs: real jobs under a real grid, capped and not.

Replays the first instances of a zoo family (default philly-windows) under one zone's hourly
price and carbon intensity (bench/carbon_demo.py's series), first without a cap, then with a
daily cap of each given share of the emissions `andreas` reached on its worst day uncapped.
For each policy: emissions, the worst day, how far over the cap, energy and tardiness.

    python bench/carbon_cap_demo.py [--workload philly-windows] [--zone CAISO]
        [--instances 3] [--shares 0.8,0.6]

Appends a dated section to bench/carbon-cap.md; docs/carbon.md discusses it.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import replace
from pathlib import Path

from benchmeta import measured_line
from carbon_demo import ZONES, zone_series, zoo_instances

from andreas.model import CarbonCap, Scenario
from andreas.policies import make_policy
from andreas.sim.engine import simulate

ROOT = Path(__file__).resolve().parent.parent
POLICIES = ("fifo", "edf", "andreas")
COLUMNS = ("emissions_kg", "carbon_cap_worst_kg", "carbon_cap_over_kg", "energy_cost",
           "tardiness_cost", "tardy_jobs")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="philly-windows")
    ap.add_argument("--zone", default="CAISO", choices=[w.split()[0] for w in ZONES])
    ap.add_argument("--instances", type=int, default=3)
    ap.add_argument("--shares", default="0.8,0.6")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "carbon-cap.md")
    args = ap.parse_args()
    window = next(w for w in ZONES if w.startswith(args.zone))
    price, carbon, _ = zone_series(window)
    bases = [replace(b, cluster=replace(b.cluster, tariff=price, energy_price=price.mean(0, 86400),
                                        carbon=carbon))
             for b in zoo_instances(args.workload, args.instances)]
    lines = ["| cap kg/day | policy | kg CO2eq | worst day kg | over cap kg | energy EUR | "
             "tardiness EUR | tardy jobs |",
             "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    worst = []
    for base in bases:  # andreas's worst day, uncapped (the cap's yardstick)
        capped = replace(base, cluster=replace(base.cluster, carbon_cap=CarbonCap(1e12)))
        worst.append(simulate(capped, make_policy("andreas", seed=1)).summary[
            "carbon_cap_worst_kg"])
    for share in [None, *(float(x) for x in args.shares.split(","))]:
        rows: dict[str, list[dict]] = {p: [] for p in POLICIES}
        for base, w in zip(bases, worst):
            cap = CarbonCap(1e12 if share is None else share * w)
            scenario = Scenario(replace(base.cluster, carbon_cap=cap), base.profiles, base.jobs,
                                base.name)
            for p in POLICIES:
                rows[p].append(simulate(scenario, make_policy(p, seed=1)).summary)
        for p in POLICIES:
            m = [statistics.fmean(r[c] for r in rows[p]) for c in COLUMNS]
            label = "none" if share is None else f"{share:.0%} of andreas's worst"
            lines.append(f"| {label} | {p} | {m[0]:.1f} | {m[1]:.1f} | {m[2]:.1f} | {m[3]:.2f} | "
                         f"{m[4]:.0f} | {m[5]:.1f} |")
            print(lines[-1], flush=True)
    head = "# Daily carbon caps on real jobs\n" if not args.out.exists() else ""
    yardsticks = ", ".join(f"{w:.1f}" for w in worst)
    text = (f"{head}\n## {args.workload}, {window}\n\n{measured_line()}\n"
            f"Means over the first {args.instances} instances; a cap is a share of the most "
            f"`andreas` emitted in one day uncapped on each instance ({yardsticks} kg). "
            "See docs/carbon.md.\n\n" + "\n".join(lines) + "\n")
    args.out.write_text((args.out.read_text() if args.out.exists() else "") + text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
