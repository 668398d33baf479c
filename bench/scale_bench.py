"""Scale: replay a whole trace (Philly, 82,247 jobs, or Alibaba 2023, 8,152 pods; or the
first N jobs) on a 1,200-GPU cluster, event by event or in rounds.

Each run is its own process so that its wall time and peak memory (max RSS) are its own. A
policy spec is NAME, NAME:BUDGET (a Randomized Greedy pass budget, `--pass-budget`) and/or
NAME@PERIOD (rounds: the policy is asked only every PERIOD seconds, `--period-only`, and only
at rounds after an arrival or a completion), e.g.
`andreas:2000@300`; without @PERIOD the policy is asked at every arrival and completion.
NAME/T (before any @PERIOD): the Randomized Greedy's passes on T threads (option `threads`), e.g.
`andreas:2000/2`; otherwise a run uses one core.
Writes a Markdown table (default bench/scale.md) that names the machine, the date and the
commit. Needs the traces from ../shared/data (not shipped in the package). `make bench-scale`
runs both traces with the default specs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmeta import measured_line

TYPES = {"philly": ("V100", "P100", "K80"), "alibaba": ("V100", "P100", "T4")}


def cluster_yaml(types: tuple[str, ...]) -> str:
    """150 nodes x 8 GPUs, 50 of each type (power from the catalogue)."""
    return ("energy_price: 0.2\npue: 1.2\ngpu_types:\n" + "".join(f"  {t}: {{}}\n" for t in types)
            + "nodes:\n" + "\n".join(f"  - {{name: {t.lower()}-{i:03d}, gpu_type: {t}, gpus: 8}}"
                                     for t in types for i in range(50)) + "\n")


CLUSTER = cluster_yaml(TYPES["philly"])

RUN = """
import json, resource, sys, time
from andreas import load_scenario, make_policy, simulate
sc = load_scenario(sys.argv[1])
spec, _, period = sys.argv[2].partition("@")
spec, _, threads = spec.partition("/")
name, _, budget = spec.partition(":")
options = {"pass_budget": int(budget)} if budget else {}
if threads:
    options["threads"] = int(threads)
tic = time.perf_counter()
r = simulate(sc, make_policy(name, seed=1, **options), period=float(period) if period else None,
             period_only=bool(period))
print(json.dumps({"wall_s": time.perf_counter() - tic, "rss_mb":
      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, **r.summary}))
"""
# Event by event: the baselines; in rounds of 300 s, as Gavel and Sia replay traces: the
# Randomized Greedy with a pass budget. andreas-ls (local search over pairs of hundreds of
# jobs), andreas-pr and milp take far longer per decision.
EVERY_POLICY = ("fifo,edf,ps,wspt,atc,fifo@300,greedy:2000@300,andreas-paper:2000@300,"
                "andreas:2000@300")
TRACES = {"philly": "philly_jobs_compact.csv",
          "alibaba": "alibaba2023_openb_pod_list_default.csv"}
DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "public"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kind", choices=sorted(TRACES), default="philly")
    ap.add_argument("--trace", type=Path, default=None,
                    help="the trace CSV (default: ../shared/data/public/, by --kind)")
    ap.add_argument("--jobs", type=int, default=0, help="first N jobs (0 = the whole trace)")
    ap.add_argument("--policies", default=EVERY_POLICY,
                    help="comma-separated specs: NAME, NAME:BUDGET, NAME/THREADS, "
                         "NAME@PERIOD (e.g. andreas:2000/2@300)")
    ap.add_argument("--out", type=Path, default=Path("bench/scale.md"))
    ap.add_argument("--timeout", type=float, default=1800.0,
                    help="stop a run after this many seconds (reported as stopped)")
    ap.add_argument("--no-gangs", action="store_true",
                    help="import jobs over 8 GPUs as 8-GPU jobs doing proportionally more work "
                         "(the import before gangs) instead of gangs of their real size")
    args = ap.parse_args()
    trace = args.trace or DATA / TRACES[args.kind]
    if not trace.exists():
        sys.exit(f"{trace}: not found; pass --trace PATH to {TRACES[args.kind]}")
    types = TYPES[args.kind]
    with tempfile.TemporaryDirectory() as tmp:
        cluster = Path(tmp) / "cluster.yaml"
        cluster.write_text(cluster_yaml(types))
        scenario = Path(tmp) / args.kind
        limit = ["--limit", str(args.jobs)] if args.jobs else []
        subprocess.run([sys.executable, "-m", "andreas", "import-trace", args.kind, str(trace),
                        "--cluster", str(cluster), "--out", str(scenario), "--skip-bad",
                        *limit, "--no-gangs" if args.no_gangs else "--gangs"], check=True,
                       capture_output=True)
        jobs = sum(1 for _ in open(scenario / "workload.csv")) - 1
        what = f"the first {jobs:,}" if args.jobs else f"all {jobs:,}"
        gangs = "as 8-GPU jobs (--no-gangs)" if args.no_gangs else "as gangs"
        lines = [f"# Scale: {what} {args.kind.capitalize()} jobs, 150 nodes × 8 GPUs "
                 f"({'/'.join(types)}), jobs over 8 GPUs {gangs}", "",
                 measured_line() + " Each run in a process of its own, on one core (`NAME/T`: "
                 "the passes on T threads).", "",
                 "| policy | wall s | peak RSS MB | decisions | restarts | tardy jobs | "
                 "total cost EUR |", "|---|---:|---:|---:|---:|---:|---:|"]
        for policy in args.policies.split(","):
            try:
                out = subprocess.run([sys.executable, "-c", RUN, str(scenario), policy],
                                     check=True, capture_output=True, text=True,
                                     timeout=args.timeout).stdout
            except subprocess.TimeoutExpired:
                lines.append(f"| {policy} | stopped after {args.timeout:.0f} | | | | | |")
                print(lines[-1], flush=True)
                continue
            s = json.loads(out.strip().splitlines()[-1])
            lines.append(f"| {policy} | {s['wall_s']:.1f} | {s['rss_mb']:.0f} | "
                         f"{s['rescheduling_points']} | {s['restarts']} | {s['tardy_jobs']} | "
                         f"{s['total_cost']:.2f} |")
            print(lines[-1], flush=True)
    lines += ["", "`NAME` alone: event by event (asked at every arrival and completion); "
              "`NAME:N`: a pass budget of N job placements per decision (`--pass-budget`); "
              "`NAME/T`: the Randomized Greedy's passes on T threads (`--set threads=T`); "
              "`NAME@P`: rounds, the policy asked only every P seconds (`--period "
              "P --period-only`), at the rounds after an arrival or a completion. Wall time "
              "excludes loading the scenario."]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
