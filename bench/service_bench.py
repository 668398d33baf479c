"""What one rescheduling decision of the live service costs, by queue size.

The service decides (the policy) and then forecasts the rest of the queue (the simulator, with
the policy's later decisions at fewer passes: `decider.forecast_policy`). Queues are paper-
style workloads submitted at once, on 10 nodes per 100 jobs. Writes bench/service.md.

    python bench/service_bench.py
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from andreas.policies import make_policy
from andreas.policies.base import JobView, Snapshot
from andreas.service.decider import FORECAST_BUDGET
from andreas.sim.forecast import forecast
from andreas.sim.generate import generate_paper_style, load_template


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("service.md"))
    args = parser.parse_args()
    rows = ["| queued jobs | nodes | decision s | forecast passes | forecast s |",
            "| --- | --- | --- | --- | --- |"]
    for nodes in (1, 10, 50):
        sc = generate_paper_style(load_template("paper"), nodes, 1, lam=2000)
        snap = Snapshot(0.0, sc.cluster, sc.profiles,
                        tuple(JobView(j, j.epochs) for j in sc.jobs))
        policy = make_policy("andreas", seed=1)
        policy.decide(snap)  # compile and load the kernels first
        tic = time.perf_counter()
        plan = policy.decide(snap)
        decide_s = time.perf_counter() - tic
        passes = max(1, min(1000, FORECAST_BUDGET // len(sc.jobs)))
        tic = time.perf_counter()
        forecast(snap, plan, make_policy("andreas", seed=1, max_iterations=passes),
                 start_pays_overhead=True)
        rows.append(f"| {len(sc.jobs)} | {nodes} | {decide_s:.2f} | {passes} | "
                    f"{time.perf_counter() - tic:.2f} |")
        print(rows[-1])
    args.out.write_text("# One decision of the live service\n\nWritten by "
                        "`python bench/service_bench.py` on this machine (2 cores).\n\n"
                        + "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
