"""GPU power limits: how much energy does andreas save by capping jobs with slack?

Builds seeded workloads from the catalogue's Zeus profiles (one GPU, P100 or V100, every power
limit from 100 to 250 W measured) on 2 V100 + 2 P100 nodes of 8 GPUs (catalogue power: a busy
node also powers its host), with Gavel's due dates (submit + m x fastest run time, m drawn from
{1.2, 2, 10}) and weights (U(0.0254, 0.0444) EUR/s, x5 for 20 % of the jobs). Compares fifo,
edf, andreas at the default limit (the steps without power_limits) and andreas with power limits, and
writes docs/power-limits.md.

    python bench/power_limits_demo.py [--instances 3] [--jobs 60]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
from pathlib import Path

from andreas.catalogue import catalogue_power_limits_path
from andreas.io import read_cluster, read_profiles
from andreas.model import Cluster, Job, Profiles, Scenario
from andreas.policies import make_policy
from andreas.sim.engine import simulate

ROOT = Path(__file__).resolve().parent.parent
POLICIES = [("fifo", "fifo", {}), ("edf", "edf", {}),
            ("andreas, default limit", "andreas",
             {"steps": ("consolidate", "wait", "company", "defer")}),
            ("andreas, power limits", "andreas", {})]
DUE_FACTORS = (1.2, 2.0, 10.0)


def cluster() -> Cluster:
    path = Path(tempfile.mkdtemp()) / "cluster.yaml"
    path.write_text("gpu_types:\n  V100: {}\n  P100: {}\nnodes:\n"
                    + "".join(f"  - {{name: {t.lower()}-{i}, gpu_type: {t}, gpus: 8}}\n"
                              for t in ("V100", "P100") for i in range(2))
                    + "energy_price: 0.2\npue: 1.2\n")
    return read_cluster(path)


def workload(profiles: Profiles, jobs: int, seed: int, mean_gap_s: float) -> tuple[Job, ...]:
    rng = random.Random(seed)
    names = sorted(profiles.table)
    t, out = 0.0, []
    for i in range(jobs):
        t += rng.expovariate(1.0 / mean_gap_s)
        name = rng.choice(names)
        fastest = min(profiles.table[name].values())
        epochs = max(1, round(rng.uniform(1800, 7200) / fastest))  # 0.5-2 h at full speed
        run = epochs * fastest
        weight = rng.uniform(0.0254, 0.0444) * (5 if rng.random() < 0.2 else 1)
        out.append(Job(f"j{i}", t, t + rng.choice(DUE_FACTORS) * run, weight, epochs, name))
    return tuple(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--instances", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=60)
    ap.add_argument("--gap", type=float, default=300.0, help="mean seconds between arrivals")
    args = ap.parse_args()
    cl = cluster()
    profiles = read_profiles(catalogue_power_limits_path(), cl)
    rows: dict[str, list[dict]] = {label: [] for label, _, _ in POLICIES}
    capped = []
    for seed in range(1, args.instances + 1):
        sc = Scenario(cl, profiles, workload(profiles, args.jobs, seed, args.gap),
                      f"zeus-{seed}")
        for label, name, params in POLICIES:
            result = simulate(sc, make_policy(name, seed=1, **params))
            rows[label].append(result.summary)
            if params == {} and name == "andreas":
                run = [s for s in result.segments if s.phase == "run"]
                busy = sum((s.end - s.start) * s.gpus for s in run)
                capped.append(sum((s.end - s.start) * s.gpus for s in run
                                  if s.power_limit_w is not None) / busy)
            print(f"{sc.name} {label}: {result.summary['total_cost']:.3f} EUR, "
                  f"{result.summary['energy_kwh']:.1f} kWh", flush=True)
    mean = {label: {k: statistics.mean(r[k] for r in rs) for k in
                    ("energy_kwh", "energy_cost", "tardiness_cost", "total_cost", "tardy_jobs",
                     "makespan_s")} for label, rs in rows.items()}
    base = mean["andreas, default limit"]
    capped_mean = mean["andreas, power limits"]
    saved_kwh = base["energy_kwh"] - capped_mean["energy_kwh"]
    lines = [
        "# GPU power limits",
        "",
        "A GPU run below its default power limit is slower but draws less. Zeus (You, Chung,",
        "Chowdhury, NSDI 2023) measured both for 69 training workloads on P100 and V100 at limits",
        "from 100 to 250 W; the catalogue ships them as profiles (`andreas.catalogue."
        "catalogue_power_limits_path()`,",
        "built by `scripts/build_power_limits.py`). With such profiles the andreas policies choose",
        "a limit for every job they place (`policies/steps/power_limits.py`):",
        "",
        "- a job that would miss its due date at the default limit keeps it (fastest);",
        "- a lower limit must still finish 10 % of its run time before the due date, so a job that",
        "  meets its due date at the default limit is not made late by a cap, as long as no later",
        "  arrival needs its GPUs (a cap spends slack; tests check both: every decision, and whole",
        "  runs where no job waits);",
        "- no cap on a GPU type that a waiting job could use (a slower job would hold GPUs it needs);",
        "- among the allowed limits the cheapest energy over the run wins: the job's *marginal* draw",
        "  on its node in the plan (sharing a busy node it adds only its GPUs; alone it also keeps",
        "  the host on, which a slower run pays for longer) minus what the cap saves, times the run",
        "  time, priced over the run. Changing only the limit needs no restart.",
        "",
        "To use them, copy the file (its path: `python -c \"from andreas.catalogue import "
        "catalogue_power_limits_path as p; print(p())\"`)",
        "into a scenario as `profiles.csv` (or append its rows) and declare both `P100: {}` and",
        "`V100: {}` under `gpu_types` in `cluster.yaml` (a type without nodes is allowed); the",
        "workload names profiles such as `resnet50-imagenet-b128-adadelta`, whose epoch is a",
        "real dataset epoch.",
        "",
        "The simulator runs a capped job at the limit's speed and subtracts the saving from its node's",
        "draw; `segments.csv` records `power_limit_w` and `saved_w`, and `andreas account`",
        "recomputes the costs from it. `--steps consolidate,wait,company,defer` (the steps without power_limits) turns the choice off.",
        "",
        "## Profile format",
        "",
        "A configuration with power limits has one `profiles.csv` row per limit, with two more",
        "columns; the highest limit is the default (its speed is the configuration's):",
        "",
        "```",
        "profile,gpu_type,gpus,seconds_per_epoch,power_limit_w,gpu_power_w",
        "resnet50-imagenet-b128-adadelta,V100,1,3603.6,250,222.439",
        "resnet50-imagenet-b128-adadelta,V100,1,4243.26,150,145.459",
        "```",
        "",
        "## Measured: energy saved against the default limit",
        "",
        f"`python bench/power_limits_demo.py --instances {args.instances} --jobs {args.jobs}`:",
        f"{args.instances} seeded workloads of {args.jobs} one-GPU jobs drawn from the Zeus "
        f"profiles, arriving every {args.gap:g} s on average",
        "(0.5-2 h each at full speed), on 2 V100 + 2 P100 nodes of 8 GPUs with the catalogue's",
        "power (host 550 W per node), 0.20 EUR/kWh, PUE 1.2; Gavel's due dates and weights. Means",
        "over the instances:",
        "",
        "| policy | energy (kWh) | energy cost | tardiness cost | total cost | tardy jobs | "
        "makespan (h) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, m in mean.items():
        lines.append(f"| {label} | {m['energy_kwh']:.2f} | {m['energy_cost']:.3f} | "
                     f"{m['tardiness_cost']:.3f} | {m['total_cost']:.3f} | "
                     f"{m['tardy_jobs']:.1f} | {m['makespan_s'] / 3600:.2f} |")
    lines += [
        "",
        f"Power limits saved {saved_kwh:.2f} kWh "
        f"({100 * saved_kwh / base['energy_kwh']:.1f} % of andreas's energy at the default "
        f"limit); {100 * statistics.mean(capped):.0f} % of the busy GPU-hours ran capped. Total "
        f"cost {base['total_cost']:.3f} -> {capped_mean['total_cost']:.3f} EUR; tardy jobs "
        f"{base['tardy_jobs']:.1f} -> {capped_mean['tardy_jobs']:.1f}.",
        "",
        "Limits of the model: Zeus measured one GPU per job, so the shipped profiles have only",
        "one-GPU configurations (a user's profiles may give limits for any configuration); the",
        "node's draw with a capped job is the power table's less the measured difference of GPU",
        "draws, so the catalogue's median busy power and Zeus's per-workload power are mixed.",
        "",
    ]
    (ROOT / "docs" / "power-limits.md").write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines[-12:]))


if __name__ == "__main__":
    main()
