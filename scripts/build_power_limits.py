"""Build the catalogue's power-limit profiles (src/andreas/data/catalogue/power_limits.csv)
from the Zeus traces in ../shared/data/public (Apache-2.0; see the catalogue's LICENSE-NOTE.md).

One profile per Zeus workload (dataset, network, batch size, optimizer), named
`<network>-<dataset>-b<batch>-<optimizer>`, on one GPU of each catalogue type Zeus measured
(P100, V100): seconds per epoch and average GPU power at every power limit, unchanged. Run:
    python scripts/build_power_limits.py ../shared/data/public
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

GPUS = {"p100": "P100", "v100": "V100"}  # Zeus trace name -> catalogue name
OUT = Path(__file__).resolve().parents[1] / "src/andreas/data/catalogue/power_limits.csv"


def main(source: Path) -> None:
    rows = []
    for trace, gpu in GPUS.items():
        with (source / f"zeus_summary_power_{trace}.csv").open(newline="") as f:
            for r in csv.DictReader(f):
                name = f"{r['network']}-{r['dataset']}-b{r['batch_size']}-{r['optimizer']}"
                rows.append((name, gpu, 1, float(r["time_per_epoch"]), int(r["power_limit"]),
                             float(r["average_power"])))
    rows.sort(key=lambda r: (r[0], r[1], -r[4]))
    with OUT.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["profile", "gpu_type", "gpus", "seconds_per_epoch", "power_limit_w",
                    "gpu_power_w"])
        for name, gpu, g, spe, limit, watts in rows:
            w.writerow([name, gpu, g, f"{spe:.6g}", limit, f"{watts:.6g}"])
    print(f"{OUT}: {len(rows)} rows, {len({r[0] for r in rows})} profiles")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/public"))
