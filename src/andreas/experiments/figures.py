"""Figures for reports: each has a pure data function (tested against the CSV/JSON numbers) and
a drawing function that only renders that data.

Colours are the Okabe-Ito palette, safe for colour-blind readers. Matplotlib runs headless (Agg).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ..cost import node_draw_w  # noqa: E402
from ..model import Cluster, Segment  # noqa: E402

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442",
             "#000000")
plt.rcParams.update({"font.size": 11, "axes.titlesize": 12, "axes.labelsize": 11,
                     "legend.fontsize": 9, "figure.dpi": 100, "savefig.bbox": "tight"})


LINESTYLES = ("-", "--", ":", "-.", (0, (5, 1)), (0, (3, 1, 1, 1)), (0, (1, 1)), "-")


def policy_colors(policies: Sequence[str]) -> dict[str, str]:
    return {p: OKABE_ITO[i % len(OKABE_ITO)] for i, p in enumerate(policies)}


def policy_styles(policies: Sequence[str]) -> dict[str, object]:
    """Line styles as well as colours, so policies whose lines coincide stay visible."""
    return {p: LINESTYLES[i % len(LINESTYLES)] for i, p in enumerate(policies)}


# --------------------------------------------------------------------------- 1. cost bars
def cost_bars_data(table: Sequence[Mapping]) -> list[dict]:
    """Per policy: mean energy and tardiness cost and the 95 % CI of the total (EUR)."""
    return [{"policy": r["policy"], "energy": r["energy_cost_mean"],
             "tardiness": r["tardiness_cost_mean"], "total": r["total_cost_mean"],
             "low": r["total_cost_ci_low"], "high": r["total_cost_ci_high"]} for r in table]


def draw_cost_bars(data: list[dict], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.2))
    x = np.arange(len(data))
    energy = [d["energy"] for d in data]
    tard = [d["tardiness"] for d in data]
    ax.bar(x, energy, color=OKABE_ITO[0], label="energy")
    ax.bar(x, tard, bottom=energy, color=OKABE_ITO[1], label="tardiness")
    totals = np.array([d["total"] for d in data])
    err = np.array([[d["total"] - d["low"] for d in data], [d["high"] - d["total"] for d in data]])
    ax.errorbar(x, totals, yerr=err, fmt="none", ecolor="black", capsize=4, label="95 % CI")
    for xi, t, d in zip(x, totals, data):
        top = d["high"] if d["high"] == d["high"] else t  # NaN-safe
        ax.annotate(f"{t:.2f}", (xi, top), textcoords="offset points", xytext=(0, 4),
                    ha="center", fontsize=9)
    ax.margins(y=0.12)
    ax.set_xticks(x, [d["policy"] for d in data])
    ax.set_ylabel("mean total cost per instance (EUR)")
    ax.set_title("Total cost per policy: energy + tardiness")
    ax.legend(loc="best")
    fig.savefig(path)
    plt.close(fig)


# --------------------------------------------------------------------------- 2. Gantt
@dataclass(frozen=True)
class GanttBar:
    lane: int
    start: float
    end: float
    job_id: str
    phase: str
    late: bool


def gantt_data(segments: Sequence[Segment], cluster: Cluster,
               late_jobs: set[str]) -> tuple[list[str], list[GanttBar]]:
    """A lane per node and GPU; each segment takes the lowest-numbered GPUs free at its start."""
    lanes: list[str] = []
    first_lane: dict[str, int] = {}
    for node in cluster.nodes:
        first_lane[node.name] = len(lanes)
        lanes += [f"{node.name}/gpu{g}" for g in range(node.gpus)]
    free_at: dict[str, list[float]] = {n.name: [-np.inf] * n.gpus for n in cluster.nodes}
    bars = []
    for seg in sorted(segments, key=lambda s: (s.start, s.end, s.node, s.job_id)):
        slots = free_at[seg.node]
        chosen = [g for g, t in enumerate(slots) if t <= seg.start][: seg.gpus]
        if len(chosen) < seg.gpus:
            raise ValueError(f"node {seg.node} over-subscribed at t={seg.start}")
        for g in chosen:
            slots[g] = seg.end
            bars.append(GanttBar(first_lane[seg.node] + g, seg.start, seg.end, seg.job_id,
                                 seg.phase, seg.job_id in late_jobs))
    return lanes, bars


def draw_gantt(panels: Mapping[str, tuple[list[str], list[GanttBar]]], path: Path) -> None:
    n = len(panels)
    lanes_n = max(len(lanes) for lanes, _ in panels.values())
    fig, axes = plt.subplots(n, 1, figsize=(12, 0.9 + n * (0.6 + 0.22 * lanes_n)), squeeze=False,
                             sharex=True)
    for ax, (policy, (lanes, bars)) in zip(axes[:, 0], panels.items()):
        job_ids = sorted({b.job_id for b in bars})
        color = {j: OKABE_ITO[i % 7] for i, j in enumerate(job_ids)}
        for b in bars:
            if b.phase == "restart":
                ax.barh(b.lane, b.end - b.start, left=b.start, color="#999999", height=0.8)
                continue
            ax.barh(b.lane, b.end - b.start, left=b.start, color=color[b.job_id], height=0.8,
                    edgecolor="#D55E00" if b.late else "white",
                    linewidth=1.6 if b.late else 0.4, hatch="///" if b.late else None)
        ax.set_yticks(range(len(lanes)), lanes, fontsize=7)
        ax.invert_yaxis()
        ax.set_title(f"{policy}: one bar per job stretch; gaps are pauses, a job changing lane "
                     f"moved; hatched = late job, grey = restart", fontsize=10)
    axes[-1, 0].set_xlabel("time (s)")
    fig.savefig(path)
    plt.close(fig)


# --------------------------------------------------------------------------- 3. power
@dataclass(frozen=True)
class PowerSeries:
    times: np.ndarray  # interval boundaries, len k+1
    power_w: np.ndarray  # cluster draw over each interval, len k
    busy_by_type: dict[str, np.ndarray]  # busy GPUs of each type over each interval

    def energy_joules(self) -> float:
        return float(np.sum(self.power_w * np.diff(self.times)))


def power_series(segments: Sequence[Segment], cluster: Cluster) -> PowerSeries:
    """Cluster power and busy GPUs per type, piecewise constant between segment boundaries.
    With an idle draw (a GPU type whose nodes stay powered) the series starts at time 0."""
    if not segments:
        return PowerSeries(np.zeros(1), np.zeros(0), {t: np.zeros(0) for t in cluster.gpu_types})
    idle_any = any(gt.idle_w for gt in cluster.gpu_types.values())
    times = np.unique([t for s in segments for t in (s.start, s.end)] + ([0.0] if idle_any else []))
    k = len(times) - 1
    by_node: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(k + 1))
    saved = np.zeros(k + 1)  # power limits: watts below the table, as a step function
    for s in segments:
        d = by_node[s.node]
        i, j = np.searchsorted(times, s.start), np.searchsorted(times, s.end)
        d[i] += s.gpus
        d[j] -= s.gpus
        if s.saved_w:
            saved[i] += s.saved_w
            saved[j] -= s.saved_w
    power = -np.cumsum(saved)[:-1]
    busy_by_type = {t: np.zeros(k) for t in cluster.gpu_types}
    for node in cluster.nodes:
        gt = cluster.gpu_types[node.gpu_type]
        if node.name not in by_node:
            power += gt.idle_w
            continue
        busy = np.rint(np.cumsum(by_node[node.name])[:-1]).astype(int)
        table = np.array([node_draw_w(gt, b) for b in range(len(gt.node_power_w) + 1)])
        power += table[busy]
        busy_by_type[node.gpu_type] += busy
    return PowerSeries(times, power, busy_by_type)


def draw_power(series: Mapping[str, PowerSeries], path: Path) -> None:
    policies = list(series)
    colors, styles = policy_colors(policies), policy_styles(policies)
    types = list(next(iter(series.values())).busy_by_type)
    fig, axes = plt.subplots(1 + len(types), 1, figsize=(11, 2.6 * (1 + len(types))),
                             sharex=True)
    for p in policies:
        s = series[p]
        if len(s.power_w) == 0:
            continue
        axes[0].stairs(s.power_w / 1000, s.times, color=colors[p], label=p, linewidth=1.3,
                       linestyle=styles[p])
        for ax, t in zip(axes[1:], types):
            ax.stairs(s.busy_by_type[t], s.times, color=colors[p], label=p, linewidth=1.3,
                      linestyle=styles[p])
    axes[0].set_ylabel("cluster power (kW)")
    axes[0].set_title("Cluster power and busy GPUs per GPU type over time")
    axes[0].legend(ncol=len(policies), loc="upper right")
    for ax, t in zip(axes[1:], types):
        ax.set_ylabel(f"busy {t} GPUs")
    axes[-1].set_xlabel("time (s)")
    fig.savefig(path)
    plt.close(fig)


# --------------------------------------------------------------------------- 4. lateness CDF
def lateness_cdf_data(job_rows: Sequence[Mapping]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per policy: sorted lateness (completion − due, s; negative = early) and the fraction of
    jobs at or below each value, over every job of every run."""
    by_policy: dict[str, list[float]] = defaultdict(list)
    for r in job_rows:
        by_policy[r["policy"]].append(float(r["lateness_s"]))
    out = {}
    for p, xs in by_policy.items():
        x = np.sort(np.array(xs))
        out[p] = (x, np.arange(1, len(x) + 1) / len(x))
    return out


def draw_lateness_cdf(data: Mapping[str, tuple[np.ndarray, np.ndarray]], path: Path) -> None:
    colors, styles = policy_colors(list(data)), policy_styles(list(data))
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for p, (x, y) in data.items():
        ax.step(x / 3600, y, where="post", color=colors[p], label=p, linewidth=1.5,
                linestyle=styles[p])
    ax.axvline(0, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("lateness: completion − due date (h); left of 0 = on time")
    ax.set_ylabel("fraction of jobs")
    ax.set_title("Distribution of job lateness")
    ax.legend(loc="lower right")
    fig.savefig(path)
    plt.close(fig)


# --------------------------------------------------------------------------- 5. cumulative cost
@dataclass(frozen=True)
class CumulativeCost:
    times: np.ndarray
    energy_eur: np.ndarray  # cumulative energy cost at each time
    tardiness_eur: np.ndarray  # cumulative tardiness cost (charged at completion)

    @property
    def total_eur(self) -> np.ndarray:
        return self.energy_eur + self.tardiness_eur


def cumulative_cost_data(segments: Sequence[Segment], cluster: Cluster,
                         completions: Mapping[str, tuple[float, float]]) -> CumulativeCost:
    """completions: job_id -> (completion time, tardiness cost)."""
    ps = power_series(segments, cluster)
    events = sorted(completions.values())
    times = np.unique(np.concatenate([ps.times, [t for t, _ in events] or [0.0]]))
    if cluster.tariff is None:
        energy_at_bounds = np.concatenate(([0.0], np.cumsum(ps.power_w * np.diff(ps.times))))
        energy = np.interp(times, ps.times, energy_at_bounds) * cluster.eur_per_joule()
    else:  # price changes inside a step: integrate piece by piece at every time asked for
        energy = cumulative_integral(ps, times, cluster.energy_eur)
    tard_times = np.array([t for t, _ in events])
    tard_cum = np.cumsum([c for _, c in events]) if events else np.zeros(0)
    idx = np.searchsorted(tard_times, times, side="right")
    tardiness = np.concatenate(([0.0], tard_cum))[idx]
    return CumulativeCost(times, energy, tardiness)


def cumulative_integral(ps: PowerSeries, times: np.ndarray,
                        integral: Callable[[float, float, float], float]) -> np.ndarray:
    """At each of `times`, the running total of `integral(watts, t0, t1)` (a price or an
    intensity integrated over the draw) from the series' start: whole steps summed, the step
    under way integrated up to that time."""
    steps = np.searchsorted(ps.times, times, side="right") - 1
    bounds = np.concatenate(([0.0], np.cumsum([
        integral(w, a, b) for w, a, b in zip(ps.power_w, ps.times[:-1], ps.times[1:])])))
    return np.array([bounds[min(max(i, 0), len(bounds) - 1)] + (integral(
        ps.power_w[i], ps.times[i], t) if 0 <= i < len(ps.power_w) else 0.0)
        for i, t in zip(steps, times)])


def draw_cumulative_cost(data: Mapping[str, CumulativeCost], path: Path) -> None:
    colors = policy_colors(list(data))
    fig, ax = plt.subplots(figsize=(9, 4.2))
    for p, c in data.items():
        ax.plot(c.times / 3600, c.total_eur, color=colors[p], label=f"{p} (total)", linewidth=1.5)
        ax.plot(c.times / 3600, c.energy_eur, color=colors[p], linestyle="--", linewidth=1,
                label=f"{p} (energy)")
    finals = [float(c.total_eur[-1]) for c in data.values() if len(c.total_eur)]
    if finals and min(finals) > 0 and max(finals) > 20 * min(finals):
        ax.set_yscale("symlog", linthresh=max(1e-3, min(finals) / 10))  # spans decades
    ax.set_xlabel("time (h)")
    ax.set_ylabel("cumulative cost (EUR)")
    ax.set_title("Cumulative cost over time (solid: total, dashed: energy only)")
    ax.legend(ncol=2, fontsize=8)
    fig.savefig(path)
    plt.close(fig)


# --------------------------------------------------------------------------- 6. emissions
@dataclass(frozen=True)
class EmissionSeries:
    times: np.ndarray  # the draw's steps and the intensity's changes between them
    emitted_kg: np.ndarray  # cumulative kg CO2eq at each time
    intensity_g: np.ndarray  # the grid's intensity (g/kWh) from each time to the next


def emissions_data(segments: Sequence[Segment], cluster: Cluster) -> EmissionSeries:
    """Cumulative emissions of one run, integrated exactly as the accounts are
    (`Cluster.carbon_g` over the power series), at every change of draw or of intensity."""
    ps = power_series(segments, cluster)
    if cluster.carbon is None or len(ps.power_w) == 0:
        return EmissionSeries(np.zeros(0), np.zeros(0), np.zeros(0))
    start, end = float(ps.times[0]), float(ps.times[-1])
    times = np.unique(np.concatenate([ps.times, cluster.carbon.changes(start, end)]))
    emitted = cumulative_integral(ps, times, cluster.carbon_g) / 1000.0
    intensity = np.array([cluster.carbon.price_at(t) for t in times])
    return EmissionSeries(times, emitted, intensity)


def draw_emissions(data: Mapping[str, EmissionSeries], path: Path) -> None:
    colors, styles = policy_colors(list(data)), policy_styles(list(data))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 5.6), sharex=True,
                                      height_ratios=(1, 2))
    longest = max(data.values(), key=lambda e: e.times[-1] if len(e.times) else 0.0)
    if len(longest.times):
        top.stairs(longest.intensity_g[:-1], longest.times / 3600, color="grey")
    top.set_ylabel("grid g CO2eq/kWh")
    top.set_title("Grid carbon intensity and cumulative emissions over time")
    for p, e in data.items():
        bottom.plot(e.times / 3600, e.emitted_kg, color=colors[p], linestyle=styles[p],
                    label=p, linewidth=1.4)
    bottom.set_ylabel("emitted (kg CO2eq)")
    bottom.set_xlabel("time (h)")
    bottom.legend(ncol=min(4, len(data)), fontsize=8)
    fig.savefig(path)
    plt.close(fig)
