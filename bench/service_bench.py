"""What one rescheduling decision of the live service costs, by queue size.

The service decides (the policy, with the service's default decision budget) and then
forecasts the rest of the queue (the simulator, with the policy's later decisions at fewer
passes: `decider.forecast_policy`), both in its decision worker (`decider.Worker`, the code
the worker process runs). Queues are paper-style workloads submitted at once, on 10 nodes per
100 jobs. Peak memory is this process's high-water mark after each size (sizes grow, so each
row's is at least the one before). Writes bench/service.md.

    python bench/service_bench.py
    python bench/service_bench.py --nodes 1 10 50 100 1000 --forecast-up-to 1001
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

from benchmeta import measured_line

from andreas.policies import make_policy
from andreas.policies.base import JobView, Snapshot
from andreas.service.config import DEFAULT_DECISION_BUDGET_MS
from andreas.service.decider import FORECAST_BUDGET, FORESEEN_KEPT, Worker
from andreas.sim.generate import generate_paper_style, load_template


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 10, 50, 100, 1000])
    parser.add_argument("--forecast-up-to", type=int, default=1001,
                        help="forecast queues up to this many jobs (the forecast grows with "
                             "the square of the queue)")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("service.md"))
    args = parser.parse_args()
    options = {"seed": 1, "decision_budget_ms": DEFAULT_DECISION_BUDGET_MS}
    rows = ["| queued jobs | nodes | decision s | forecast passes | forecast s "
            "| the same, keeping to the first's foreseen decisions s | peak MB |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for nodes in args.nodes:
        sc = generate_paper_style(load_template("paper"), nodes, 1, lam=2000)
        snap = Snapshot(0.0, sc.cluster, sc.profiles,
                        tuple(JobView(j, j.epochs) for j in sc.jobs))
        worker = Worker(make_policy("andreas", **options), "andreas", options)
        worker.decide(snap)  # compile and load the kernels first
        tic = time.perf_counter()
        plan = worker.decide(snap)
        decide_s = time.perf_counter() - tic
        passes = max(1, min(1000, FORECAST_BUDGET // len(sc.jobs)))
        forecast_s = kept_s = "not run"
        if len(sc.jobs) <= args.forecast_up_to:
            tic = time.perf_counter()
            _, foreseen = worker.forecast(snap, plan, None)
            forecast_s = f"{time.perf_counter() - tic:.2f}"
            tic = time.perf_counter()  # as after an event that came as foreseen
            worker.forecast(snap, plan, None, foreseen=foreseen)
            kept_s = f"{time.perf_counter() - tic:.2f}"
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        rows.append(f"| {len(sc.jobs)} | {nodes} | {decide_s:.2f} | {passes} | {forecast_s} "
                    f"| {kept_s} | {peak_mb:.0f} |")
        print(rows[-1], flush=True)
    args.out.write_text(
        "# One decision of the live service\n\n" + measured_line() + "\n\n"
        f"With the service's default decision budget ({DEFAULT_DECISION_BUDGET_MS:g} ms); "
        "the forecast is what the decision worker runs after each decision. A forecast after "
        "events that came as foreseen keeps to the decisions the last one foresaw "
        "(`decider.KeepForeseen`: the policy is not asked at those, up to "
        f"{FORESEEN_KEPT} of them); after completions in another order than foreseen, a "
        "decision may weigh two forecasts (`planner.Planner.repaired_plan`).\n\n"
        + "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
