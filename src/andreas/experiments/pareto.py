"""The carbon trade-off drawn: emissions against cost, energy and tardiness, one line per policy
through the carbon prices of a sweep (`andreas sweep --carbon-prices`).

A point is a (policy, carbon price) mean. What a run pays apart from the carbon charge (energy
plus tardiness) is the cost axis, so moving along a policy's line shows what each tonne avoided
costs; the grey steps join the points that no other point beats on both emissions and that cost
(the Pareto front).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from .figures import plt, policy_colors, policy_styles

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def pareto_data(summary: Sequence[dict], policies: Sequence[str]) -> dict[str, dict]:
    """{policy: {carbon_price, emissions_kg, cost, energy, tardiness: arrays by rising carbon
    price}},
    from the sweep's summary rows (means); cost = energy + tardiness (no carbon charge)."""
    out = {}
    for p in policies:
        rows = sorted((r for r in summary if r["policy"] == p), key=lambda r: r["carbon_price"])
        if rows:
            out[p] = {
                "carbon_price": np.array([r["carbon_price"] for r in rows]),
                "emissions_kg": np.array([r["emissions_kg_mean"] for r in rows]),
                "cost": np.array([r["energy_cost_mean"] + r["tardiness_cost_mean"]
                                  for r in rows]),
                "energy": np.array([r["energy_cost_mean"] for r in rows]),
                "tardiness": np.array([r["tardiness_cost_mean"] for r in rows])}
    return out


def pareto_front(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other point beats on both coordinates (lower is better on each), by rising
    first coordinate; of equal points, one."""
    front: list[tuple[float, float]] = []
    for x, y in sorted(set(points)):
        if not front or y < front[-1][1]:
            front.append((x, y))
    return front


def _scale(ax, values: np.ndarray) -> None:
    """Log when the values span more than two decades (baselines' tardiness dwarfs andreas's);
    symmetric log when some are zero."""
    positive = values[values > 0]
    if not positive.size:
        return
    if positive.size == values.size and values.max() > 100 * positive.min():
        ax.set_yscale("log")
    elif positive.size < values.size and values.max() > 100:
        ax.set_yscale("symlog", linthresh=1.0)  # linear below 1 EUR


def draw_pareto(summary: Sequence[dict], policies: Sequence[str], path: Path) -> None:
    data = pareto_data(summary, policies)
    colors = policy_colors(list(policies))
    styles = policy_styles(list(policies))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), layout="constrained")
    for ax, y, label in ((axes[0], "cost", "energy + tardiness (EUR)"),
                         (axes[1], "energy", "energy (EUR)"),
                         (axes[2], "tardiness", "tardiness (EUR)")):
        for p, d in data.items():
            ax.plot(d["emissions_kg"], d[y], color=colors[p], linestyle=styles[p], label=p,
                    marker=MARKERS[list(policies).index(p) % len(MARKERS)], fillstyle="none")
            for x, v, price in zip(d["emissions_kg"], d[y], d["carbon_price"]):
                ax.annotate(f"{price:g}", (x, v), textcoords="offset points", xytext=(4, 3),
                            fontsize=7, color=colors[p])
        if y == "cost" and data:
            front = pareto_front([(float(x), float(v)) for d in data.values()
                                  for x, v in zip(d["emissions_kg"], d["cost"])])
            xs, ys = zip(*front)
            ax.step(xs, ys, where="post", color="grey", linestyle="--", linewidth=1,
                    label="Pareto front", zorder=0)
        _scale(ax, np.concatenate([d[y] for d in data.values()]) if data else np.zeros(0))
        ax.set_xlabel("emissions (kg CO2eq)")
        ax.set_ylabel(label)
    axes[2].legend(fontsize=8)
    fig.suptitle("Emissions against cost, per policy; labels: carbon price (EUR/t)")
    fig.savefig(path)
    plt.close(fig)
