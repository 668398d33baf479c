"""A crash campaign (`make chaos`): a real workload on a real `andreas serve`, the service
killed with SIGKILL at random moments and started again each time; then, once every job has
ended, the promises checked: every job listed and completed, every epoch done once, no two runs
of a job at once, no process left behind. One row per campaign goes to a dated table.

    python bench/chaos.py --kills 20 --database sqlite --out docs/chaos.md
    python bench/chaos.py --kills 20 --database postgresql --out docs/chaos.md

Jobs are examples/train_numpy.py (checkpointed every epoch) on a 3-GPU cluster, submitted while
the kills go on.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path

import psutil
from benchmeta import append_row

from andreas.service.sandbox import THREE_GPUS as CLUSTER
from andreas.service.sandbox import LocalService

ROOT = Path(__file__).resolve().parents[1]
TRAIN = ROOT / "examples" / "train_numpy.py"
PROFILES = "profile,gpu_type,gpus,seconds_per_epoch\nmlp,fast,1,0.3\nmlp,fast,2,0.2\n"


def epochs_once(log: str, epochs: int) -> bool:
    done = [int(line.split()[1]) for line in log.splitlines()
            if line.startswith("epoch ") and " done" in line]
    return sorted(done) == list(range(1, epochs + 1))


def campaign(kills: int, database: str, seed: int) -> dict:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        pg = None
        url = None
        if database == "postgresql":
            import pgserver

            pg = pgserver.get_server(d / "pg", cleanup_mode="stop")
            pg.psql("CREATE DATABASE chaos;")
            url = pg.get_uri("chaos")  # libpq's form: the service adds the psycopg driver
        service = LocalService(d / "svc", CLUSTER, PROFILES, database_url=url, options=(
            "policy: andreas\npolicy_options: {seed: 1, consolidate.share: null, "
            "wait.share: null, company.share: null}\nperiod_s: null\n"
            "grace_s: 5\npoll_s: 0.2\n"))
        service.start()
        submitted: dict[str, int] = {}
        tic = time.monotonic()
        try:
            for k in range(kills):
                if k < 8:  # jobs keep arriving during the first kills
                    epochs = rng.choice((10, 20, 30))
                    r = service.post("/jobs", headers={"Idempotency-Key": f"chaos-{k}"}, json={
                        "script": str(TRAIN), "args": ["--samples", "60000"],
                        "epochs": epochs, "deadline_s": 3600, "priority": rng.randint(1, 5),
                        "profile": "mlp"})
                    submitted[r.json()["id"]] = epochs
                time.sleep(rng.uniform(0.2, 3.0))
                service.kill9()
                service.start()
            deadline = time.monotonic() + 900
            while time.monotonic() < deadline:
                jobs = service.get("/jobs").json()
                if all(j["state"] in ("completed", "failed", "cancelled", "timeout")
                       for j in jobs):
                    break
                time.sleep(1)
            jobs = {j["id"]: j for j in service.get("/jobs").json()}
            listed = sum(1 for j in submitted if j in jobs)
            completed = sum(1 for j in submitted if jobs.get(j, {}).get("state") == "completed")
            once = overlap = 0
            for job_id, epochs in submitted.items():
                once += epochs_once(service.get(f"/jobs/{job_id}/logs?tail_bytes=10000000")
                                    .text, epochs)
                runs = sorted((r["started_at"], r["ended_at"] or 1e18)
                              for r in service.get(f"/jobs/{job_id}/runs").json())
                overlap += any(b[0] < a[1] for a, b in zip(runs, runs[1:]))
            restarts = sum(j["restarts"] for j in jobs.values())
        finally:
            if service.proc and service.proc.poll() is None:
                service.proc.terminate()
                service.proc.wait(timeout=60)
            leftover = [p.pid for p in psutil.process_iter(["cmdline"])
                        if str(d) in " ".join(p.info["cmdline"] or [])
                        and "andreas.executors.launch" in " ".join(p.info["cmdline"] or [])]
            for pid in leftover:
                os.killpg(pid, signal.SIGKILL)
            if pg is not None:
                pg.cleanup()
    return {"database": database, "kills": kills, "jobs": len(submitted), "listed": listed,
            "completed": completed, "epochs_once": once, "overlapping": overlap,
            "leftover": len(leftover), "restarts": restarts,
            "minutes": (time.monotonic() - tic) / 60}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "chaos.md")
    args = ap.parse_args()
    r = campaign(args.kills, args.database, args.seed)
    row = (f"| {dt.date.today()} | {r['database']} | {args.seed} | {r['kills']} | {r['jobs']} | "
           f"{r['listed']} | {r['completed']} | {r['epochs_once']} | {r['overlapping']} | "
           f"{r['leftover']} | {r['restarts']} | {r['minutes']:.1f} |")
    header = ("# Crash campaigns (bench/chaos.py, `make chaos`)\n\n"
              "SIGKILL of the service at random moments of a real workload, a restart after "
              "each; then every job's fate. `epochs once`: jobs whose log shows each epoch "
              "exactly once; `overlapping`: jobs with two runs at once; `left over`: launcher "
              "processes alive after the service stopped.\n\n"
              "| date | database | seed | kills | jobs | listed | completed | epochs once | "
              "overlapping | left over | restarts | minutes |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    append_row(args.out, header, row)
    print(row)
    ok = (r["listed"] == r["completed"] == r["epochs_once"] == r["jobs"]
          and not r["overlapping"] and not r["leftover"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
