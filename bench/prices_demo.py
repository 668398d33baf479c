"""Time-varying electricity prices: does andreas shift flexible work to cheap hours?

Replays the paper scenario (10 nodes, λ = 10000 s, 101 jobs over about 29 hours) under real
hourly wholesale prices from green-dcc (../shared/data/public): CAISO from 2023-05-07 (negative
prices at night, UTC) and PJM from 2023-09-12 (an evening spike to 429 USD/MWh), converted at
0.92 EUR per USD. Compares fifo, edf, andreas-paper (no deferral), andreas without deferral,
and andreas. Writes docs/prices.md and docs/img/prices-day.png.

    python bench/prices_demo.py [--instances 3]
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import replace
from pathlib import Path

from andreas.io import Fields, load_located_yaml, read_tariff
from andreas.model import Scenario
from andreas.policies import make_policy
from andreas.sim.engine import simulate
from andreas.sim.generate import generate_paper_style, load_template

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "public"
SERIES = {
    "CAISO 2023-05-07": ("price_US-CAL-CISO_2023_hourly_usd_mwh.csv", "2023-05-07 00:00"),
    "PJM 2023-09-12": ("price_US-MIDA-PJM_2023_hourly_usd_mwh.csv", "2023-09-12 00:00"),
}
POLICIES = [("fifo", {}), ("edf", {}), ("andreas-paper", {}),
            ("andreas (no deferral)", {"defer": False}), ("andreas", {})]


def tariff(name: str):
    file, start = SERIES[name]
    doc_path = ROOT / "bench" / ".tariff.yaml"
    doc_path.write_text(f"energy_price: {{csv: '{DATA / file}', start: '{start}', "
                        f"scale: 0.92}}\n")
    doc = Fields(doc_path, load_located_yaml(doc_path))
    t = read_tariff(doc_path, Fields(doc_path, doc.get("energy_price"), "energy_price"))
    doc_path.unlink()
    return t


def run(instances: int) -> tuple[list[str], dict]:
    lines, keep = [], {}
    for series in SERIES:
        t = tariff(series)
        rows = {name: [] for name, _ in POLICIES}
        for seed in range(1, instances + 1):
            base = generate_paper_style(load_template("paper"), 10, seed, lam=10000)
            cluster = replace(base.cluster, tariff=t, energy_price=t.mean(0, 86400))
            scenario = Scenario(cluster, base.profiles, base.jobs, f"{series} #{seed}")
            for name, extra in POLICIES:
                policy = make_policy(name.split(" ")[0], seed=1, **extra)
                result = simulate(scenario, policy)
                s = result.summary
                rows[name].append((s["total_cost"], s["energy_cost"], s["tardiness_cost"],
                                   s["energy_kwh"], s["tardy_jobs"]))
                if seed == 1 and name in ("fifo", "andreas"):
                    keep[(series, name)] = result
        lines.append(f"\n### {series}\n")
        lines.append("| policy | total EUR | energy EUR | tardiness EUR | energy kWh | "
                     "mean EUR/kWh paid | tardy jobs | saved vs fifo EUR |")
        lines.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
        fifo_total = statistics.fmean(r[0] for r in rows["fifo"])
        for name, _ in POLICIES:
            r = rows[name]
            mean = [statistics.fmean(x[i] for x in r) for i in range(5)]
            lines.append(f"| {name} | {mean[0]:.3f} | {mean[1]:.3f} | {mean[2]:.3f} | "
                         f"{mean[3]:.1f} | {mean[1] / mean[3]:.4f} | {mean[4]:.1f} | "
                         f"{fifo_total - mean[0]:+.3f} |")
    return lines, keep


def plot(keep: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from andreas.experiments.figures import power_series

    fig, axes = plt.subplots(len(SERIES), 1, figsize=(11, 3.4 * len(SERIES)), sharex=True)
    for ax, series in zip(axes, SERIES):
        t = tariff(series)
        hours = np.arange(0, 30 * 3600, 600.0)
        ax2 = ax.twinx()
        ax2.plot(hours / 3600, [1000 * t.price_at(h) for h in hours], color="k", lw=1,
                 label="price")
        ax2.set_ylabel("EUR/MWh")
        for name, colour in (("fifo", "tab:orange"), ("andreas", "tab:blue")):
            r = keep[(series, name)]
            ps = power_series(r.segments, r.scenario.cluster)
            ax.step(ps.times[:-1] / 3600, ps.power_w / 1000, where="post", color=colour,
                    alpha=0.8, label=f"{name} power")
        ax.set_ylabel("cluster kW")
        ax.set_title(f"{series} (UTC), instance 1")
        ax.legend(loc="upper left", fontsize=8)
        ax2.legend(loc="upper right", fontsize=8)
    axes[-1].set_xlabel("hours")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--instances", type=int, default=3)
    args = parser.parse_args()
    lines, keep = run(args.instances)
    plot(keep, ROOT / "docs" / "img" / "prices-day.png")
    head = (ROOT / "docs" / "prices.md").read_text().split("<!-- results -->")[0] \
        if (ROOT / "docs" / "prices.md").exists() else "# Time-varying prices\n\n"
    (ROOT / "docs" / "prices.md").write_text(
        head + "<!-- results -->\n" + f"Means over {args.instances} generated instances "
        "(seeds 1-" + str(args.instances) + "), written by `python bench/prices_demo.py`.\n"
        + "\n".join(lines) + "\n\n![Cluster power against the hourly price](img/prices-day.png)\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
