"""The carbon trade-off on real jobs: `andreas sweep --carbon-prices` over trace windows.

Writes the first instances of a zoo family (default philly-windows: 120 real Philly jobs with
their due dates, on a 6-node, 8-GPU cluster) as scenario directories under the real hourly
price and carbon intensity of one zone (bench/carbon_demo.py's series: CAISO from 2023-05-07 or
PJM from 2023-09-12), then runs the same `andreas sweep` a user would, at several carbon
prices, and keeps its table and Pareto figure:

    python bench/carbon_pareto.py [--workload philly-windows] [--zone CAISO] [--instances 3]
        [--carbon-prices 0,50,100,200,400]

Outputs: bench/carbon-pareto-<workload>-<zone>.md (dated, with the command) and
docs/img/carbon-pareto-<workload>-<zone>.png; the sweep's own directory is
bench/.carbon-sweep-<workload>-<zone> (resumable: rerun to finish an interrupted sweep).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from benchmeta import measured_line
from carbon_demo import ZONES, paper_instances, zone_series, zoo_instances

from andreas.io import write_scenario
from andreas.model import Scenario

ROOT = Path(__file__).resolve().parent.parent
POLICIES = "fifo,edf,carbon-threshold,andreas"


def write_instances(workload: str, window: str, instances: int, where: Path) -> tuple[list[Path],
                                                                                      float]:
    """The instances as scenario directories with the zone's series; and the threshold the
    carbon-threshold baseline gets (the median intensity of the first 30 hours)."""
    price, carbon, threshold = zone_series(window)
    bases = (paper_instances(instances) if workload == "paper"
             else zoo_instances(workload, instances))
    dirs = []
    for k, base in enumerate(bases, 1):
        cluster = replace(base.cluster, tariff=price, energy_price=price.mean(0, 86400),
                          carbon=carbon, carbon_price=0.0)
        directory = where / f"{workload}-{k}"
        if not directory.exists():
            write_scenario(Scenario(cluster, base.profiles, base.jobs, directory.name), directory)
        dirs.append(directory)
    return dirs, threshold


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="philly-windows",
                    help="paper, or a zoo family (philly-windows, alibaba-windows, ...)")
    ap.add_argument("--zone", default="CAISO", choices=[w.split()[0] for w in ZONES])
    ap.add_argument("--instances", type=int, default=3)
    ap.add_argument("--carbon-prices", default="0,50,100,200,400")
    ap.add_argument("--workers", type=int, default=0)
    args = ap.parse_args()
    window = next(w for w in ZONES if w.startswith(args.zone))
    name = f"{args.workload}-{args.zone.lower()}"
    work = ROOT / "bench" / f".carbon-sweep-{name}"
    dirs, threshold = write_instances(args.workload, window, args.instances, work / "scenarios")
    command = [sys.executable, "-m", "andreas", "sweep", *map(str, dirs), "--carbon-prices",
               args.carbon_prices, "--policies", POLICIES, "--set",
               f"threshold_g={threshold:.0f}", "--out", str(work / "sweep"),
               "--workers", str(args.workers)]
    print(" ".join(command), flush=True)
    subprocess.run(command, check=True)
    figure = ROOT / "docs" / "img" / f"carbon-pareto-{name}.png"
    shutil.copyfile(work / "sweep" / "pareto.png", figure)
    table = (work / "sweep" / "table.md").read_text()
    out = ROOT / "bench" / f"carbon-pareto-{name}.md"
    out.write_text(
        f"# Carbon prices on {args.workload}, {window}\n\n{measured_line()}\n"
        f"`andreas sweep` over the first {args.instances} instances of {args.workload} "
        f"(bench/zoo/families.yaml) with {window}'s hourly price and carbon intensity; "
        f"carbon-threshold at {threshold:.0f} g/kWh (the median of the first 30 hours). "
        f"Figure: docs/img/{figure.name}; see docs/carbon.md.\n\n{table}")
    print(f"wrote {out} and {figure}")


if __name__ == "__main__":
    main()
