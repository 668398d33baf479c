"""The comparison report: CSV/JSON tables, one PNG per figure, and a self-contained HTML page.

Every figure is drawn from the same run data that the CSV/JSON files hold: the data functions in
`figures.py` read the comparison's results, never recompute them another way.
"""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path
from typing import Mapping, Sequence

from ..model import Cluster, Scenario, Segment
from ..sim.engine import JobRecord
from . import figures as F
from .compare import BASELINES, Comparison, write_comparison

CAPTIONS = {
    "cost.png": "Mean total cost per instance for each policy, split into energy (bottom) and "
                "tardiness (top); error bars are 95 % confidence intervals of the total over all "
                "instances and seeds.",
    "gantt.png": "Who ran where on the first instance (first seed): one lane per node and GPU, "
                 "one bar per stretch of a job on one configuration. Gaps between bars of the "
                 "same colour are pauses; a job reappearing on another lane was moved or resized; "
                 "hatched bars belong to late jobs; grey bars are restart overhead.",
    "power.png": "Cluster power draw (kW) and busy GPUs per GPU type over time on the first "
                 "instance, per policy. A node with no busy GPU is off and draws nothing.",
    "emissions.png": "Grid carbon intensity (top) and each policy's cumulative emissions on the "
                     "first instance (bottom), integrated as the accounts are: every node's draw "
                     "times the intensity of the hour it falls in.",
    "lateness.png": "Cumulative distribution of job lateness (completion − due date) over every "
                    "job of every run; the share of jobs left of the dotted line finished on time.",
    "cumulative.png": "Cumulative cost over time on the first instance: solid lines are energy "
                      "plus tardiness (charged when a late job completes), dashed lines energy "
                      "only.",
}


def scenario_summary(scenario: Scenario) -> dict:
    """Nodes, GPUs per type, jobs and offered load (fastest-configuration GPU-seconds over the
    cluster's GPU-seconds during the arrival span)."""
    gpus_by_type: dict[str, int] = {}
    nodes_by_type: dict[str, int] = {}
    for n in scenario.cluster.nodes:
        gpus_by_type[n.gpu_type] = gpus_by_type.get(n.gpu_type, 0) + n.gpus
        nodes_by_type[n.gpu_type] = nodes_by_type.get(n.gpu_type, 0) + 1
    jobs = scenario.jobs
    span = (jobs[-1].submit_time - jobs[0].submit_time) if len(jobs) > 1 else 0.0
    work = 0.0
    for j in jobs:
        configs = scenario.profiles.configs(j.profile)
        best = min(configs, key=lambda c: configs[c])
        work += configs[best] * j.epochs * best[1]
    total_gpus = sum(gpus_by_type.values())
    return {"name": scenario.name, "nodes": len(scenario.cluster.nodes),
            "nodes_by_type": nodes_by_type, "gpus_by_type": gpus_by_type, "jobs": len(jobs),
            "arrival_span_s": span,
            "mean_interarrival_s": span / (len(jobs) - 1) if len(jobs) > 1 else math.nan,
            "offered_load": work / (total_gpus * span) if span > 0 else math.nan,
            "energy_price": scenario.cluster.energy_price, "pue": scenario.cluster.pue,
            "restart_overhead_s": scenario.cluster.restart_overhead_s}


def single_run_figures(cluster: Cluster, runs: Mapping[str, tuple[Sequence[Segment],
                                                                   Sequence[JobRecord]]],
                       out_dir: Path) -> list[str]:
    """Figures 2, 3 and 5 (Gantt, power, cumulative cost) for one instance, and the emissions
    over time when the cluster gives the grid's intensity: `runs` maps a policy to its segments
    and job records. Returns the PNG names written."""
    gantt, power, cumulative, emissions = {}, {}, {}, {}
    for policy, (segments, jobs) in runs.items():
        late = {j.job_id for j in jobs if j.tardiness_s > 0}
        gantt[policy] = F.gantt_data(segments, cluster, late)
        power[policy] = F.power_series(segments, cluster)
        cumulative[policy] = F.cumulative_cost_data(
            segments, cluster, {j.job_id: (j.completion_time, j.tardiness_cost) for j in jobs})
        emissions[policy] = F.emissions_data(segments, cluster)
    F.draw_gantt(gantt, out_dir / "gantt.png")
    F.draw_power(power, out_dir / "power.png")
    F.draw_cumulative_cost(cumulative, out_dir / "cumulative.png")
    names = ["gantt.png", "power.png", "cumulative.png"]
    if cluster.carbon is not None:
        F.draw_emissions(emissions, out_dir / "emissions.png")
        names.insert(2, "emissions.png")
    return names


def write_report(comparison: Comparison, out_dir: Path, title: str = "ANDREAS comparison") -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    table = write_comparison(comparison, out_dir)
    F.draw_cost_bars(F.cost_bars_data(table), out_dir / "cost.png")
    F.draw_lateness_cdf(F.lateness_cdf_data(comparison.job_rows()), out_dir / "lateness.png")
    first = {p: comparison.result_for(0, p) for p in comparison.policies}
    drawn = single_run_figures(comparison.scenarios[0].cluster,
                               {p: (r.segments, r.jobs) for p, r in first.items()}, out_dir)
    order = ["cost.png", "gantt.png", "power.png", "emissions.png", "lateness.png",
             "cumulative.png"]
    order = [n for n in order if n in drawn or n in ("cost.png", "lateness.png")]
    page = render_html(title, [scenario_summary(s) for s in comparison.scenarios], table,
                       [(name, CAPTIONS[name], (out_dir / name).read_bytes()) for name in order])
    path = out_dir / "report.html"
    path.write_text(page, encoding="utf-8")
    return path


def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float):
        return f"{v:,.2f}" if abs(v) >= 0.01 or v == 0 else f"{v:.3g}"
    return html.escape(str(v))


def render_html(title: str, summaries: Sequence[dict], table: Sequence[dict],
                figures: Sequence[tuple[str, str, bytes]]) -> str:
    baselines = [b for b in BASELINES if table and f"reduction_vs_{b}_pct" in table[0]]
    s0 = summaries[0]
    types = ", ".join(f"{s0['nodes_by_type'][t]} {html.escape(t)} nodes "
                      f"({s0['gpus_by_type'][t]} GPUs)" for t in s0["gpus_by_type"])
    rows = "".join(
        f"<tr><td>{html.escape(s['name'])}</td><td>{s['nodes']}</td><td>{s['jobs']}</td>"
        f"<td>{_fmt(s['mean_interarrival_s'])}</td><td>{_fmt(s['offered_load'])}</td></tr>"
        for s in summaries)
    carbon = bool(table) and "emissions_kg_mean" in table[0]  # the grid's intensity given
    head = ("<tr><th>policy</th><th>runs</th><th>total EUR (95 % CI)</th><th>energy EUR</th>"
            "<th>tardiness EUR</th>"
            + ("<th>carbon EUR</th><th>kg CO2eq</th>" if carbon else "")
            + "<th>tardy jobs</th><th>restarts</th><th>scheduler s</th>"
            + "".join(f"<th>vs {b}</th>" for b in baselines) + "</tr>")
    body = ""
    for r in table:
        cells = [html.escape(r["policy"]), str(r["runs"]),
                 f"{_fmt(r['total_cost_mean'])} [{_fmt(r['total_cost_ci_low'])}, "
                 f"{_fmt(r['total_cost_ci_high'])}]",
                 _fmt(r["energy_cost_mean"]), _fmt(r["tardiness_cost_mean"]),
                 *((_fmt(r["carbon_cost_mean"]), _fmt(r["emissions_kg_mean"])) if carbon
                   else ()),
                 _fmt(r["tardy_jobs_mean"]), _fmt(r["restarts_mean"]),
                 _fmt(r["scheduler_seconds_mean"])]
        for b in baselines:
            m, lo, hi = (r[f"reduction_vs_{b}_pct"], r[f"reduction_vs_{b}_ci_low"],
                         r[f"reduction_vs_{b}_ci_high"])
            cells.append("–" if m is None or math.isnan(m) else
                         f"{m:+.1f} % [{lo:+.1f}, {hi:+.1f}]")
        body += "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"
    figs = "".join(
        f'<figure><img alt="{html.escape(name)}" src="data:image/png;base64,'
        f'{base64.b64encode(data).decode()}"><figcaption><b>Figure {i}.</b> '
        f"{html.escape(caption)}</figcaption></figure>"
        for i, (name, caption, data) in enumerate(figures, 1))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border: 1px solid #ccc; padding: 4px 8px; text-align: right; }}
th:first-child, td:first-child {{ text-align: left; }}
figure {{ margin: 2em 0; }} img {{ max-width: 100%; }}
figcaption {{ color: #444; font-size: 0.95em; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<h2>Scenario</h2>
<p>{len(summaries)} instance(s). Cluster: {types}; energy price {s0['energy_price']} EUR/kWh,
PUE {s0['pue']}, restart overhead {s0['restart_overhead_s']} s. Offered load is the jobs'
GPU-seconds on their fastest configuration over the cluster's GPU-seconds during the arrival
span.</p>
<table><tr><th>instance</th><th>nodes</th><th>jobs</th><th>mean inter-arrival s</th>
<th>offered load</th></tr>{rows}</table>
<h2>Comparison</h2>
<p>Means over all runs (instances × seeds for randomised policies) with 95 % confidence
intervals. Cost reductions are computed per instance against each baseline, then averaged.</p>
<table>{head}{body}</table>
<h2>Figures</h2>
{figs}
</body></html>
"""
