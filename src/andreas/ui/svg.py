"""Charts drawn on the server as SVG: the plan's Gantt chart and a step chart (power over time).

No chart library and no script: the page gets finished markup, which works offline, under a
strict Content-Security-Policy, and with a screen reader (every bar has a <title>).
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from ..clock import moment

GOLDEN_ANGLE = 137.508  # degrees: successive hues as far apart as they can be


def job_colour(index: int) -> str:
    """A distinct colour for the `index`-th job: hues a golden angle apart, lightness
    alternating so that neighbours differ in brightness too (for colour-blind eyes); bars
    carry their job's name as well, so no job is told by colour alone."""
    hue = (index * GOLDEN_ANGLE) % 360
    lightness = (0.86, 0.74)[index % 2]
    return f"oklch({lightness:.2f} 0.11 {hue:.1f})"


@dataclass(frozen=True)
class Bar:
    """One stretch on one lane: a run that happened (`kind` "run") or a forecast one."""

    lane: str  # "node/gpu"
    start: float
    end: float
    label: str
    colour: str
    kind: str = "run"  # run | forecast | busy (another user's job)
    late: bool = False
    job_id: str = ""
    run_id: int | None = None
    tooltip: str = ""


def _clock(t: float, span: float) -> str:
    when = moment(t)
    return "-" if when is None else when.strftime(
        "%H:%M:%S" if span < 600 else "%H:%M" if span < 86400 else "%d %H:%M")


def _ticks(t0: float, t1: float, count: int = 6) -> list[float]:
    """Round times between t0 and t1: steps of 10 s to a day."""
    span = max(t1 - t0, 1.0)
    for step in (10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400):
        if span / step <= count:
            break
    first = (t0 // step + 1) * step
    return [first + i * step for i in range(int((t1 - first) // step) + 1)]


def gantt(lanes: list[str], bars: list[Bar], t0: float, t1: float, now: float, *,
          width: int = 1200, lane_h: int = 26, label_w: int = 110) -> str:
    """A Gantt chart: one lane per node GPU, time across, a "now" line; runs solid, forecast
    stretches hatched-outline, late ones marked LATE with a red border."""
    span = max(t1 - t0, 1.0)
    plot_w = width - label_w - 10
    top = 24
    height = top + lane_h * max(1, len(lanes)) + 8
    row = {lane: i for i, lane in enumerate(lanes)}

    def x(t: float) -> float:
        return label_w + (min(max(t, t0), t1) - t0) / span * plot_w

    out = [f'<svg class="gantt" role="img" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg" '
           f'aria-label="Plan: runs and forecast per node GPU">']
    for i, lane in enumerate(lanes):
        y = top + i * lane_h
        out.append(f'<rect class="lane" x="{label_w}" y="{y}" width="{plot_w}" '
                   f'height="{lane_h}" fill="{"#f6f7f9" if i % 2 else "#ffffff"}"/>')
        out.append(f'<text class="lane-label" x="{label_w - 6}" y="{y + lane_h * 0.65:.1f}" '
                   f'text-anchor="end" font-size="12">{escape(lane)}</text>')
    for t in _ticks(t0, t1):
        out.append(f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{top - 4}" y2="{height - 8}" '
                   f'stroke="#d0d4da" stroke-width="1"/>')
        out.append(f'<text x="{x(t):.1f}" y="{top - 8}" text-anchor="middle" '
                   f'font-size="11">{_clock(t, span)}</text>')
    for b in bars:
        if b.lane not in row or b.end <= t0 or b.start >= t1:
            continue
        x0, x1 = x(b.start), x(b.end)
        y = top + row[b.lane] * lane_h + 3
        w = max(x1 - x0, 2.0)
        stroke, dash = ("#c0392b", "") if b.late else ("#333333", "")
        if b.kind == "forecast":
            dash = ' stroke-dasharray="5 3"'
        fill = "#9aa0a6" if b.kind == "busy" else b.colour
        opacity = ' fill-opacity="0.55"' if b.kind == "forecast" else ""
        attrs = f'data-job="{escape(b.job_id)}" data-kind="{b.kind}"'
        if b.run_id is not None:
            attrs += f' data-run="{b.run_id}"'
        label = b.label + (" LATE" if b.late else "")
        out.append(f'<g class="bar {b.kind}{" late" if b.late else ""}" {attrs}>'
                   f'<title>{escape(b.tooltip or label)}</title>'
                   f'<rect x="{x0:.1f}" y="{y}" width="{w:.1f}" height="{lane_h - 6}" rx="3" '
                   f'fill="{fill}"{opacity} stroke="{stroke}" '
                   f'stroke-width="{2.5 if b.late else 1}"{dash}/>')
        if w > 40:
            out.append(f'<text x="{x0 + 4:.1f}" y="{y + lane_h * 0.55:.1f}" font-size="11" '
                       f'fill="#111">{escape(label[: max(3, int(w / 7))])}</text>')
        out.append("</g>")
    if t0 <= now <= t1:
        out.append(f'<line class="now" x1="{x(now):.1f}" x2="{x(now):.1f}" y1="{top - 4}" '
                   f'y2="{height - 4}" stroke="#c0392b" stroke-width="2"/>')
        out.append(f'<text x="{x(now) + 3:.1f}" y="{height - 1}" font-size="11" '
                   f'fill="#c0392b">now</text>')
    out.append("</svg>")
    return "".join(out)


def step_chart(times: list[float], values: list[float], *, unit: str, title: str,
               width: int = 600, height: int = 180, label=None,
               reference: tuple[float, str] | None = None, floor: float | None = 0.0) -> str:
    """A step chart of a piecewise-constant series (values[i] holds from times[i] to
    times[i+1]) with its axes, e.g. the cluster's power over the last hours. `label` formats
    a value for the y axis (default: the number and `unit`); `reference` draws a dashed
    horizontal line with its name (a due date, a measured cost); `floor` is the axis's lowest
    value (None: the data's)."""
    left, bottom, top = 76, 22, 10
    plot_w, plot_h = width - left - 10, height - bottom - top
    out = [f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" xmlns="http://www.w3.org/2000/svg" aria-label="{escape(title)}">',
           f'<title>{escape(title)}</title>']
    if len(times) < 2 or not values:
        out.append(f'<text x="{left}" y="{height / 2:.0f}" font-size="12">no data yet</text>'
                   "</svg>")
        return "".join(out)
    t0, t1 = times[0], times[-1]
    seen = list(values) + ([reference[0]] if reference else [])
    low = min(seen) if floor is None else floor
    peak = max(max(seen), low + 1e-9)
    if floor is None:  # a little room above and below the data
        pad = 0.05 * (peak - low) or 1.0
        low, peak = low - pad, peak + pad

    def x(t: float) -> float:
        return left + (t - t0) / max(t1 - t0, 1e-9) * plot_w

    def y(v: float) -> float:
        return top + plot_h - (v - low) / (peak - low) * plot_h

    def fmt(v: float) -> str:
        return label(v) if label else f"{v:.0f} {unit}"

    points = []
    for i, v in enumerate(values):
        points.append(f"{x(times[i]):.1f},{y(v):.1f}")
        points.append(f"{x(times[i + 1]):.1f},{y(v):.1f}")
    out.append(f'<polyline points="{" ".join(points)}" fill="none" stroke="#1f5fa8" '
               f'stroke-width="2"/>')
    for frac in (0.0, 0.5, 1.0):
        v = low + (peak - low) * frac
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
                   f'stroke="#e1e4e8"/>')
        out.append(f'<text x="{left - 4}" y="{y(v) + 4:.1f}" font-size="11" '
                   f'text-anchor="end">{escape(fmt(v))}</text>')
    if reference is not None:
        v, name = reference
        out.append(f'<line class="reference" x1="{left}" x2="{left + plot_w}" y1="{y(v):.1f}" '
                   f'y2="{y(v):.1f}" stroke="#c0392b" stroke-dasharray="6 4"/>')
        out.append(f'<text x="{left + plot_w - 4}" y="{y(v) - 4:.1f}" font-size="11" '
                   f'text-anchor="end" fill="#c0392b">{escape(name)}</text>')
    for t in _ticks(t0, t1, 5):
        out.append(f'<text x="{x(t):.1f}" y="{height - 6}" font-size="11" '
                   f'text-anchor="middle">{_clock(t, t1 - t0)}</text>')
    out.append("</svg>")
    return "".join(out)
