"""Load on the live service (`make bench-service`): a real `andreas serve` (SQLite, local
executor) on a 3-GPU cluster, then N submissions with C in flight on keep-alive connections,
while the queue grows to N jobs. Per request: latency p50/p95/p99/max, errors (and connection
resets), and afterwards whether every acknowledged job is listed. Writes a dated table.

    python bench/service_load.py --jobs 1000 --in-flight 100 --out bench/service-load.md
    python bench/service_load.py --queued 1000 --jobs 300 --in-flight 50

Every job is `sleep 3600` (profile "one"): three run, the rest queue; all are cancelled at the
end, so no process outlives the benchmark.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmeta import append_row

from andreas.service.sandbox import THREE_GPUS as CLUSTER
from andreas.service.sandbox import LocalService

PROFILES = "profile,gpu_type,gpus,seconds_per_epoch\none,fast,1,3600\n"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def one_connection(host: str, port: int, token: str, todo: asyncio.Queue[int],
                         latencies: list[float], errors: list[str]) -> None:
    """One keep-alive connection: POST /jobs until the queue is empty. HTTP/1.1 by hand, on
    purpose: httpx's async client spent 2 s of CPU on 300 requests here, as much as the
    service, and on 2 cores the client's own queueing then dominated the latencies."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while not todo.empty():
            i = todo.get_nowait()
            body = json.dumps({"command": ["sleep", "3600"], "epochs": 1, "deadline_s": 86400,
                               "profile": "one", "name": f"load-{i}"}).encode()
            head = (f"POST /jobs HTTP/1.1\r\nHost: {host}:{port}\r\n"
                    f"Authorization: Bearer {token}\r\nIdempotency-Key: load-{i}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
            tic = time.perf_counter()
            try:
                writer.write(head.encode() + body)
                status = (await reader.readline()).decode(errors="replace").strip()
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = line.decode(errors="replace").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                answer = await reader.readexactly(length)
                if status.split(" ")[1:2] not in (["200"], ["201"]):
                    errors.append(f"{status}: {answer[:100]!r}")
            except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                latencies.append(time.perf_counter() - tic)
                reader, writer = await asyncio.open_connection(host, port)  # a new one
                continue
            latencies.append(time.perf_counter() - tic)
    finally:
        writer.close()


async def load(url: str, token: str, jobs: int, in_flight: int) -> tuple[list[float], list[str]]:
    host, port = url.removeprefix("http://").split(":")
    latencies: list[float] = []
    errors: list[str] = []
    todo: asyncio.Queue[int] = asyncio.Queue()
    for i in range(jobs):
        todo.put_nowait(i)
    await asyncio.gather(*(one_connection(host, int(port), token, todo, latencies, errors)
                           for _ in range(in_flight)))
    return latencies, errors


def queue_first(service: LocalService, jobs: int) -> list[float]:
    """Submit `jobs` in batches of 500 and wait until a decision has planned them all;
    the seconds each batch took to be answered."""
    seconds = []
    for start in range(0, jobs, 500):
        body = [{"command": ["sleep", "3600"], "epochs": 1, "deadline_s": 86400,
                 "profile": "one", "name": f"queued-{i}"}
                for i in range(start, min(jobs, start + 500))]
        tic = time.perf_counter()
        answer = service.post("/jobs/batch", json=body)
        seconds.append(time.perf_counter() - tic)
        answer.raise_for_status()
    deadline = time.monotonic() + 1800
    while jobs and time.monotonic() < deadline:
        if len(service.get("/plan").json().get("forecast", {})) >= jobs:
            break
        time.sleep(1)
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--in-flight", type=int, default=100)
    ap.add_argument("--queued", type=int, default=0,
                    help="jobs submitted first, in batches of 500 (POST /jobs/batch), and "
                         "planned before the timed submissions")
    ap.add_argument("--decide-nice", type=int, default=None,
                    help="service.yaml's decide_nice (default: the service's, 10)")
    ap.add_argument("--drained", action="store_true",
                    help="drain every node first, so that no job starts: the submissions' "
                         "latency without job processes starting beside the service")
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("service-load.md"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        options = "policy: andreas\npolicy_options: {seed: 1}\nperiod_s: null\ngrace_s: 2\n"
        if args.decide_nice is not None:
            options += f"decide_nice: {args.decide_nice}\n"
        with LocalService(Path(tmp), CLUSTER, PROFILES, options=options) as service:
            if args.drained:
                for node in service.get("/nodes").json():
                    service.post(f"/nodes/{node['name']}/drain")
            batch_s = queue_first(service, args.queued)
            tic = time.perf_counter()
            latencies, errors = asyncio.run(load(service.url, service.token, args.jobs,
                                                 args.in_flight))
            wall = time.perf_counter() - tic
            listed = service.get("/jobs").json()
            decisions = service.get("/plan").json()
            for job in listed:
                if job["state"] in ("queued", "running", "paused"):
                    service.post(f"/jobs/{job['id']}/cancel")
            # a stopped service keeps its running jobs (to adopt them when it restarts): wait
            # until the cancellations have stopped every run, or `sleep 3600`s outlive us
            deadline = time.monotonic() + 120.0
            while any(j["state"] in ("queued", "running", "paused")
                      for j in service.get("/jobs").json()):
                if time.monotonic() > deadline:
                    sys.exit("jobs still running 120 s after they were cancelled")
                time.sleep(0.5)
    ms = [x * 1000 for x in latencies]
    batches = f"{max(batch_s):.1f}" if batch_s else "-"
    queued = f"{args.queued} (drained)" if args.drained else str(args.queued)
    row = (f"| {dt.date.today()} | {queued} | {batches} | {args.jobs} | {args.in_flight} "
           f"| {statistics.median(ms):.0f} "
           f"| {percentile(ms, 0.95):.0f} | {percentile(ms, 0.99):.0f} | {max(ms):.0f} | "
           f"{len(errors)} | {len(listed) - args.queued} of {args.jobs} | "
           f"{decisions['decisions']} | "
           f"{wall:.0f} |")
    header = ("# Load on the live service (bench/service_load.py)\n\n"
              "Submissions (`POST /jobs`) on keep-alive connections to a real `andreas serve` "
              "(SQLite, local executor, policy andreas), after `queued` jobs were submitted "
              "in batches of 500 (the slowest batch's answer in s) and planned; latencies in "
              "ms. `listed`: jobs `GET /jobs` shows afterwards.\n\n"
              "| date | queued | batch s | jobs | in flight | p50 | p95 | p99 | max | errors "
              "| listed | decisions | wall s |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    append_row(args.out, header, row)
    print(row)
    for e in sorted(set(errors))[:10]:
        print("error:", e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
