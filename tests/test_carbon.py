"""Grid carbon intensity beside price (issue 45): emissions integrated by hand, recomputed from
segments, priced into the objective through the one energy formula (Cluster.as_planned),
decisions unchanged at a carbon price of 0, a job that waits for a cleaner hour only when its
slack allows, the threshold baseline, and bad series named by file, line and field."""

from __future__ import annotations

import csv
import dataclasses
import io
import json

import pytest

from andreas.cost import account_segments
from andreas.errors import ScenarioError
from andreas.io import load_scenario, read_cluster, write_scenario
from andreas.model import Cluster, GpuType, Job, Node, Profiles, Scenario, Tariff
from andreas.policies import make_policy
from andreas.sim.engine import simulate
from andreas.sim.generate import generate_paper_style, load_template
from andreas.sim.output import read_job_records, recompute, write_result

H = 3600.0


def one_node(carbon: Tariff | None = None, carbon_price: float = 0.0, price: float = 0.1,
             watts: float = 100.0) -> Cluster:
    return Cluster({"g": GpuType("g", (watts,))}, (Node("a", "g", 1),), price, 1.0, 0.0,
                   None, carbon, carbon_price)


def test_emissions_integrated_across_an_hour_boundary_by_hand(tmp_path):
    """100 W from 1800 s to 5400 s under 200 then 100 g/kWh: 100 W x (0.5 h x 200 + 0.5 h x
    100) g/kWh = 15 g; at 50 EUR/t that is 0.00075 EUR, added to the total."""
    cluster = one_node(Tariff((200.0, 100.0), H), carbon_price=50.0)
    scenario = Scenario(cluster, Profiles({"p": {("g", 1): 1.0}}),
                        (Job("a", 1800.0, 1e9, 0.01, 3600.0, "p"),))
    result = simulate(scenario, make_policy("fifo"))
    s = result.summary
    assert s["emissions_kg"] == pytest.approx(0.015, rel=1e-12)
    assert s["carbon_cost"] == pytest.approx(50 * 15e-6, rel=1e-12)
    assert s["energy_cost"] == pytest.approx(100 * 3600 * 0.1 / 3.6e6, rel=1e-12)
    assert s["total_cost"] == pytest.approx(s["energy_cost"] + s["carbon_cost"], rel=1e-12)
    assert result.jobs[0].emissions_kg == pytest.approx(0.015, rel=1e-12)
    again = account_segments(cluster, scenario.jobs, result.segments)
    assert abs(again.emissions_g - 15.0) <= 1e-9
    assert again.job_emissions_g == pytest.approx({"a": 15.0}, rel=1e-12)
    assert abs(again.total_cost - s["total_cost"]) <= 1e-12
    # written and read back: the output's cluster.yaml carries the series, jobs.csv the column
    out = write_result(result, tmp_path / "out")
    assert read_job_records(out / "jobs.csv")[0].emissions_kg == pytest.approx(0.015)
    assert recompute(scenario, out).emissions_g == pytest.approx(15.0, rel=1e-12)


def test_no_intensity_no_emissions_reported():
    scenario = Scenario(one_node(), Profiles({"p": {("g", 1): 1.0}}),
                        (Job("a", 0.0, 1e9, 0.01, 60.0, "p"),))
    result = simulate(scenario, make_policy("fifo"))
    assert "emissions_kg" not in result.summary and result.jobs[0].emissions_kg is None
    assert account_segments(scenario.cluster, scenario.jobs, result.segments).emissions_g is None


@pytest.mark.parametrize("policy", ["andreas", "greedy", "andreas-paper", "edf"])
def test_a_carbon_price_of_zero_decides_exactly_as_today(policy):
    base = generate_paper_style(load_template("paper"), 3, 2, 20000)
    carbon = Tariff((420.0, 90.0, 250.0, 30.0), H, 1800.0)
    with_carbon = dataclasses.replace(base, cluster=dataclasses.replace(
        base.cluster, carbon=carbon, carbon_price=0.0))
    a = simulate(base, make_policy(policy, seed=1))
    b = simulate(with_carbon, make_policy(policy, seed=1))
    assert list(a.segments) == list(b.segments)
    assert b.summary["total_cost"] == a.summary["total_cost"]
    assert b.summary["emissions_kg"] > 0 and b.summary["carbon_cost"] == 0.0


def _cleaner_later(due: float, carbon_price: float) -> Scenario:
    """One 1 kW node; the grid is dirty for two hours (800 g/kWh), then clean (20 g/kWh); the
    electricity price is flat. One job of half an hour, submitted at 0."""
    carbon = Tariff((800.0, 800.0, 20.0, 20.0, 20.0, 20.0, 800.0, 800.0), H)
    return Scenario(one_node(carbon, carbon_price, price=0.05, watts=1000.0),
                    Profiles({"p": {("g", 1): 1.0}}), (Job("a", 0.0, due, 0.01, 1800.0, "p"),))


def test_andreas_waits_for_a_cleaner_hour_when_the_slack_allows():
    """At 1,000 EUR/t the dirty hours cost 0.05 + 0.8 EUR/kWh, the clean ones 0.07: the job
    (due in 6 h) starts when the grid turns clean, and emits 10 g instead of 400."""
    result = simulate(_cleaner_later(6 * H, 1000.0), make_policy("andreas", seed=1))
    assert result.jobs[0].first_start == 2 * H and result.jobs[0].tardiness_s == 0.0
    assert result.summary["emissions_kg"] == pytest.approx(0.5 * 20 / 1000)
    # ... and not without a carbon price (the price is flat), nor when its due date has no
    # room for the wait (due at 2,000 s: it starts now)
    assert simulate(_cleaner_later(6 * H, 0.0),
                    make_policy("andreas", seed=1)).jobs[0].first_start == 0.0
    tight = simulate(_cleaner_later(2000.0, 1000.0), make_policy("andreas", seed=1))
    assert tight.jobs[0].first_start == 0.0 and tight.jobs[0].tardiness_s == 0.0


def test_the_threshold_baseline_waits_for_the_threshold_or_its_maximum_delay():
    scenario = _cleaner_later(6 * H, 0.0)
    waits = simulate(scenario, make_policy("carbon-threshold", threshold_g=100.0))
    assert waits.jobs[0].first_start == 2 * H  # intensity 800 until 2 h, then 20
    bounded = simulate(scenario, make_policy("carbon-threshold", threshold_g=100.0,
                                             max_delay_s=600.0))
    assert bounded.jobs[0].first_start == 600.0
    clean_enough = simulate(scenario, make_policy("carbon-threshold", threshold_g=900.0))
    assert clean_enough.jobs[0].first_start == 0.0


CLUSTER = """\
energy_price: 0.1
carbon_intensity: {csv: carbon.csv, start: "2023-07-01 01:00"}
carbon_price: 80
gpu_types:
  g: {node_power_w: [100]}
nodes:
  - {name: a, gpu_type: g, gpus: 1}
"""
CARBON = """\
Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh (direct),\
Carbon Intensity gCO₂eq/kWh (LCA),Low Carbon Percentage
2023-07-01 00:00:00,USA,CAISO,US-CAL-CISO,238.69,309.75,48.08
2023-07-01 01:00:00,USA,CAISO,US-CAL-CISO,220.25,283.77,53.92
2023-07-01 02:00:00,USA,CAISO,US-CAL-CISO,{third},190.0,60.0
"""


def test_cluster_reads_the_grids_carbon_series(tmp_path):
    (tmp_path / "carbon.csv").write_text(CARBON.format(third="150.5"))
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER)
    cluster = read_cluster(path)
    assert cluster.carbon.prices == (238.69, 220.25, 150.5)  # the direct intensity
    assert cluster.carbon.price_at(0.0) == 220.25 and cluster.carbon_price == 80.0
    planned = cluster.as_planned  # 0.1 EUR/kWh + 80 EUR/t x 220.25 g/kWh at time 0
    assert planned.tariff.price_at(0.0) == pytest.approx(0.1 + 80e-6 * 220.25)
    assert planned.carbon_price == 0.0 and planned.carbon is cluster.carbon
    path.write_text(CLUSTER.replace('start: "2023-07-01 01:00"',
                                    'column: "Carbon Intensity gCO₂eq/kWh (LCA)"'))
    assert read_cluster(path).carbon.prices == (309.75, 283.77, 190.0)


@pytest.mark.parametrize("third, message", [
    ("-5", "carbon.csv:4: field 'Carbon Intensity gCO₂eq/kWh (direct)': expected an "
           "intensity in gCO2eq/kWh of at least 0"),
    ("", "carbon.csv:4: field 'Carbon Intensity gCO₂eq/kWh (direct)': expected a number"),
    ("dirty", "carbon.csv:4: field 'Carbon Intensity gCO₂eq/kWh (direct)': expected a number"),
])
def test_bad_carbon_series_name_the_file_line_and_field(tmp_path, third, message):
    (tmp_path / "carbon.csv").write_text(CARBON.format(third=third))
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER)
    with pytest.raises(ScenarioError) as info:
        read_cluster(path)
    assert message in str(info.value)


@pytest.mark.parametrize("text, message", [
    ("energy_price: 0.1\ncarbon_price: 50\n", "field 'carbon_price': a carbon price needs"),
    ("energy_price: 0.1\ncarbon_intensity: {g_per_kwh: [100, -1]}\n",
     "field 'carbon_intensity.g_per_kwh[1]': expected an intensity"),
    ("energy_price: {eur_per_kwh: [0.1, 0.2], step_s: 1800}\n"
     "carbon_intensity: {g_per_kwh: [100, 50]}\ncarbon_price: 50\n",
     "must change at the same times"),
    ("energy_price: 0.1\ncarbon_intensity: 300\n", "field 'carbon_intensity': expected a "
                                                    "mapping"),
    ("energy_price: 0.1\ncarbon_cap_kg: 50\n", "cluster.yaml:2: field 'carbon_cap_kg': a "
                                               "carbon cap needs the grid's carbon_intensity"),
    ("energy_price: 0.1\ncarbon_intensity: {g_per_kwh: [100]}\ncarbon_cap_kg: 0\n",
     "field 'carbon_cap_kg'"),
    ("energy_price: 0.1\ncarbon_intensity: {g_per_kwh: [100]}\ncarbon_cap_kg: 5\n"
     "carbon_cap_window_s: -1\n", "field 'carbon_cap_window_s'"),
    ("energy_price: 0.1\ncarbon_intensity: {g_per_kwh: [100]}\ncarbon_cap_window_s: 60\n",
     "field 'carbon_cap_window_s': a cap's window without a cap"),
])
def test_bad_carbon_settings_get_one_clear_line(tmp_path, text, message):
    path = tmp_path / "cluster.yaml"
    path.write_text(text + "gpu_types:\n  g: {node_power_w: [100]}\n"
                           "nodes:\n  - {name: a, gpu_type: g, gpus: 1}\n")
    with pytest.raises(ScenarioError) as info:
        read_cluster(path)
    assert message in str(info.value) and "cluster.yaml" in str(info.value)


def test_a_doubled_brace_is_a_clear_error_not_a_traceback(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text("energy_price: 0.1\ncarbon_intensity: {{csv: carbon.csv}}\n")
    with pytest.raises(ScenarioError) as info:
        read_cluster(path)
    assert "cluster.yaml:2" in str(info.value) and "a key is a list or a mapping" in str(
        info.value)


def test_a_scenario_with_carbon_round_trips(tmp_path):
    base = generate_paper_style(load_template("paper"), 2, 1, 20000)
    from andreas.model import CarbonCap

    scenario = dataclasses.replace(base, cluster=dataclasses.replace(
        base.cluster, carbon=Tariff((300.0, 120.0), H, 900.0), carbon_price=120.0,
        carbon_cap=CarbonCap(2.5, 43200.0)))
    write_scenario(scenario, tmp_path / "s")
    again = load_scenario(tmp_path / "s")
    assert again.cluster.carbon == scenario.cluster.carbon
    assert again.cluster.carbon_price == 120.0
    assert again.cluster.carbon_cap == CarbonCap(2.5, 43200.0)
    a = simulate(scenario, make_policy("andreas", seed=1)).summary
    b = simulate(again, make_policy("andreas", seed=1)).summary
    assert (a["total_cost"], a["emissions_kg"]) == (b["total_cost"], b["emissions_kg"])


@pytest.mark.slow
def test_simulate_account_and_compare_show_emissions_end_to_end(tmp_path):
    """The command line: simulate prints and writes emissions, account recomputes them from
    segments.csv, compare's table gives each policy's mean emissions."""
    from test_cli import GOOD_CLUSTER, andreas, write

    scenario = write(tmp_path / "s", cluster=GOOD_CLUSTER + "carbon_intensity: {g_per_kwh: "
                     "[400, 100, 250]}\ncarbon_price: 90\n")
    run = andreas("simulate", scenario, "--policy", "edf", "--out", tmp_path / "out")
    assert run.returncode == 0, run.stderr
    assert "kg CO2eq" in run.stdout
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["emissions_kg"] > 0
    assert summary["total_cost"] == pytest.approx(summary["energy_cost"] + summary[
        "carbon_cost"] + summary["tardiness_cost"], rel=1e-12)
    account = andreas("account", scenario, tmp_path / "out")
    assert account.returncode == 0, account.stdout + account.stderr
    assert "emissions_kg" in account.stdout and "MISMATCH" not in account.stdout
    table = andreas("compare", scenario, "--policies", "edf,carbon-threshold",
                    "--out", tmp_path / "cmp")
    assert table.returncode == 0, table.stderr
    with (tmp_path / "cmp" / "table.csv").open() as f:
        rows = {r["policy"]: r for r in csv.DictReader(f)}
    assert set(rows) == {"edf", "carbon-threshold"}
    assert float(rows["edf"]["emissions_kg_mean"]) == pytest.approx(summary["emissions_kg"])
    sweep = andreas("sweep", scenario, "--carbon-prices", "0,90", "--policies",
                    "edf,carbon-threshold", "--out", tmp_path / "sw", "--workers", "1")
    assert sweep.returncode == 0, sweep.stderr
    assert "| 90 | edf | 1 |" in sweep.stdout and (tmp_path / "sw" / "pareto.png").exists()
    bad = andreas("sweep", scenario, "--carbon-prices", "0,-1", "--out", tmp_path / "bad")
    assert bad.returncode != 0 and "--carbon-prices '0,-1'" in bad.stderr + bad.stdout
    assert "Traceback" not in bad.stderr


def _service_with_carbon(tmp_path, carbon: str):
    from conftest import write_service_files

    service = write_service_files(tmp_path / "svc")
    cluster = tmp_path / "svc" / "cluster.yaml"
    cluster.write_text(cluster.read_text().replace("energy_price: 0.2\n",
                                                   "energy_price: 0.2\n" + carbon))
    return service


@pytest.mark.parametrize("carbon, field", [
    ("carbon_intensity: {csv: c.csv, start: '2023-01-01'}\n", "carbon_intensity.start"),
    ("carbon_intensity: {g_per_kwh: [300]}\ncarbon_cap_kg: 10\n", "carbon_cap_kg")])
def test_the_service_refuses_carbon_settings_it_would_ignore(tmp_path, carbon, field):
    """The live service places an intensity's rows at their own timestamps (a `start` would
    move them), and does not cap carbon yet: each is one clear error naming the file and
    field, not a setting silently left out of its decisions."""
    from andreas.service.config import read_service_config

    service = _service_with_carbon(tmp_path, carbon)
    (service.parent / "c.csv").write_text("Datetime (UTC),g\n2023-01-01 00:00:00,300\n")
    with pytest.raises(ScenarioError) as info:
        read_service_config(service)
    assert "cluster.yaml" in str(info.value) and f"field '{field}'" in str(info.value)


@pytest.mark.service
def test_the_service_reports_emissions_at_the_grids_intensity(tmp_path):
    """At 300 g/kWh and 0.2 EUR/kWh every kWh costs 0.2 EUR and emits 0.3 kg: each job's
    measured emissions are 1.5 x its energy cost; at 100 EUR/t they cost 0.1 EUR per kg, in
    the job's total; the first forecast gave emissions and their cost too (split out of the
    energy price policies see, 0.23 EUR/kWh); /metrics, the cluster page and `andreas jobs`
    show them."""
    from conftest import train_job, wait_for
    from fastapi.testclient import TestClient
    from prometheus_client.parser import text_string_to_metric_families
    from rich.console import Console
    from test_views_hostile_values import _sign_in

    from andreas.client import Job as ClientJob
    from andreas.client_cli import jobs_table
    from andreas.service.api import create_app
    from andreas.service.config import read_service_config

    admin = {"Authorization": "Bearer admin-secret"}
    config = read_service_config(_service_with_carbon(
        tmp_path, "carbon_intensity: {g_per_kwh: [300]}\ncarbon_price: 100\n"))
    assert config.cluster.as_planned.eur_per_joule(0.0, 1.0) * 3.6e6 == pytest.approx(0.23)
    with TestClient(create_app(config, admin_token="admin-secret")) as client:
        ids = [client.post("/jobs", headers=admin, json=train_job(4)).json()["id"]
               for _ in range(2)]
        wait_for(lambda: all(j["state"] == "completed"
                             for j in client.get("/jobs", headers=admin).json()),
                 timeout=180, what=lambda: "both jobs to complete; their states: " + ", ".join(
                     j["state"] for j in client.get("/jobs", headers=admin).json()))
        jobs = [client.get(f"/jobs/{j}", headers=admin).json() for j in ids]
        for job in jobs:
            measured = job["measured"]
            assert measured["energy_cost"] > 0
            assert measured["emissions_kg"] == pytest.approx(1.5 * measured["energy_cost"],
                                                             rel=1e-9)
            assert measured["carbon_cost"] == pytest.approx(0.1 * measured["emissions_kg"])
            assert measured["total_cost"] == pytest.approx(
                measured["energy_cost"] + measured["carbon_cost"] + measured["tardiness_cost"])
            predicted = job["predicted"]
            assert predicted["emissions_kg"] > 0
            assert predicted["carbon_cost"] == pytest.approx(0.1 * predicted["emissions_kg"])
            assert predicted["total_cost"] == pytest.approx(
                predicted["energy_cost"] + predicted["carbon_cost"]
                + predicted["tardiness_cost"])
            # the forecast's energy at 0.2 EUR/kWh emits 1.5 kg per EUR, as measured
            assert predicted["emissions_kg"] == pytest.approx(1.5 * predicted["energy_cost"],
                                                              rel=1e-6)
        samples = {s.name: s.value for family in text_string_to_metric_families(
            client.get("/metrics", headers=admin).text) for s in family.samples}
        assert samples["andreas_emissions_kg_total"] == pytest.approx(
            0.3 * samples["andreas_energy_kwh_total"], rel=1e-9)
        assert samples["andreas_carbon_cost_eur_total"] == pytest.approx(
            0.1 * samples["andreas_emissions_kg_total"], rel=1e-9)
        _sign_in(client)
        page = client.get("/ui/cluster").text
        assert "Emissions so far" in page and "the grid now: 300 g/kWh" in page
        out = io.StringIO()
        Console(file=out, width=300).print(jobs_table([ClientJob.of(j) for j in jobs], 0.0))
        table = out.getvalue()
        assert "KG CO2EQ" in table
        assert f"{jobs[0]['measured']['emissions_kg']:.3f}" in table


def test_a_jobs_emissions_are_so_far_plus_the_forecast_until_it_ends():
    from andreas.client import Job as ClientJob

    base = {"id": "j", "name": "n", "owner": "u", "epochs": 4, "epochs_done": 1,
            "submitted_at": 0.0, "due_date": 10.0, "weight": 1.0}
    running = ClientJob.of({**base, "state": "running", "measured": {"emissions_kg": 0.25},
                            "forecast": {"emissions_kg": 0.5}})
    assert running.emissions_kg == 0.75
    done = ClientJob.of({**base, "state": "completed", "measured": {"emissions_kg": 0.25},
                         "forecast": {"emissions_kg": 0.5}})
    assert done.emissions_kg == 0.25  # a finished job's forecast is no longer one
    assert ClientJob.of({**base, "state": "queued", "measured": {}}).emissions_kg is None


def test_the_html_report_gives_each_policys_emissions(tmp_path):
    from andreas.experiments.compare import compare
    from andreas.experiments.report import write_report

    base = generate_paper_style(load_template("paper"), 2, 1, 20000)
    scenario = dataclasses.replace(base, cluster=dataclasses.replace(
        base.cluster, carbon=Tariff((300.0, 120.0), H), carbon_price=50.0))
    comparison = compare([scenario], ["fifo", "carbon-threshold"], [1])
    page = write_report(comparison, tmp_path / "r").read_text()
    assert "<th>kg CO2eq</th>" in page and "<th>carbon EUR</th>" in page
    fifo = comparison.result_for(0, "fifo").summary["emissions_kg"]
    assert f"<td>{fifo:,.2f}</td>" in page


def _carbon_dirs(tmp_path, intensity: bool = True) -> list[str]:
    """Two small generated scenarios written as directories, with an intensity series."""
    dirs = []
    for k in (1, 2):
        base = generate_paper_style(load_template("paper"), 2, k, 20000)
        cluster = dataclasses.replace(base.cluster, carbon=Tariff((300.0, 120.0, 40.0), H)
                                      if intensity else None)
        write_scenario(dataclasses.replace(base, cluster=cluster), tmp_path / f"w{k}")
        dirs.append(str(tmp_path / f"w{k}"))
    return dirs


def _sweep(dirs, prices=(0.0, 200.0)):
    from andreas.experiments.sweep import SweepConfig

    return SweepConfig("paper", (), (), 1, ("fifo", "andreas"), (1,), None, {},
                       tuple(dirs), prices)


def test_a_carbon_sweep_runs_each_scenario_at_each_price(tmp_path):
    """`andreas sweep DIRS --carbon-prices`: one row per scenario, price, policy and seed, each
    equal to simulating that scenario at that price; the table's means and the Pareto figure's
    points are those rows' means; a resumed sweep writes the same bytes."""
    from andreas.experiments.pareto import pareto_data
    from andreas.experiments.sweep import read_rows, run_sweep, write_sweep_outputs

    dirs = _carbon_dirs(tmp_path)
    config = _sweep(dirs)
    rows, ran = run_sweep(config, None, tmp_path / "sw")
    assert ran == len(rows) == 2 * 2 * 2
    header = (tmp_path / "sw" / "sweep.csv").read_text().splitlines()[0]
    assert header == ("scenario,carbon_price,policy,seed,total_cost,energy_cost,tardiness_cost,"
                      "tardy_jobs,restarts,jobs,emissions_kg,carbon_cost")
    for row in rows:
        base = load_scenario(row["scenario"])
        scenario = dataclasses.replace(base, cluster=dataclasses.replace(
            base.cluster, carbon_price=row["carbon_price"]))
        s = simulate(scenario, make_policy(row["policy"], seed=1)).summary
        assert (row["total_cost"], row["emissions_kg"], row["carbon_cost"]) == (
            s["total_cost"], s["emissions_kg"], s["carbon_cost"])
    fifo = [r for r in rows if r["policy"] == "fifo"]  # fifo ignores prices: same emissions
    assert {r["emissions_kg"] for r in fifo if r["scenario"] == dirs[0]} == {
        fifo[0]["emissions_kg"]}
    assert all(r["carbon_cost"] == pytest.approx(r["carbon_price"] * r["emissions_kg"] / 1000)
               for r in rows)

    assert write_sweep_outputs(rows, config.policies, tmp_path / "sw", config) == "table.md"
    table = (tmp_path / "sw" / "table.md").read_text()
    mean = sum(r["emissions_kg"] for r in rows
               if r["policy"] == "andreas" and r["carbon_price"] == 200.0) / 2
    assert "| 200 | andreas | 2 |" in table and f"{mean:.3f} (±" in table
    with (tmp_path / "sw" / "summary.csv").open() as f:
        summary = [{k: (v if k == "policy" else float(v)) for k, v in r.items()}
                   for r in csv.DictReader(f)]
    points = pareto_data(summary, ["andreas"])
    assert list(points["andreas"]["carbon_price"]) == [0.0, 200.0]
    assert points["andreas"]["emissions_kg"][1] == pytest.approx(mean, rel=1e-12)
    assert (tmp_path / "sw" / "pareto.png").stat().st_size > 0

    _, first = run_sweep(config, None, tmp_path / "resumed", max_runs=3)
    _, rest = run_sweep(config, None, tmp_path / "resumed")
    assert (first, rest) == (3, 5)
    assert (tmp_path / "resumed" / "sweep.csv").read_bytes() == (
        tmp_path / "sw" / "sweep.csv").read_bytes()
    assert len(read_rows(tmp_path / "sw" / "sweep.csv", config)) == 8


def test_the_pareto_front_keeps_only_points_nothing_beats():
    from andreas.experiments.pareto import pareto_front

    points = [(5.0, 10.0), (3.0, 12.0), (4.0, 9.0), (6.0, 8.0), (3.0, 12.0), (7.0, 8.0),
              (2.0, 20.0)]
    # (5, 10) is beaten by (4, 9); (7, 8) by (6, 8); the copy of (3, 12) counts once
    assert pareto_front(points) == [(2.0, 20.0), (3.0, 12.0), (4.0, 9.0), (6.0, 8.0)]


def test_a_carbon_sweep_without_an_intensity_names_the_file_and_writes_nothing(tmp_path):
    from andreas.experiments.sweep import run_sweep

    dirs = _carbon_dirs(tmp_path, intensity=False)
    with pytest.raises(ScenarioError) as info:
        run_sweep(_sweep(dirs), None, tmp_path / "sw")
    assert str(info.value).startswith(f"{dirs[0]}/cluster.yaml: field 'carbon_intensity'")
    assert not (tmp_path / "sw" / "sweep.csv").exists()
    assert not (tmp_path / "sw" / "sweep-settings.json").exists()


@pytest.mark.parametrize("prices, message", [
    ("0,x", "expected comma-separated numbers"), ("0,-5", "distinct numbers >= 0"),
    ("50,50", "distinct numbers >= 0"), ("nan", "distinct numbers >= 0")])
def test_bad_carbon_prices_get_one_clear_line(prices, message):
    from andreas.cli import parse_carbon_prices
    from andreas.errors import AndreasError

    with pytest.raises(AndreasError, match=message):
        parse_carbon_prices(prices)


def test_the_emissions_figure_adds_up_to_each_runs_emissions():
    """The report's emissions-over-time data ends at the run's own emissions (idle draw, every
    hour boundary), and is drawn only when the cluster gives an intensity."""
    from andreas.experiments import figures as F

    base = generate_paper_style(load_template("paper"), 2, 1, 20000)
    scenario = dataclasses.replace(base, cluster=dataclasses.replace(
        base.cluster, carbon=Tariff((300.0, 120.0, 40.0), H, 600.0)))
    for policy in ("fifo", "andreas"):
        result = simulate(scenario, make_policy(policy, seed=1))
        data = F.emissions_data(result.segments, scenario.cluster)
        assert data.emitted_kg[-1] == pytest.approx(result.summary["emissions_kg"], rel=1e-9)
        assert list(data.emitted_kg) == sorted(data.emitted_kg)
        assert set(data.intensity_g) <= {300.0, 120.0, 40.0}
        assert 3000.0 in data.times  # an hour boundary of the series (offset 600 s)
    assert F.emissions_data(result.segments, base.cluster).times.size == 0


def test_the_report_draws_emissions_over_time_only_with_an_intensity(tmp_path):
    from andreas.experiments.report import single_run_figures

    base = generate_paper_style(load_template("paper"), 2, 1, 20000)
    run = simulate(base, make_policy("fifo"))
    assert "emissions.png" not in single_run_figures(
        base.cluster, {"fifo": (run.segments, run.jobs)}, tmp_path)
    cluster = dataclasses.replace(base.cluster, carbon=Tariff((300.0, 120.0), H))
    assert "emissions.png" in single_run_figures(
        cluster, {"fifo": (run.segments, run.jobs)}, tmp_path)
    assert (tmp_path / "emissions.png").stat().st_size > 0


def _capped(cap_kg: float | None, policy: str, due: float = 4 * H):
    """One 1 kW node under a flat 500 g/kWh grid (500 g per hour of running), a cap of
    `cap_kg` per day, one job of 3 h (1.5 kg) submitted at 0."""
    from andreas.model import CarbonCap

    cluster = dataclasses.replace(one_node(Tariff((500.0,), H), watts=1000.0),
                                  carbon_cap=None if cap_kg is None else CarbonCap(cap_kg))
    scenario = Scenario(cluster, Profiles({"p": {("g", 1): 3 * H}}),
                        (Job("a", 0.0, due, 0.01, 1.0, "p"),))
    return simulate(scenario, make_policy(policy, seed=1))


def test_a_carbon_cap_that_binds_splits_the_job_across_days():
    """1 kg a day buys 2 h of the 3-h job: it runs from 0 to 2 h, waits for the next day, and
    ends at 25 h, emitting 1.0 kg on the first day and 0.5 kg on the second."""
    free = _capped(None, "andreas")
    assert free.jobs[0].completion_time == 3 * H
    run = _capped(1.0, "andreas")
    job = run.jobs[0]
    assert job.completion_time == pytest.approx(25 * H)
    assert job.restarts == 1 and job.tardiness_s == pytest.approx(21 * H)
    runs = [(s.start, s.end) for s in run.segments if s.phase == "run"]
    assert runs[0] == (0.0, pytest.approx(2 * H)) and runs[1] == (24 * H, pytest.approx(25 * H))
    s = run.summary
    assert s["emissions_kg"] == pytest.approx(1.5)
    assert s["carbon_cap_worst_kg"] == pytest.approx(1.0) and s["carbon_cap_worst_kg"] <= 1.0 + 1e-9
    assert s["carbon_cap_over_kg"] == 0.0 and s["carbon_cap_forced"] == 0
    # the accounts recomputed from the segments agree
    again = account_segments(run.scenario.cluster, run.scenario.jobs, run.segments)
    assert abs(again.emissions_g / 1000 - s["emissions_kg"]) <= 1e-9
    assert again.window_emissions_g == pytest.approx({0: 1000.0, 1: 500.0})
    assert again.cap_summary(1.0) == pytest.approx(
        {"carbon_cap_worst_kg": s["carbon_cap_worst_kg"], "carbon_cap_over_kg": 0.0})


def test_a_cap_a_policy_cannot_keep_is_reported_not_hidden():
    """fifo never stops a running job, so it cannot split the 3-h job: the first window
    starts it anyway (it would wait forever), and the run reports 0.5 kg over the cap."""
    run = _capped(1.0, "fifo")
    assert run.jobs[0].completion_time == 3 * H
    s = run.summary
    assert s["carbon_cap_forced"] == 1
    assert s["carbon_cap_worst_kg"] == pytest.approx(1.5)
    assert s["carbon_cap_over_kg"] == pytest.approx(0.5)
    again = account_segments(run.scenario.cluster, run.scenario.jobs, run.segments)
    assert again.cap_summary(1.0)["carbon_cap_over_kg"] == pytest.approx(0.5, rel=1e-12)


def test_a_cap_that_never_binds_changes_no_decision():
    base = generate_paper_style(load_template("paper"), 3, 2, 20000)
    from andreas.model import CarbonCap

    carbon = dataclasses.replace(base.cluster, carbon=Tariff((420.0, 90.0, 250.0), H))
    for policy in ("andreas", "fifo"):
        a = simulate(dataclasses.replace(base, cluster=carbon), make_policy(policy, seed=1))
        b = simulate(dataclasses.replace(base, cluster=dataclasses.replace(
            carbon, carbon_cap=CarbonCap(1e6))), make_policy(policy, seed=1))
        assert list(a.segments) == list(b.segments)
        assert b.rescheduling_points == a.rescheduling_points  # no decision at midnight
        assert b.summary["total_cost"] == pytest.approx(a.summary["total_cost"], rel=1e-12)
        assert b.summary["carbon_cap_over_kg"] == 0.0 and b.summary["carbon_cap_forced"] == 0
        assert 0 < b.summary["carbon_cap_worst_kg"] <= b.summary["emissions_kg"] + 1e-12


def test_the_cap_projection_counts_idle_draw_and_each_jobs_end_by_hand():
    """Two 1-GPU jobs on one 2-GPU node (table 300 W for one busy GPU, 500 W for two, idle
    100 W) at 1000 g/kWh: from 0 to 1 h both run (500 W), to 2 h one (300 W), then the node
    idles (100 W) to the window's end at 3 h: 0.5 + 0.3 + 0.1 = 0.9 kg."""
    from andreas.model import CarbonCap
    from andreas.policies.carbon_cap import Intent, admit, projected_g

    cluster = Cluster({"g": GpuType("g", (300.0, 500.0), idle_w=100.0)}, (Node("a", "g", 2),),
                      0.1, 1.0, 0.0, None, Tariff((1000.0,), H), 0.0, CarbonCap(0.85, 3 * H))
    jobs = [Intent("x", 0, 1, 1 * H), Intent("y", 0, 1, 2 * H)]
    assert projected_g(cluster, 0.0, 3 * H, jobs) == pytest.approx(900.0)
    # 850 g left: y (ends at 2 h) alone would emit 0.3 + 0.3 + 0.1 = 0.7 kg, fits; x does not
    # fit beside it and is split: it may run until the projection reaches 850 g
    both = admit(cluster, 0.0, 850.0, [Intent("y", 0, 1, 2 * H), Intent("x", 0, 1, 1 * H)])
    assert both.admitted == {"x", "y"} and not both.forced
    # with x: 500 W while both run; 900 g at 1 h, so 850 g is reached at 0.75 h
    assert both.revisit_at == pytest.approx(0.75 * H)
    none = admit(cluster, 0.0, 250.0, jobs)  # idle alone emits 300 g by the window's end
    assert none.admitted == frozenset() and none.revisit_at == 3 * H


def test_a_template_with_an_intensity_sweeps_at_carbon_prices(tmp_path):
    """A generator template's carbon intensity reaches its instances (it was dropped before),
    so a paper-style sweep can add --carbon-prices."""
    import shutil

    from andreas.experiments.sweep import SweepConfig, run_sweep
    from andreas.sim.generate import template_dir

    shutil.copytree(template_dir("paper"), tmp_path / "t")
    yaml_path = tmp_path / "t" / "template.yaml"
    yaml_path.write_text(yaml_path.read_text() + "carbon_intensity: {g_per_kwh: [300, 60]}\n")
    template = load_template(tmp_path / "t")
    assert generate_paper_style(template, 2, 1, 20000).cluster.carbon == Tariff((300.0, 60.0), H)
    config = SweepConfig(str(tmp_path / "t"), (2,), (20000.0,), 1, ("fifo",), (1,), None, {},
                         (), (0.0, 100.0))
    rows, _ = run_sweep(config, template, tmp_path / "sw")
    assert [(r["nodes"], r["carbon_price"]) for r in rows] == [(2, 0.0), (2, 100.0)]
    assert rows[1]["carbon_cost"] == pytest.approx(0.1 * rows[1]["emissions_kg"])


def test_the_service_reads_an_hourly_intensity_on_the_wall_clock(tmp_path):
    """In the service a CSV row holds at its own UTC timestamp: on Unix time, 01:30 reads the
    01:00 row. A run on a 1 kW node from 01:00 to 02:00 emits that row's 200 g, in the
    service's accounting too (which shifts times to its first run, and the series with them)."""
    from datetime import datetime, timezone

    from andreas.service.energy import modelled_costs

    (tmp_path / "c.csv").write_text("Datetime (UTC),Zone,g\n2026-12-05 00:00:00+00:00,Z,100\n"
                                    "2026-12-05 01:00:00+00:00,Z,200\n"
                                    "2026-12-05 02:00:00+00:00,Z,300\n")
    path = tmp_path / "cluster.yaml"
    (tmp_path / "p.csv").write_text("Datetime (UTC),EUR/MWh\n2026-12-04 23:00:00+00:00,50\n"
                                    "2026-12-05 00:00:00+00:00,70\n")
    path.write_text("energy_price: {csv: p.csv}\ncarbon_intensity: {csv: c.csv, column: g}\n"
                    "gpu_types:\n  g: {node_power_w: [1000]}\n"
                    "nodes:\n  - {name: a, gpu_type: g, gpus: 1}\n")
    cluster = read_cluster(path, wall_clock=True)
    one = datetime(2026, 12, 5, 1, tzinfo=timezone.utc).timestamp()
    assert cluster.carbon.price_at(one + 1800) == 200.0
    assert cluster.carbon.price_at(one + H) == 300.0 and cluster.carbon.price_at(one - 1) == 100.0
    assert read_cluster(path).carbon.price_at(0.0) == 100.0  # a scenario: row 0 at time 0
    assert cluster.tariff.price_at(one - H) == pytest.approx(0.07)  # 00:00's row, per kWh
    assert cluster.tariff.price_at(one - 1.5 * H) == pytest.approx(0.05)
    from andreas.model import Segment

    costs = modelled_costs(cluster, [Job("j", one, one + 2 * H, 0.01, 1.0, "p")],
                           [Segment("j", "a", "g", 1, one, one + H, 1.0)])
    assert costs.emissions_g == pytest.approx(200.0, rel=1e-12)
    bad = tmp_path / "bad.csv"
    bad.write_text("when,g\nyesterday,5\n")
    path.write_text(path.read_text().replace("c.csv", "bad.csv").replace(
        "{csv: p.csv}", "0.1"))
    with pytest.raises(ScenarioError) as info:
        read_cluster(path, wall_clock=True)
    assert str(info.value).startswith(f"{bad}:2: field 'when'")


@pytest.mark.service
def test_the_service_runs_under_an_hourly_price(tmp_path):
    """An hourly price (0.1 EUR/kWh on even UTC hours, 0.3 on odd ones) on the wall clock: a
    job runs to completion and its energy is charged at prices the series gives."""
    from conftest import train_job, wait_for
    from fastapi.testclient import TestClient

    from andreas.service.api import create_app
    from andreas.service.config import read_service_config

    admin = {"Authorization": "Bearer admin-secret"}
    service = _service_with_carbon(tmp_path, "")
    cluster = tmp_path / "svc" / "cluster.yaml"
    cluster.write_text(cluster.read_text().replace(
        "energy_price: 0.2\n", "energy_price: {eur_per_kwh: [0.1, 0.3], step_s: 3600}\n"))
    config = read_service_config(service)
    assert config.cluster.tariff is not None
    with TestClient(create_app(config, admin_token="admin-secret")) as client:
        job = client.post("/jobs", headers=admin, json=train_job(4)).json()["id"]
        wait_for(lambda: client.get(f"/jobs/{job}", headers=admin).json()["state"]
                 == "completed", timeout=180, what=lambda: "the job to complete; it is "
                 + client.get(f"/jobs/{job}", headers=admin).json()["state"])
        measured = client.get(f"/jobs/{job}", headers=admin).json()["measured"]
        assert measured["energy_cost"] > 0
        kwh = client.get("/metrics", headers=admin).text
        total_kwh = float(next(line.split()[-1] for line in kwh.splitlines()
                               if line.startswith("andreas_energy_kwh_total")))
        assert 0.1 * total_kwh * (1 - 1e-9) <= measured["energy_cost"] <= 0.3 * total_kwh * (
            1 + 1e-9)
