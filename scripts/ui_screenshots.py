"""Screenshots of the web dashboard for the docs (`make screenshots`): a real `andreas serve` on a
small made-up cluster, real training jobs (examples/train_numpy.py) from two users, and every
page taken by Debian's Chromium at 1280x800 (the jobs page at a phone's width too).

    python scripts/ui_screenshots.py --out docs/img
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import httpx

from andreas.service.sandbox import HEADLESS_CHROMIUM_ARGS, LocalService

ROOT = Path(__file__).resolve().parents[1]
TRAIN = ROOT / "examples" / "train_numpy.py"

CLUSTER = """\
energy_price: 0.2
pue: 1.2
restart_overhead_s: 1
gpu_types:
  A100: {node_power_w: [420, 760]}
  T4: {node_power_w: [90, 160]}
nodes:
  - {name: gpu-a, gpu_type: A100, gpus: 2}
  - {name: gpu-b, gpu_type: A100, gpus: 2}
  - {name: gpu-c, gpu_type: T4, gpus: 2}
"""
PROFILES = """\
profile,gpu_type,gpus,seconds_per_epoch
mlp,A100,1,0.45
mlp,A100,2,0.3
mlp,T4,1,0.9
mlp,T4,2,0.6
"""


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"timed out waiting for {what}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        server = LocalService(Path(tmp), CLUSTER, PROFILES, cwd=ROOT, options=(
            "policy: andreas\npolicy_options: {seed: 1}\nperiod_s: null\ngrace_s: 5\n"
            "poll_s: 0.2\n")).start()
        admin, url = server.token, server.url
        try:
            h = {"Authorization": f"Bearer {admin}"}
            tokens = {u: httpx.post(f"{url}/tokens", headers=h, json={"user": u}).json()["token"]
                      for u in ("alice", "bob")}
            jobs = [("alice", "resnet-tune", 120, 900, 2), ("alice", "bert-small", 200, 1800, 3),
                    ("bob", "vit-sweep-1", 90, 600, 4), ("bob", "vit-sweep-2", 90, 1200, 2),
                    ("alice", "lstm-lm", 160, 3600, 1), ("bob", "gan-eval", 60, 400, 5),
                    ("alice", "mlp-baseline", 40, 7200, 1)]
            for user, name, epochs, deadline, priority in jobs:
                httpx.post(f"{url}/jobs", headers={"Authorization": f"Bearer {tokens[user]}"},
                           json={"script": str(TRAIN), "args": ["--samples", "60000"],
                                 "epochs": epochs, "deadline_s": deadline,
                                 "priority": priority, "profile": "mlp", "name": name})
                time.sleep(1.5)
            wait_until(lambda: sum(j["epochs_done"] > 5 for j in httpx.get(
                f"{url}/jobs", headers=h).json()) >= 3, 120, "progress")
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=args.chromium,
                                            args=HEADLESS_CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                page.goto(f"{url}/ui/login")
                page.screenshot(path=str(args.out / "ui-login.png"))
                page.fill("#token", admin)
                page.click("button[type=submit]")
                page.wait_for_url(f"{url}/ui/")
                page.screenshot(path=str(args.out / "ui-jobs.png"))
                for name in ("plan", "cluster"):
                    page.goto(f"{url}/ui/{name}")
                    page.screenshot(path=str(args.out / f"ui-{name}.png"))
                page.goto(f"{url}/ui/")
                page.click("text=bert-small")
                page.screenshot(path=str(args.out / "ui-job.png"))
                page.goto(f"{url}/ui/submit")
                page.fill("#program", f"{TRAIN.relative_to(ROOT)} --samples 60000")
                page.fill("#name", "my-experiment")
                page.fill("#epochs", "50")
                page.fill("#deadline", "45m")
                page.click("text=Show the forecast")
                page.locator(".buttons").scroll_into_view_if_needed()
                page.screenshot(path=str(args.out / "ui-submit.png"))
                phone = browser.new_page(viewport={"width": 390, "height": 844})
                phone.context.add_cookies(page.context.cookies())
                phone.goto(f"{url}/ui/")
                phone.screenshot(path=str(args.out / "ui-jobs-phone.png"))
                browser.close()
            for job in httpx.get(f"{url}/jobs", headers=h).json():
                if job["state"] in ("queued", "running", "paused"):
                    httpx.post(f"{url}/jobs/{job['id']}/cancel", headers=h)
            wait_until(lambda: all(j["state"] not in ("queued", "running", "paused") for j in
                                   httpx.get(f"{url}/jobs", headers=h).json()), 60, "cancels")
        finally:
            server.stop()
    print(f"wrote {', '.join(sorted(p.name for p in args.out.glob('ui-*.png')))} to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
