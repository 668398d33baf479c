#!/usr/bin/env python3
"""Derive how well training scales across nodes from Sia's measured step times, for the gang
profiles `andreas import-trace` builds (src/andreas/data/catalogue/gang_scaling.csv).

For each model and GPU type with 8-GPU nodes in Sia's artifact (A100 DGX nodes, RTX 2080 Ti
nodes on commodity Ethernet), the 2-node efficiency is the time per step of one full node
over the time per step of two full nodes at the same per-GPU batch (data parallel: two nodes
do twice the samples per step, so 1.0 is perfect scaling); the median over batch sizes is
kept. Usage: scripts/sia_gang_scaling.py ../shared/data/public/sia_step_times.csv OUT.csv
"""

import csv
import statistics
import sys
from collections import defaultdict


def main(source: str, out: str) -> None:
    steps: dict[tuple[str, str], dict[tuple[str, str], float]] = defaultdict(dict)
    with open(source, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row["kind"] == "placement" and row["placement"] in ("8", "88"):
                steps[(row["gpu_type"], row["model"])][(row["placement"], row["local_bsz"])] = \
                    float(row["step_time_s"])
    rows = []
    for (gpu_type, model), times in sorted(steps.items()):
        ratios = [times[("8", b)] / t for (p, b), t in times.items()
                  if p == "88" and ("8", b) in times]
        if ratios and model != "gpt_pmp":  # pipeline-parallel: one stage per node, not data
            rows.append((gpu_type, model, 2, round(statistics.median(ratios), 4), len(ratios)))
    with open(out, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["gpu_type", "model", "nodes", "efficiency", "batch_sizes"])
        w.writerows(rows)


if __name__ == "__main__":
    main(*sys.argv[1:3])
