"""The forward checks' futures played compiled against the Python simulator.

Two tables. The first collects every future `andreas` plays on some zoo instances (forward
checks with 4 samples, and restart rollouts at every decision that pays a restart, so both
followers play) and plays each twice: compiled (`sim/compiled_forecast.py`) and in the
simulator (`sim/forecast.py`), timing both and comparing the costs. The second runs default
`andreas` on the same instances with the compiled path on and off (the costs must be equal).
Writes a Markdown table (default bench/forecasts.md); `make bench-forecasts` runs it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import yaml
from benchmeta import measured_line

import andreas.sim.compiled_forecast as compiled_forecast
from andreas.policies import make_policy, rollouts
from andreas.policies.steps import forward_check
from andreas.sim.engine import simulate
from andreas.sim.forecast import forecast

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "zoo"))
import run as zoo  # noqa: E402

FILES = ("families.yaml", "holdout.yaml", "holdout2.yaml", "holdout3.yaml", "holdout4.yaml")
FAMILIES = ("paper-light", "gavel-tight", "tight-restart", "h-dear-restart", "h-alibaba-long",
            "n-philly-3gen", "t-idle-bursts", "u-heavytail-mid")
PLAYING = {"check_samples": 4, "restart_rollouts": 4, "rollout_min_late": 0.0}


def recipes() -> dict:
    out: dict = {}
    for name in FILES:
        data = yaml.safe_load((ROOT / "bench" / "zoo" / name).read_text())
        out.update(data.get("families", data))
    return out


def both_ways(scenario) -> dict:
    """Every future andreas (with PLAYING) plays on `scenario`, timed both ways."""
    seen = {"futures": 0, "python_s": 0.0, "compiled_s": 0.0, "worst": 0.0, "declined": 0}
    original = forward_check.future_cost

    def timed(snapshot, plan, futures, follower, deadline=forward_check.NO_DEADLINE):
        for arrivals in futures:
            tic = time.perf_counter()
            python = sum(c.total_cost for c in forecast(snapshot, plan, follower(),
                                                        arrivals=arrivals).values())
            mid = time.perf_counter()
            fast = compiled_forecast.compiled_cost(snapshot, plan, follower(), arrivals)
            end = time.perf_counter()
            seen["futures"] += 1
            if fast is None:
                seen["declined"] += 1
                continue
            seen["python_s"] += mid - tic
            seen["compiled_s"] += end - mid
            seen["worst"] = max(seen["worst"], abs(fast - python) / max(abs(python), 1e-12))
        return original(snapshot, plan, futures, follower, deadline)

    forward_check.future_cost = rollouts.future_cost = timed
    try:
        simulate(scenario, make_policy("andreas", seed=1, **PLAYING))
    finally:
        forward_check.future_cost = rollouts.future_cost = original
    return seen


def whole_run(scenario, compiled: bool) -> tuple[float, float]:
    """Wall seconds and total cost of default andreas, the compiled path on or off."""
    keep = compiled_forecast.compiled_cost
    if not compiled:
        compiled_forecast.compiled_cost = lambda *args, **kwargs: None
    try:
        tic = time.perf_counter()
        result = simulate(scenario, make_policy("andreas", seed=1))
        return time.perf_counter() - tic, result.summary["total_cost"]
    finally:
        compiled_forecast.compiled_cost = keep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--instance", type=int, default=0)
    parser.add_argument("--out", default=str(ROOT / "bench" / "forecasts.md"))
    args = parser.parse_args()
    book = recipes()
    rows, runs = [], []
    for family in args.families.split(","):
        scenario = zoo.build_family(family, book[family], args.instance + 1)[args.instance]
        seen = both_ways(scenario)
        ratio = seen["python_s"] / seen["compiled_s"] if seen["compiled_s"] else float("nan")
        rows.append(f"| {family} | {seen['futures']} | {seen['declined']} | "
                    f"{seen['python_s']:.2f} | {seen['compiled_s']:.2f} | {ratio:.1f} | "
                    f"{seen['worst']:.1e} |")
        whole_run(scenario, True)  # (loads what both paths compile, before timing)
        py_s, py_cost = whole_run(scenario, False)
        fast_s, fast_cost = whole_run(scenario, True)
        runs.append(f"| {family} | {py_s:.2f} | {fast_s:.2f} | {py_s / fast_s:.2f} | "
                    f"{'equal' if py_cost == fast_cost else f'{py_cost} vs {fast_cost}'} |")
        print(rows[-1], runs[-1], flush=True)
    options = ", ".join(f"{k}={v}" for k, v in PLAYING.items())
    text = "\n".join([
        "# Forward checks' futures: compiled against the simulator", "",
        measured_line("Generated") + f" Zoo instance {args.instance} of each family, one "
        "core.", "",
        f"## Every future andreas plays ({options}), played both ways", "",
        "| family | futures | declined | simulator s | compiled s | speed-up | worst "
        "relative difference |",
        "|---|---:|---:|---:|---:|---:|---:|", *rows, "",
        "Declined: futures the compiled loop does not cover (`sim/compiled_forecast.py`), "
        "played in the simulator by the checks.", "",
        "## Default andreas, whole run", "",
        "| family | simulator futures s | compiled futures s | speed-up | total cost |",
        "|---|---:|---:|---:|---|", *runs, ""])
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
