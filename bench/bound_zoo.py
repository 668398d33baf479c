"""Gap of `andreas` (and the best other policy) to the LP lower bound on the benchmark zoo's
instances (issue 42, point 5): the bound that scales (`hindsight_bound(lp=True)`).

The policies' costs are read from a zoo runs.csv (default bench/zoo.runs.csv, seed 1 for the
randomised policies); only the bound is computed here. Families with hourly prices are left out
(the bound assumes one energy price). Writes a Markdown table (default bench/bound_zoo.md).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import importlib.util
import sys
import time
from collections import defaultdict
from pathlib import Path

import yaml

from andreas.optim.bound import hindsight_bound

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("zoo_run", ROOT / "bench" / "zoo" / "run.py")
zoo = importlib.util.module_from_spec(spec)
spec.loader.exec_module(zoo)  # type: ignore[union-attr]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--families-file", type=Path, default=ROOT / "bench/zoo/families.yaml")
    ap.add_argument("--runs", type=Path, default=ROOT / "bench/zoo.runs.csv")
    ap.add_argument("--families", default="", help="comma-separated; default all")
    ap.add_argument("--instances", type=int, default=2)
    ap.add_argument("--slots", type=int, default=60)
    ap.add_argument("--time-limit", type=float, default=300.0)
    ap.add_argument("--out", type=Path, default=ROOT / "bench/bound_zoo.md")
    args = ap.parse_args(argv)
    recipes = yaml.safe_load(args.families_file.read_text())["families"]
    wanted = [f for f in args.families.split(",") if f] or list(recipes)
    costs: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for r in csv.DictReader(args.runs.open()):
        if r["seed"] in ("", "1"):
            costs[(r["family"], r["instance"])][r["label"]] = float(r["total"])
    rows = []
    for family in wanted:
        for i, sc in enumerate(zoo.build_family(family, recipes[family], args.instances)):
            if sc.cluster.tariff is not None:
                print(f"{family}: hourly prices, left out", flush=True)
                break
            tic = time.perf_counter()
            bound = hindsight_bound(sc, slots=args.slots, time_limit=args.time_limit, lp=True)
            took = time.perf_counter() - tic
            cost = costs[(family, str(i))]
            others = {k: v for k, v in cost.items() if k in zoo.REFERENCE and k != "andreas"}
            best = min(others, key=others.get)
            rows.append((family, i, len(sc.jobs), bound.lower_bound, bound.optimal, took,
                         cost["andreas"], best, others[best]))
            print(family, i, len(sc.jobs), f"{bound.lower_bound:.4g}", f"{took:.0f} s",
                  f"andreas {cost['andreas'] / bound.lower_bound:.3f}x", flush=True)
    lines = ["| family | instance | jobs | LP bound EUR | solved in | andreas EUR | andreas / "
             "bound | best other | best other / bound |",
             "|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    for fam, i, n, lb, opt, took, a, best, b in rows:
        ra, rb = (f"{c / lb:.3f}" if lb > 0 else "-" for c in (a, b))
        lines.append(f"| {fam} | {i} | {n} | {lb:.4g}{'' if opt else ' (time limit)'} | "
                     f"{took:.0f} s | {a:.4g} | {ra} | {best} {b:.4g} | {rb} |")
    today = datetime.date.today().isoformat()
    runs = args.runs.resolve()
    runs_name = runs.relative_to(ROOT) if runs.is_relative_to(ROOT) else runs
    args.out.write_text(
        f"# Gap to the LP lower bound on the benchmark zoo ({today})\n\n"
        f"Written by `python bench/bound_zoo.py` ({' '.join(sys.argv[1:])}): the LP bound of "
        f"`andreas bound --lp` ({args.slots} slots, HiGHS, {args.time_limit:g} s limit) on the "
        f"first {args.instances} instances of each family, against the policies' totals in "
        f"{runs_name} (seed 1; best other: of "
        f"{', '.join(zoo.REFERENCE[:-1])}). A ratio of 1.10 means at most 10 % above "
        "the optimum; the bound's own looseness is in the rest.\n\n" + "\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
