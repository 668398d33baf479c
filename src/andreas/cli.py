"""The `andreas` command line: thin wrappers that parse arguments, call the library and print.

Every user error (bad scenario file, bad option) prints one line and exits with code 2.
"""

from __future__ import annotations

import inspect
import json
import math
import sys
import typing
from functools import wraps
from pathlib import Path
from typing import Callable, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .client_cli import register as register_client_commands
from .console import console, err, user_errors
from .errors import AndreasError
from .experiments.compare import BASELINES, compare, write_comparison
from .experiments.runner import default_workers, plan_runs
from .io import load_scenario, write_scenario
from .policies import POLICIES, make_policy
from .policies.registry import option_specs, options_for, shared_options
from .policies.steps.pipeline import HOLD_SHARES
from .sim.engine import simulate
from .sim.generate import (
    ARRIVAL_PATTERNS,
    DEFAULT_LAMBDA,
    WEIGHT_RANGE,
    WorkloadShape,
    generate,
    generate_paper_style,
    load_template,
)
from .sim.output import atomic_directory, load_output, recompute, write_result

app = typer.Typer(add_completion=True, no_args_is_help=True,
                  help="ANDREAS: energy- and deadline-aware scheduling of deep-learning jobs on "
                       "GPU clusters. Simulate policies, generate workloads, compare results.")


def _version(value: bool) -> None:
    if value:
        from . import __version__

        console.print(f"andreas {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """ANDREAS: energy- and deadline-aware scheduling of deep-learning jobs on GPU clusters."""


def parse_seeds(text: str) -> list[int]:
    """'1-5' -> [1..5]; '1,3,7' -> [1, 3, 7]; ranges and lists combine: '1-3,10'."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                a, b = part.split("-", 1)
                seeds.extend(range(int(a), int(b) + 1))
            elif part:
                seeds.append(int(part))
    except ValueError:
        raise AndreasError(f"--seeds: expected numbers and ranges like '1-5' or '1,3', "
                           f"got {text!r}") from None
    if not seeds or any(s < 0 for s in seeds):
        raise AndreasError(f"--seeds: expected non-negative seeds, got {text!r}")
    return list(dict.fromkeys(seeds))


def check_period(period: float | None, period_only: bool, every_round: bool = False) -> None:
    """The CLI's own words for the rounds options (the library names its parameters)."""
    if period is not None and not period > 0:
        raise AndreasError(f"--period must be > 0 seconds, got {period}")
    if period_only and period is None:
        raise AndreasError("--period-only needs --period")
    if every_round and not period_only:
        raise AndreasError("--every-round needs --period-only")


def parse_pair(option: str, text: str) -> tuple[float, float]:
    """'LO,HI' -> (LO, HI), two numbers."""
    parts = text.split(",")
    try:
        lo, hi = (float(x) for x in parts)
    except ValueError:
        raise AndreasError(f"{option}: expected two numbers 'LO,HI', got {text!r}") from None
    return lo, hi


def parse_policies(text: str) -> list[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    for name in names:
        if name not in POLICIES:
            raise AndreasError(f"--policies: unknown policy {name!r}; expected one of "
                               f"{', '.join(POLICIES)}")
    if not names:
        raise AndreasError("--policies: expected at least one policy")
    return names


# Policy options as flags: one per option of any policy, generated from the options'
# registry (policies/registry.py), so that a flag, --set and service.yaml mean the same. A
# step's option has its step's name first: wait.share is --wait-share. Shorter names kept for
# the options most used: --resize, --consolidate; --hold sets the three holding steps' shares.
FLAG_ALIASES = {"resize_max_load": ("--resize",), "consolidate.margin": ("--consolidate",)}
FLAG_OFF = {"resize_max_load": "0"}  # '--resize off' = never resize
FLAG_EXPANDS = {"hold": (HOLD_SHARES, "the share of its run time a held job keeps as slack, "
                         "for the steps that hold jobs (" + ", ".join(HOLD_SHARES) + "); off "
                         "turns them off")}


def _policy_flag_specs() -> dict:
    specs: dict = {}
    for name in POLICIES:
        for key, spec in option_specs(name).items():
            if key != "seed":  # each command has its own --seed
                specs.setdefault(key, spec)
    return specs


def _flag_name(key: str) -> str:
    """The Python name of an option's flag parameter (`wait.share` -> flag_wait__share)."""
    return "flag_" + key.replace(".", "__")


def _flag_parameters() -> list[inspect.Parameter]:
    out = []
    for key, spec in _policy_flag_specs().items():
        dashed = "--" + key.replace("_", "-").replace(".", "-")
        default = "off" if spec.default is None else (
            ",".join(spec.default) if isinstance(spec.default, tuple) else spec.default)
        text = f"Policy option {key}: {spec.help} (default {default})."
        if spec.kind == "bool":
            option = typer.Option(None, f"{dashed}/--no-{dashed[2:]}", help=text,
                                  rich_help_panel="Policy options")
            annotation: object = Optional[bool]
        else:
            option = typer.Option(None, dashed, *FLAG_ALIASES.get(key, ()), help=text,
                                  rich_help_panel="Policy options")
            annotation = Optional[str]
        out.append(inspect.Parameter(_flag_name(key), inspect.Parameter.KEYWORD_ONLY,
                                     default=option, annotation=annotation))
    for flag, (_, text) in FLAG_EXPANDS.items():
        out.append(inspect.Parameter(
            "expand_" + flag, inspect.Parameter.KEYWORD_ONLY, annotation=Optional[str],
            default=typer.Option(None, "--" + flag, help=text + ".",
                                 rich_help_panel="Policy options")))
    return out


def with_policy_flags(fn: Callable) -> Callable:
    """Give a command every policy option as a flag; it receives the ones given as
    `policy_flags` (a dict of option: value, still to be checked against its policies)."""
    hints = typing.get_type_hints(fn)
    own = [p.replace(annotation=hints.get(p.name, p.annotation))
           for p in inspect.signature(fn).parameters.values() if p.name != "policy_flags"]
    flags = _flag_parameters()
    keys = {_flag_name(key): key for key in _policy_flag_specs()}

    @wraps(fn)
    def wrapper(*args, **kwargs):
        given = {}
        for flag, (targets, _) in FLAG_EXPANDS.items():  # first: a flag of its own wins
            value = kwargs.pop("expand_" + flag)
            if value is not None:
                spec = _policy_flag_specs()[targets[0]]
                try:
                    spec.convert(value)
                except ValueError:
                    raise typer.BadParameter(f"expected a number or off, got {value!r}",
                                             param_hint="--" + flag) from None
                given.update({key: value for key in targets})
        for param in flags:
            if param.name not in keys:
                continue
            value = kwargs.pop(param.name)
            if value is not None:
                key = keys[param.name]
                given[key] = FLAG_OFF.get(key, value) if value == "off" else value
        return fn(*args, policy_flags=given, **kwargs)

    wrapper.__signature__ = inspect.Signature(own + flags)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in own + flags}
    return wrapper


SetOption = typer.Option(None, "--set", help="A policy option as key=value (repeatable), "
                         "e.g. --set wait.share=off; `andreas policies NAME` lists them.")
OptionsFile = typer.Option(None, "--policy-options", help="A YAML file of policy options "
                           "(the same mapping as service.yaml's policy_options); --set wins.")
Period = typer.Option(None, help="Also reschedule every PERIOD simulated seconds.")
RayAddress = typer.Option(None, "--ray", metavar="ADDRESS",
                          help="Run each simulation as a task on this Ray cluster ('auto', "
                          "or host:port of its head); results are those of a local run.")
PeriodOnly = typer.Option(False, "--period-only", help="Reschedule only every --period "
                          "seconds (rounds, as Gavel does), not at each arrival and "
                          "completion: bounded decisions on long traces. A round where "
                          "nothing happened (no arrival, completion, price change or revisit "
                          "time) keeps the plan.")
EveryRound = typer.Option(False, "--every-round", help="With --period-only: ask the policy "
                          "at quiet rounds too.")
Overhead = typer.Option(None, "--restart-overhead", min=0.0,
                        help="Generated scenarios: seconds lost at each restart (default: the "
                             "template's).")


@app.command("simulate")
@user_errors
@with_policy_flags
def simulate_cmd(
    scenario_dir: Path = typer.Argument(..., help="Scenario directory (cluster.yaml, "
                                        "profiles.csv, workload.csv)."),
    policy: str = typer.Option("andreas", help=f"One of: {', '.join(POLICIES)}."),
    seed: int = typer.Option(1, help="Seed of a randomised policy."),
    out: Path = typer.Option(..., help="Output directory (summary.json, jobs.csv, segments.csv)."),
    period: Optional[float] = Period,
    period_only: bool = PeriodOnly,
    every_round: bool = EveryRound,
    set_options: Optional[list[str]] = SetOption, options_file: Optional[Path] = OptionsFile,
    policy_flags: Optional[dict] = None,
) -> None:
    """Simulate one policy on one scenario and write its schedule and costs."""
    parse_policies(policy)
    check_period(period, period_only, every_round)
    params = shared_options([policy], policy_flags or {}, options_file, set_options or [])
    scenario = load_scenario(scenario_dir)
    with _progress() as bar:
        task = bar.add_task(f"{policy} on {scenario.name}", total=len(scenario.jobs))
        chosen = make_policy(policy, **options_for(policy, {**params, "seed": seed}))
        result = simulate(scenario, chosen, period=period,
                          seed=seed if POLICIES[policy].randomized else None,
                          on_progress=lambda t, done, total: bar.update(task, completed=done),
                          period_only=period_only, every_round=every_round)
    write_result(result, out)
    s = result.summary
    carbon = (f" + carbon {s['carbon_cost']:.4f} ({s['emissions_kg']:.3f} kg CO2eq)"
              if "emissions_kg" in s else "")
    console.print(f"{policy}: total {s['total_cost']:.4f} EUR = energy {s['energy_cost']:.4f}"
                  f"{carbon} + tardiness {s['tardiness_cost']:.4f}; {s['tardy_jobs']}/{s['jobs']} "
                  f"jobs late, {s['restarts']} restarts, {s['scheduler_seconds']:.2f} s in the "
                  f"policy")
    if "carbon_cap_kg" in s:
        over = s["carbon_cap_over_kg"]
        console.print(f"carbon cap {s['carbon_cap_kg']:g} kg per window: the worst window "
                      f"emitted {s['carbon_cap_worst_kg']:.3f} kg"
                      + (f"; OVER by {over:.3f} kg in all (windows that began with no job "
                         f"admissible: {s['carbon_cap_forced']}; jobs that may not be stopped "
                         "or idle draw over what was left)" if over > 0 else ", within it"),
                      markup=False)
    console.print(f"wrote {out}/summary.json, jobs.csv, segments.csv")


@app.command("generate")
@user_errors
def generate_cmd(
    nodes: int = typer.Option(..., min=1, help="Number of nodes N."),
    seed: int = typer.Option(1, help="Random seed of the instance."),
    out: Path = typer.Option(..., help="Scenario directory to write."),
    scenario: str = typer.Option("paper", help="Embedded template name ('paper') or a template "
                                 "directory (template.yaml, profiles.csv, job_classes.csv)."),
    lam: float = typer.Option(DEFAULT_LAMBDA, "--lambda", "--lam", min=1e-9,
                              help="λ: mean inter-arrival time is λ/N seconds."),
    jobs_per_node: int = typer.Option(10, min=1, help="Jobs per node (plus one at t = 0)."),
    restart_overhead: Optional[float] = Overhead,
    due_factor: Optional[str] = typer.Option(
        None, help="Due date = submit + U(LO, HI) x the job's fastest run time, as 'LO,HI' "
        "(e.g. '1.0,3'); default: the paper's, submit + U(fastest, slowest run time)."),
    weights: str = typer.Option(
        f"{WEIGHT_RANGE[0]:g},{WEIGHT_RANGE[1]:g}", help="Tardiness weights ~ U(LO, HI) EUR "
        "per second late, as 'LO,HI' (default: the paper's range)."),
    arrivals: str = typer.Option(
        "poisson", help=f"Arrival pattern: {', '.join(ARRIVAL_PATTERNS)} (groups of "
        "--burst-size jobs within a minute; a rate that swings +-80 % over a day)."),
    burst_size: int = typer.Option(10, min=1, help="Jobs per burst (--arrivals bursts)."),
    node_types: Optional[str] = typer.Option(
        None, help="GPU types of nodes 1, 2, ... cycled, e.g. 'V100,V100,K80' (default: the "
        "template's types in turn)."),
) -> None:
    """Generate a scenario with the ANDREAS authors' rules (default: their real-cluster data),
    or a workload shaped otherwise (due dates, weights, arrivals, node mix)."""
    try:
        shape = WorkloadShape(
            lam, jobs_per_node,
            None if due_factor is None else parse_pair("--due-factor", due_factor),
            parse_pair("--weights", weights), arrivals, burst_size,
            None if node_types is None else tuple(t.strip() for t in node_types.split(",")
                                                  if t.strip()))
        generated = generate(load_template(scenario), nodes, seed, shape, restart_overhead)
    except ValueError as exc:
        raise AndreasError(f"generate: {exc}") from None
    with atomic_directory(out, marker="workload.csv") as tmp:
        write_scenario(generated, tmp)
    console.print(f"wrote {out}: {nodes} nodes, {len(generated.jobs)} jobs (λ = {lam:g} s)")


@app.command("import-trace")
@user_errors
def import_trace_cmd(
    kind: str = typer.Argument(..., help="philly or alibaba"),
    trace: Path = typer.Argument(..., help="The trace CSV (philly_jobs_compact.csv, or an "
                                 "Alibaba openb_pod_list_*.csv)."),
    cluster: Path = typer.Option(..., help="cluster.yaml of the cluster to replay it on; "
                                 "catalogued GPU types may leave out node_power_w."),
    out: Path = typer.Option(..., help="Scenario directory to write."),
    limit: Optional[int] = typer.Option(None, min=1, help="Keep the first N jobs."),
    start: float = typer.Option(0.0, min=0.0, help="Skip jobs submitted before T seconds; T "
                                "becomes time 0."),
    seed: int = typer.Option(1, help="Seed of model, due-date and weight draws."),
    skip_bad: bool = typer.Option(False, "--skip-bad", help="Skip malformed rows (and say how "
                                  "many) instead of stopping at the first."),
    gangs: bool = typer.Option(True, "--gangs/--no-gangs", help="Keep jobs over 8 GPUs as "
                               "gangs of their real size over several nodes (docs/gangs.md); "
                               "--no-gangs: as 8-GPU jobs doing proportionally more work."),
) -> None:
    """Turn a Philly or Alibaba trace into a scenario directory (see docs/traces.md)."""
    from .io import read_cluster
    from .sim.traces import import_trace

    scenario, report = import_trace(kind, trace, read_cluster(cluster), limit=limit,
                                    start=start, seed=seed, skip_bad=skip_bad, gangs=gangs)
    if not scenario.jobs:
        raise AndreasError(f"{trace}: no job to import (rows {report.rows}, not run "
                           f"{report.skipped_not_run}, malformed {report.skipped_bad})")
    with atomic_directory(out, marker="workload.csv") as tmp:
        write_scenario(scenario, tmp)
    console.print(f"wrote {out}: {report.jobs} jobs from {report.rows} rows; skipped "
                  f"{report.skipped_not_run} that did not run, {report.skipped_bad} malformed, "
                  f"{report.skipped_no_gpu_type} without an allowed GPU type in the cluster")
    for note in report.notes:
        if "gang" in note:
            console.print(note)


@app.command("compare")
@user_errors
@with_policy_flags
def compare_cmd(
    scenario_dirs: Optional[list[Path]] = typer.Argument(None, help="Scenario directories."),
    policies: str = typer.Option(",".join(["fifo", "edf", "ps", "greedy", "andreas"]),
                                 help="Comma-separated policies."),
    seeds: str = typer.Option("1-5", help="Seeds of randomised policies: '1-5' or '1,3,7'."),
    generate: Optional[int] = typer.Option(None, help="Instead of directories: generate paper-"
                                           "style instances with this many nodes."),
    instances: int = typer.Option(5, min=1, help="With --generate: number of instances "
                                  "(instance seeds 1..K)."),
    scenario: str = typer.Option("paper", help="With --generate: the template."),
    lam: float = typer.Option(DEFAULT_LAMBDA, "--lambda", "--lam", min=1e-9,
                              help="With --generate: λ (mean inter-arrival λ/N s)."),
    out: Optional[Path] = typer.Option(None, help="Write table.csv, table.json, runs.csv, "
                                       "timings.csv and jobs.csv here."),
    report: Optional[Path] = typer.Option(None, help="Write report.html, one PNG per figure "
                                          "and the tables here."),
    workers: int = typer.Option(0, min=0, help="Worker processes (0 = one per core)."),
    ray: Optional[str] = RayAddress,
    period: Optional[float] = Period,
    period_only: bool = PeriodOnly,
    every_round: bool = EveryRound,
    restart_overhead: Optional[float] = Overhead,
    set_options: Optional[list[str]] = SetOption, options_file: Optional[Path] = OptionsFile,
    policy_flags: Optional[dict] = None,
) -> None:
    """Run several policies on the same scenarios and print a cost table with 95 % CIs."""
    names = parse_policies(policies)
    seed_list = parse_seeds(seeds)
    check_period(period, period_only, every_round)
    params = shared_options(names, policy_flags or {}, options_file, set_options or [])
    if generate is not None:
        if scenario_dirs:
            raise AndreasError("give scenario directories or --generate, not both")
        template = load_template(scenario)
        scenarios = [generate_paper_style(template, generate, k, lam,
                                          restart_overhead_s=restart_overhead)
                     for k in range(1, instances + 1)]
    elif scenario_dirs:
        if restart_overhead is not None:
            raise AndreasError("--restart-overhead applies to --generate; set "
                               "restart_overhead_s in the scenario's cluster.yaml instead")
        scenarios = [load_scenario(d) for d in scenario_dirs]
    else:
        raise AndreasError("give one or more scenario directories, or --generate N")
    total = len(plan_runs(len(scenarios), names, seed_list))
    with _progress() as bar:
        task = bar.add_task("simulating", total=total)
        comparison = compare(scenarios, names, seed_list, period=period, params=params,
                             workers=workers or default_workers(),
                             on_done=lambda i: bar.advance(task), period_only=period_only,
                             every_round=every_round, ray_address=ray)
    table = comparison.table()
    console.print(render_table(table, len(scenarios)))
    if out is not None:
        with atomic_directory(out, marker="table.json") as tmp:
            write_comparison(comparison, tmp)
        console.print(f"wrote {out}/table.csv, table.json, runs.csv, timings.csv, jobs.csv")
    if report is not None:
        from .experiments.report import write_report  # matplotlib: import only when drawing

        with atomic_directory(report, marker="report.html") as tmp:
            write_report(comparison, tmp)
        console.print(f"wrote {report}/report.html and its figures")


@app.command("plot")
@user_errors
def plot_cmd(
    out_dir: Path = typer.Argument(..., help="An 'andreas simulate' output directory."),
    to: Optional[Path] = typer.Option(None, "--to", help="Where to write the PNGs "
                                      "(default: OUT_DIR)."),
) -> None:
    """Draw the Gantt chart, power over time and cumulative cost of one simulation."""
    from .experiments.report import single_run_figures

    cluster, segments, jobs, summary = load_output(out_dir)
    target = to or out_dir
    target.mkdir(parents=True, exist_ok=True)
    names = single_run_figures(cluster, {summary.get("policy", "run"): (segments, jobs)}, target)
    console.print(f"wrote {', '.join(str(target / n) for n in names)}")


@app.command("sweep")
@user_errors
@with_policy_flags
def sweep_cmd(
    scenario_dirs: Optional[list[Path]] = typer.Argument(
        None, help="Scenario directories to sweep (e.g. trace windows from import-trace) "
        "instead of generated instances; --nodes, --lambdas, --instances and --scenario are "
        "then not used."),
    out: Path = typer.Option(..., help="Sweep directory (sweep.csv, summary.csv, "
                             "reductions.md or table.md, plots). Rerun to resume."),
    nodes: str = typer.Option("2,5,10,20", help="Node counts."),
    lambdas: str = typer.Option("5000,10000,20000,50000", "--lambdas", help="Values of λ (s)."),
    instances: int = typer.Option(5, min=1, help="Instances K per (nodes, λ)."),
    carbon_prices: Optional[str] = typer.Option(
        None, "--carbon-prices", help="Carbon prices (EUR per tonne CO2eq), e.g. "
        "0,50,100,200,400: run every instance at each, keeping its carbon intensity; writes "
        "table.md and pareto.png (docs/carbon.md)."),
    policies: str = typer.Option("fifo,edf,ps,greedy,andreas", help="Comma-separated policies."),
    seeds: str = typer.Option("1", help="Seeds of randomised policies."),
    scenario: str = typer.Option("paper", help="Template: 'paper' or a template directory."),
    workers: int = typer.Option(0, min=0, help="Worker processes (0 = one per core)."),
    ray: Optional[str] = RayAddress,
    period: Optional[float] = Period,
    set_options: Optional[list[str]] = SetOption, options_file: Optional[Path] = OptionsFile,
    policy_flags: Optional[dict] = None,
) -> None:
    """Sweep node counts × λ × instances in the paper's style, or given scenario directories,
    optionally at several carbon prices; resumable."""
    from .experiments.sweep import SweepConfig, read_rows, run_sweep, write_sweep_outputs

    names = parse_policies(policies)
    check_period(period, False)
    try:
        node_list = tuple(int(x) for x in nodes.split(","))
        lam_list = tuple(float(x) for x in lambdas.split(","))
    except ValueError:
        raise AndreasError("--nodes and --lambdas: expected comma-separated numbers") from None
    if any(n < 1 for n in node_list) or any(x <= 0 for x in lam_list):
        raise AndreasError("--nodes must be >= 1 and --lambdas > 0")
    prices = parse_carbon_prices(carbon_prices)
    dirs = tuple(str(d) for d in scenario_dirs or ())
    if len(set(dirs)) != len(dirs):
        raise AndreasError("a scenario directory is named twice")
    config = SweepConfig(scenario, node_list, lam_list, instances, tuple(names),
                         tuple(parse_seeds(seeds)), period,
                         shared_options(names, policy_flags or {}, options_file,
                                        set_options or []), dirs, prices)
    template = None if dirs else load_template(scenario)
    missing = len([k for k in config.keys() if k not in read_rows(out / "sweep.csv", config)])
    with _progress() as bar:
        task = bar.add_task("sweeping", total=missing)
        rows, ran = run_sweep(config, template, out, workers=workers or default_workers(),
                              on_done=lambda i: bar.advance(task), ray_address=ray)
    table = write_sweep_outputs(rows, names, out, config)
    console.print(f"{ran} run(s) done now, {len(rows) - ran} reused; wrote {out}/sweep.csv, "
                  f"summary.csv, {table} and plots")
    console.print((out / table).read_text(), markup=False)


def parse_carbon_prices(text: str | None) -> tuple[float, ...]:
    """`--carbon-prices 0,50,100`: distinct finite numbers >= 0, kept in the order given."""
    if text is None:
        return ()
    try:
        prices = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise AndreasError(f"--carbon-prices {text!r}: expected comma-separated numbers of EUR "
                           "per tonne CO2eq, e.g. 0,50,100") from None
    if any(not math.isfinite(p) or p < 0 for p in prices) or len(set(prices)) != len(prices):
        raise AndreasError(f"--carbon-prices {text!r}: expected distinct numbers >= 0")
    return prices


@app.command("bound")
@user_errors
def bound_cmd(
    scenario_dir: Path = typer.Argument(..., help="A scenario: about 4 nodes and 20 jobs for "
                                        "the MILP, up to about 200 jobs with --lp."),
    slots: int = typer.Option(120, min=2, help="Time slots of the relaxation (more: tighter, "
                              "slower)."),
    time_limit: float = typer.Option(120.0, min=1.0, help="HiGHS time limit (s); on time-out "
                                     "the proven bound is reported."),
    policies: str = typer.Option("fifo,edf,ps,wspt,atc,greedy,andreas",
                                 help="Policies to simulate and compare with the bound."),
    seeds: str = typer.Option("1", help="Seeds of randomised policies."),
    out: Optional[Path] = typer.Option(None, help="Write bound.json and bound_schedule.csv."),
    lp: bool = typer.Option(False, "--lp", help="The linear relaxation with mean busy times "
                            "(no integer variable): looser, for 50-200 jobs."),
) -> None:
    """Hindsight lower bound on the total cost of any policy, and each policy's gap to it."""
    from .experiments.compare import compare, write_csv
    from .optim.bound import hindsight_bound

    names = parse_policies(policies)
    scenario = load_scenario(scenario_dir)
    console.print(f"solving the time-indexed {'LP' if lp else 'MILP'} ({slots} slots, "
                  f"≤ {time_limit:g} s)...")
    bound = hindsight_bound(scenario, slots=slots, time_limit=time_limit, lp=lp)
    table = compare([scenario], names, parse_seeds(seeds)).table()
    t = Table(title=f"Hindsight lower bound {bound.lower_bound:.4f} EUR "
                    f"({'optimal' if bound.optimal else 'time limit: proven bound'}; "
                    f"slot {bound.slot_s:.0f} s)")
    for col in ("policy", "total EUR", "gap to bound"):
        t.add_column(col, justify="left" if col == "policy" else "right")
    rows = []
    for r in table:
        gap = (r["total_cost_mean"] - bound.lower_bound) / bound.lower_bound \
            if bound.lower_bound > 0 else float("nan")
        rows.append({"policy": r["policy"], "total_cost": r["total_cost_mean"], "gap": gap})
        t.add_row(r["policy"], f"{r['total_cost_mean']:.4f}", f"{100 * gap:+.1f} %")
    console.print(t)
    if out is not None:
        with atomic_directory(out, marker="bound.json") as tmp:
            (tmp / "bound.json").write_text(json.dumps({
                "lower_bound": bound.lower_bound, "relaxation_cost": bound.solution_cost,
                "optimal": bound.optimal, "slot_s": bound.slot_s, "slots": bound.slots,
                "policies": rows}, indent=2) + "\n")
            write_csv(tmp / "bound_schedule.csv", bound.schedule,
                      ["slot", "start", "end", "job_id", "node", "gpu_type", "gpus", "share"])
        console.print(f"wrote {out}/bound.json and bound_schedule.csv")


@app.command("policies")
@user_errors
def policies_cmd(
    name: Optional[str] = typer.Argument(None, help="A policy: print its options."),
) -> None:
    """List the available policies, or one policy's options with defaults and help."""
    if name is None:
        for info in POLICIES.values():
            kind = "randomised" if info.randomized else "deterministic"
            console.print(f"[bold]{info.name:8s}[/bold] {kind:13s} {info.summary}")
        return
    specs = option_specs(name)
    console.print(f"[bold]{name}[/bold]: {POLICIES[name].summary}", highlight=False)
    console.print("options (--set key=value, --policy-options FILE.yaml, service.yaml "
                  "policy_options):", highlight=False)
    for spec in specs.values():
        console.print(f"  {spec.describe()}", markup=False, highlight=False)


@app.command("account")
@user_errors
def account_cmd(
    scenario_dir: Path = typer.Argument(..., help="The scenario that was simulated."),
    out_dir: Path = typer.Argument(..., help="The simulation output directory."),
) -> None:
    """Recompute every cost from segments.csv alone and check it against summary.json."""
    breakdown = recompute(load_scenario(scenario_dir), out_dir)
    try:
        summary = json.loads((out_dir / "summary.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError) as exc:
        raise AndreasError(f"{out_dir / 'summary.json'}: cannot read ({exc})") from None
    ok = True
    checks = [("energy_cost", breakdown.energy_cost),
              ("tardiness_cost", breakdown.tardiness_cost)]
    if breakdown.emissions_g is not None:  # the scenario gives the grid's carbon intensity
        checks += [("emissions_kg", breakdown.emissions_g / 1000.0),
                   ("carbon_cost", breakdown.carbon_cost)]
    cap = load_scenario(scenario_dir).cluster.carbon_cap
    if cap is not None:  # each window's emissions, recomputed
        checks += list(breakdown.cap_summary(cap.kg).items())
    for key, value in [*checks, ("total_cost", breakdown.total_cost)]:
        if key not in summary:
            raise AndreasError(f"{out_dir / 'summary.json'}: no {key!r}; expected the output "
                               f"of a simulation of {scenario_dir}")
        match = abs(value - summary[key]) <= 1e-9 * max(1.0, abs(value))
        ok &= match
        console.print(f"{key:19s} segments {value:.6f}  summary {summary[key]:.6f}  "
                      f"{'ok' if match else 'MISMATCH'}")
    if not ok:
        raise typer.Exit(1)


@app.command("serve")
@user_errors
def serve_cmd(
    config: Path = typer.Option(..., "--config", help="service.yaml (see docs/service.md)."),
    database_url: Optional[str] = typer.Option(
        None, "--database-url", help="Override the database, e.g. "
        "postgresql://user@host/andreas (default: the config's, or SQLite)."),
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(8000, help="Port to listen on."),
    admin_token_env: str = typer.Option(
        "ANDREAS_ADMIN_TOKEN", help="Environment variable whose value, if set, becomes an "
        "admin token (handy for the first start)."),
    admin_token_file: Optional[Path] = typer.Option(
        None, "--admin-token-file", help="A file (mode 0600) holding an admin token; "
        "preferred to the variable."),
    stop_jobs: bool = typer.Option(
        False, "--stop-jobs", help="On exit (Ctrl-C, SIGTERM), stop every running job "
        "(SIGTERM, SIGKILL after grace_s); they resume from their checkpoints at the next "
        "start. Default: jobs run on, and the next start re-adopts them."),
) -> None:
    """Run the live scheduler: a REST API that runs real jobs (docs at /docs)."""
    secrets = _service_module("secret_env")
    serve = _service_module("app").serve
    # Read the secret once and wipe it from our own environment, so that nothing the service
    # starts (jobs, a local Ray cluster) inherits it and /proc/<pid>/environ does not show it
    token = secrets.take_from_environment(admin_token_env)
    if admin_token_file is not None:
        token = secrets.read_secret_file(admin_token_file)
    serve(config, database_url=database_url, host=host, port=port, admin_token=token,
          stop_jobs=stop_jobs)


@app.command("token")
@user_errors
def token_cmd(
    config: Path = typer.Option(..., "--config", help="service.yaml."),
    user: str = typer.Option(..., "--user", help="User name (created if new)."),
    role: str = typer.Option("user", "--role", help="admin or user."),
    database_url: Optional[str] = typer.Option(None, "--database-url"),
) -> None:
    """Create a token in the service's database directly (e.g. the first admin's, with the
    service stopped) and print it; `andreas tokens create` does it through the API."""
    cfg = _service_module("config").read_service_config(config).with_database(database_url)
    print(_service_module("store").Store(cfg.database_url).create_token(user, role)[1])


@app.command("profile", context_settings={"allow_extra_args": True,
                                          "ignore_unknown_options": True})
@user_errors
def profile_cmd(
    ctx: typer.Context,
    script: Path = typer.Argument(..., help="The training script (uses andreas.job)."),
    configs: str = typer.Option(..., "--configs", help="Configurations to measure, "
                                "TYPE:GPUS comma-separated, e.g. V100:1,V100:2,K80:1."),
    name: Optional[str] = typer.Option(None, "--name", help="Profile name (default: the "
                                       "script's file name without .py)."),
    epochs: int = typer.Option(4, help="Measured epochs per configuration."),
    warmup: int = typer.Option(1, help="Epochs run first and left out of the measurement."),
    out: Path = typer.Option(Path("profiles.csv"), "--out", help="profiles.csv to write or "
                             "update (rows of other profiles and configurations are kept)."),
    config: Optional[Path] = typer.Option(None, "--config", help="service.yaml whose nodes "
                                          "and gpu_indices say which devices to use."),
) -> None:
    """Measure seconds per epoch of a script on each configuration; write profiles.csv rows.

    Arguments after the options are passed to the script, e.g.
    `andreas profile train.py --configs V100:1 -- --hidden 256`.
    """
    import sys as _sys

    from .measure.nvml import NvmlMeter
    from .measure.profiler import parse_configs, profile_script, write_profiles

    if not script.is_file():
        raise AndreasError(f"{script}: no such script")
    wanted = parse_configs(configs)
    indices = {}
    if config is not None:
        cfg = _service_module("config").read_service_config(config)
        for gpu_type, gpus in wanted:
            node = next((n for n in cfg.cluster.nodes if n.gpu_type == gpu_type
                         and n.gpus >= gpus), None)
            if node is None:
                raise AndreasError(f"--configs: no node of {config} has {gpus} GPU(s) of type "
                                   f"{gpu_type!r}")
            indices[(gpu_type, gpus)] = cfg.gpu_indices.get(node.name,
                                                            tuple(range(node.gpus)))[:gpus]
    command = [_sys.executable, str(script), *[a for a in ctx.args if a != "--"]]
    results = profile_script(command, name or script.stem, wanted, epochs=epochs,
                             warmup=warmup, gpu_indices=indices, meter=NvmlMeter(),
                             on_config=lambda t, g: err.print(f"profiling {t}:{g} ..."))
    write_profiles(out, results)
    for m in results:
        console.print(f"{m.profile} {m.gpu_type}:{m.gpus}  {m.seconds_per_epoch:.4f} s/epoch "
                      f"± {m.spread_s:.4f} ({m.samples} epochs), start-up {m.startup_s:.2f} s"
                      + ("" if m.power_w is None else f", GPU board power {m.power_w:.1f} W")
                      + ("" if m.startup_power_w is None
                         else f" ({m.startup_power_w:.1f} W in start-up)"))
    console.print(f"wrote {out}")


@app.command("validate")
@user_errors
def validate_cmd(
    jobs: int = typer.Option(10, "--jobs", min=1, help="Jobs in the workload."),
    out: Path = typer.Option(Path("validation-out"), "--out", help="Output folder: "
                             "validation.json, validation.png and the run's work folder."),
    seed: int = typer.Option(1, help="Seed of the workload and of the policy."),
    profile_error: float = typer.Option(0.0, "--profile-error", min=-0.9, max=0.9,
                                        help="Give the scheduler profiles this far off "
                                        "(0.3 = 30 % too fast) to test online learning."),
    learn: bool = typer.Option(True, "--learn/--no-learn", help="Online learning of speeds."),
    quick: bool = typer.Option(False, "--quick", help="Tiny jobs (a smoke test, not a "
                               "measurement)."),
    policy: str = typer.Option("andreas", help="Policy the service runs."),
    gpu: bool = typer.Option(False, "--gpu", help="Run the PyTorch example on this machine's "
                             "NVIDIA GPUs and measure energy with NVML (needs torch with CUDA "
                             "and nvidia-ml-py)."),
    profiles_from: Path | None = typer.Option(
        None, "--profiles-from", help="An earlier run's work/profiles-measured.csv: skip "
        "profiling and use it (seeds compared on the same profiles)."),
) -> None:
    """Run a real workload through the live service; compare predicted and measured costs."""
    _service_module("config")  # the service extra must be installed
    from .measure.validate import ValidationSpec, example_script, run_validation

    if policy not in POLICIES:
        raise AndreasError(f"--policy: unknown policy {policy!r}; expected one of "
                           f"{', '.join(sorted(POLICIES))}")
    spec = ValidationSpec(jobs=jobs, seed=seed, profile_error=profile_error, learn=learn,
                          quick=quick, policy=policy, script=example_script(gpu), gpu=gpu,
                          profiles_from=profiles_from)
    result = run_validation(out, spec, say=lambda text: err.print(text, highlight=False))
    console.print(f"predicted total {result['predicted_total_cost']:.6f} EUR, measured "
                  f"{result['measured_total_cost']:.6f} EUR: deviation "
                  f"{100 * result['total_deviation']:.2f} %; worst job "
                  f"{100 * result['worst_job_deviation']:.2f} %; pauses {result['pauses']}, "
                  f"moves {result['moves']}")
    console.print(f"energy ({result['energy_source']}): predicted "
                  f"{result['predicted_energy_cost']:.6f} EUR, measured "
                  f"{result['measured_energy_cost']:.6f} EUR: deviation "
                  f"{100 * result['energy_deviation']:.2f} %")
    for profile, watts in result.get("profiled_power_w", {}).items():
        console.print(f"  {profile}: {watts:.1f} W per GPU while profiled")
    dist = result["per_job"]
    for label, key, unit in (("energy deviation", "energy_deviation", "%"),
                             ("cost deviation", "cost_deviation", "%"),
                             ("|completion error|", "completion_error_s", "s")):
        values = {k: v * (100 if unit == "%" else 1) for k, v in dist[key].items()}
        console.print(f"per job, {label}: mean {values['mean']:.1f} {unit}, median "
                      f"{values['median']:.1f} {unit}, 90 % {values['p90']:.1f} {unit}, worst "
                      f"{values['worst']:.1f} {unit}")
    why = dist["energy_over_10_percent"]
    drift = why["speed_drift_on_planned_node"]
    console.print(f"per job, energy over 10 % off: {why['jobs']} of {len(result['jobs'])} jobs "
                  f"({why['on_planned_node']} on their planned node"
                  + (f", their speed {100 * drift[0]:+.0f} to {100 * drift[1]:+.0f} % off the "
                     f"profile" if drift else "")
                  + f"; {why['elsewhere']} elsewhere than planned)")
    if dist["completions_within_range"] is not None:
        console.print(f"per job, measured completion within the first plan's range: "
                      f"{100 * dist['completions_within_range']:.0f} % of jobs")
    at = result["prediction_deviation_at"]
    console.print("predicted total's deviation as the run went on: " + ", ".join(
        f"{k} {100 * v:.1f} %" for k, v in at.items()))
    if result["worst_learned_error"] is not None:
        console.print(f"learned seconds per epoch within "
                      f"{100 * result['worst_learned_error']:.2f} % of measured (worst job)")
    sim = result["simulated"]
    console.print(f"simulator replay: total {sim['total_cost']:.6f} EUR (deviation "
                  f"{100 * sim['deviation']:.2f} %), mean |completion difference| "
                  f"{sim['mean_abs_completion_difference_s']:.2f} s")
    console.print(f"wrote {out / 'validation.json'} and {out / 'validation.png'}")


def _service_module(name: str):
    """Import a service module, or say which extra to install (the service is optional)."""
    import importlib

    try:
        return importlib.import_module(f"andreas.service.{name}")
    except ImportError as exc:
        raise AndreasError(f"the service needs packages that are not installed ({exc.name}); "
                           f"install them with: pip install 'andreas-scheduler[service]'") \
            from None


def render_table(table: list[dict], n_instances: int) -> Table:
    baselines = [b for b in BASELINES if f"reduction_vs_{b}_pct" in table[0]]
    t = Table(title=f"Mean over {n_instances} instance(s) and seeds, ±95 % CI; % cost reduction "
              f"per instance, then averaged")
    carbon = "emissions_kg_mean" in table[0]  # the scenarios give the grid's intensity
    for col in ("policy", "runs", "total EUR ±95% CI", "energy EUR", "tardiness EUR",
                *(("carbon EUR", "kg CO2eq") if carbon else ()), "tardy jobs", "restarts",
                "sched s"):
        t.add_column(col, justify="left" if col == "policy" else "right")
    for b in baselines:
        t.add_column(f"% vs {b}", justify="right")
    for r in table:
        half = (r["total_cost_ci_high"] - r["total_cost_ci_low"]) / 2
        cells = [r["policy"], str(r["runs"]), f"{r['total_cost_mean']:.2f} ±{half:.2f}",
                 f"{r['energy_cost_mean']:.2f}", f"{r['tardiness_cost_mean']:.2f}",
                 *((f"{r['carbon_cost_mean']:.2f}", f"{r['emissions_kg_mean']:.2f}")
                   if carbon else ()),
                 f"{r['tardy_jobs_mean']:.1f}", f"{r['restarts_mean']:.1f}",
                 f"{r['scheduler_seconds_mean']:.2f}"]
        cells += [_reduction(r, b) for b in baselines]
        t.add_row(*cells)
    return t


def _reduction(row: dict, baseline: str) -> str:
    mean = row[f"reduction_vs_{baseline}_pct"]
    if mean != mean:  # NaN: no instance with a positive baseline cost
        return "–"
    half = (row[f"reduction_vs_{baseline}_ci_high"] - row[f"reduction_vs_{baseline}_ci_low"]) / 2
    return f"{mean:+.1f} ±{half:.1f}"


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=err, transient=True,
                    disable=not err.is_terminal)


register_client_commands(app)


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
