"""Compare trial configurations of `andreas` with `andreas` itself, family by family.

A trial is a set of zoo runs (a `.runs.csv` written by bench/zoo/run.py) of one configuration
(a variant's label, or `andreas` run from an experimental build). Each trial row is compared
with the reference table's `andreas` row of the same family, instance and seed:

    python bench/trials.py --out bench/check-options.md --title "..." \\
        --trial "check_samples=4, check_risk=0.02=bench/zoo-seeds.runs.csv:/tmp/k4.runs.csv:k4"

`--trial NAME=REFERENCE:RUNS[:LABEL]` (LABEL defaults to andreas). The table gives, per
family, the trial's total over the reference's (the sum of the instances' costs), the
geometric mean of the per-instance ratios and the worst and best instance. `--save` also
writes the trial rows, labelled by NAME, to one runs CSV beside the table, so that the table
can be rebuilt from the repository alone (`--trial NAME=REFERENCE:that.runs.csv:NAME`).
"""

from __future__ import annotations

import argparse
import csv
import math
from collections import defaultdict
from pathlib import Path

Key = tuple[str, str, str]  # family, instance, seed


def andreas_rows(path: str, label: str = "andreas") -> dict[Key, float]:
    """Totals of `label`'s rows of a runs CSV, by family, instance and seed."""
    with open(path, newline="") as f:
        return {(r["family"], r["instance"], r["seed"]): float(r["total"])
                for r in csv.DictReader(f) if r["label"] == label}


def family_ratios(reference: dict[Key, float], trial: dict[Key, float]) -> dict[str, dict]:
    """Per family: the trial's total / the reference's over the keys both hold, the geometric
    mean of the instance ratios, and the worst and best instance (ratio, instance)."""
    out: dict[str, dict] = {}
    by_family: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for key, cost in trial.items():
        if key in reference:
            by_family[key[0]].append((cost, reference[key], f"{key[1]} s{key[2]}"))
    for family, rows in by_family.items():
        ratios = [(c / r if r > 0 else 1.0, name) for c, r, name in rows]
        out[family] = {
            "total": sum(c for c, _, _ in rows) / max(1e-12, sum(r for _, r, _ in rows)),
            "geo": math.exp(sum(math.log(max(x, 1e-12)) for x, _ in ratios) / len(ratios)),
            "worst": max(ratios), "best": min(ratios), "n": len(rows)}
    return out


def table(trials: list[tuple[str, dict[str, dict]]]) -> str:
    lines = ["| trial | family | runs | total / andreas | geometric mean | worst instance | "
             "best instance |", "|---|---|---:|---:|---:|---:|---:|"]
    for name, families in trials:
        for family, v in families.items():
            lines.append(f"| {name} | {family} | {v['n']} | {v['total']:.3f} | {v['geo']:.3f} "
                         f"| {v['worst'][0]:.3f} (inst {v['worst'][1]}) "
                         f"| {v['best'][0]:.3f} (inst {v['best'][1]}) |")
    return "\n".join(lines)


def parse_trial(text: str) -> tuple[str, str, str, str]:
    name, _, rest = text.rpartition("=")
    parts = rest.split(":")
    if not name or len(parts) not in (2, 3):
        raise SystemExit(f"--trial {text!r}: expected NAME=REFERENCE:RUNS[:LABEL]")
    return name, parts[0], parts[1], parts[2] if len(parts) == 3 else "andreas"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trial", action="append", default=[], help="NAME=REFERENCE:RUNS[:LABEL]")
    ap.add_argument("--out", required=True)
    ap.add_argument("--title", default="Trials of andreas against itself")
    ap.add_argument("--intro", default="", help="a paragraph under the title")
    ap.add_argument("--save", action="store_true", help="write the trial rows beside the table")
    ap.add_argument("--notes", help="a Markdown file appended under the table")
    args = ap.parse_args()
    trials, saved = [], []
    for text in args.trial:
        name, reference, runs, label = parse_trial(text)
        trial = andreas_rows(runs, label)
        trials.append((name, family_ratios(andreas_rows(reference), trial)))
        saved.extend((name, k, v) for k, v in trial.items())
    out = Path(args.out)
    notes = Path(args.notes).read_text() if args.notes else ""
    out.write_text(f"# {args.title}\n\n{args.intro}\n\n{table(trials)}\n"
                   + (f"\n{notes}" if notes else ""))
    if args.save:
        with open(out.with_suffix(".runs.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["family", "instance", "label", "seed", "total"])
            for name, (family, instance, seed), total in saved:
                w.writerow([family, instance, name, seed, total])
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
