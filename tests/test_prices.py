"""Time-varying electricity prices: integration across hour boundaries and negative prices,
hand-computed; the simulator and the recomputation agree; andreas waits for cheap hours."""

import pytest

from andreas.cost import account_segments
from andreas.errors import ScenarioError
from andreas.io import load_scenario, read_cluster, write_scenario
from andreas.model import Cluster, GpuType, Job, Node, Profiles, Scenario, Tariff
from andreas.policies import make_policy
from andreas.sim.engine import simulate

H = 3600.0


def test_price_integral_across_an_hour_boundary_and_a_negative_price():
    t = Tariff((0.10, -0.05, 0.20), H, offset_s=1800.0)  # time 0 is half way into hour 0
    assert t.price_at(0.0) == 0.10 and t.price_at(1800.0) == -0.05
    # 30 min at 0.10, then 30 min at -0.05 (EUR/kWh x s)
    assert t.integral(0.0, H) == pytest.approx(0.10 * 1800 - 0.05 * 1800)
    # the whole negative hour, then 10 min at 0.20
    assert t.integral(1800.0, 1800.0 + H + 600) == pytest.approx(-0.05 * H + 0.20 * 600)
    # past the end the series repeats: hour 0 again after 3 h
    assert t.integral(9000.0, 9000.0 + H) == pytest.approx(0.10 * H)
    assert t.changes(0.0, 9000.0) == [1800.0, 5400.0]  # boundaries strictly inside
    # 1 kW for 1 h across the boundary, PUE 1.5: 0.5 kWh x 0.10 + 0.5 kWh x (-0.05), x 1.5
    c = Cluster({}, (), 0.0, 1.5, 0.0, t)
    assert c.energy_eur(1000.0, 0.0, H) == pytest.approx(1.5 * (0.5 * 0.10 - 0.5 * 0.05))


def _day():
    tariff = Tariff((0.30, 0.30, 0.05, -0.02, 0.10), H)
    cluster = Cluster({"g": GpuType("g", (300.0, 550.0))}, (Node("a", "g", 2),), 0.146, 1.0,
                      0.0, tariff)
    profiles = Profiles({"p": {("g", 1): 60.0, ("g", 2): 35.0}})
    jobs = (Job("flex", 0.0, 6 * H, 0.001, 60.0, "p"), Job("urgent", 0.0, 4000.0, 0.01, 30.0, "p"))
    return Scenario(cluster, profiles, jobs)


def test_simulated_energy_cost_is_integrated_over_the_tariff_by_hand():
    scenario = _day()
    result = simulate(scenario, make_policy("fifo"))
    # fifo: both on node a from 0: 550 W to 1800 s, then flex alone 300 W to 3600 s, at 0.30
    expected = (550 * 1800 + 300 * 1800) * 0.30 / 3.6e6
    assert result.summary["energy_cost"] == pytest.approx(expected)
    recomputed = account_segments(scenario.cluster, scenario.jobs, result.segments)
    assert recomputed.energy_cost == pytest.approx(expected)
    per_job = {r.job_id: r.energy_cost for r in result.jobs}
    assert sum(per_job.values()) == pytest.approx(expected)
    assert per_job == pytest.approx(recomputed.job_energy_cost)


def test_andreas_waits_for_the_cheap_hours_when_the_due_date_allows():
    scenario = _day()
    fifo = simulate(scenario, make_policy("fifo"))
    andreas = simulate(scenario, make_policy("andreas", seed=1))
    paper = simulate(scenario, make_policy("andreas-paper", seed=1))  # no deferral
    flex = {r.job_id: r for r in andreas.jobs}["flex"]
    assert flex.first_start >= 2 * H  # it waited for the 0.05 / -0.02 hours
    assert flex.tardiness_s == 0.0
    # urgent alone at 0.30 for 1800 s; flex on 2 GPUs (2100 s) inside the -0.02 hour
    expected = 300 * 1800 * 0.30 / 3.6e6 + 550 * 2100 * -0.02 / 3.6e6
    assert andreas.summary["total_cost"] == pytest.approx(expected)
    assert andreas.summary["total_cost"] < min(fifo.summary["total_cost"],
                                               paper.summary["total_cost"])
    recomputed = account_segments(scenario.cluster, scenario.jobs, andreas.segments)
    assert recomputed.energy_cost == pytest.approx(andreas.summary["energy_cost"])


def test_no_deferral_past_the_latest_start():
    scenario = _day()
    tight = Scenario(scenario.cluster, scenario.profiles,
                     (Job("flex", 0.0, 3 * H, 0.001, 60.0, "p"),))
    result = simulate(tight, make_policy("andreas", seed=1))
    assert result.jobs[0].first_start == 0.0  # the cheap hours come too late for its due date


CLUSTER = """\
energy_price: {{csv: prices.csv, start: "{start}", scale: 0.5}}
pue: 1.0
gpu_types:
  g: {{node_power_w: [100]}}
nodes:
  - {{name: a, gpu_type: g, gpus: 1}}
"""
PRICES = """\
Datetime (UTC),Datetime (Local),Price (USD/MWh)
2023-07-01 00:00:00+00:00,2023-06-30 20:00:00-04:00,40.0
2023-07-01 01:00:00+00:00,2023-06-30 21:00:00-04:00,-10.0
2023-07-01 02:00:00+00:00,2023-06-30 22:00:00-04:00,{third}
"""


def test_cluster_reads_an_hourly_price_csv_with_a_start_row(tmp_path):
    (tmp_path / "prices.csv").write_text(PRICES.format(third="20.0"))
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER.format(start="2023-07-01 01:00"))
    cluster = read_cluster(path)
    t = cluster.tariff
    assert t.prices == pytest.approx((0.02, -0.005, 0.01))  # per MWh -> per kWh, x 0.5
    assert t.price_at(0.0) == pytest.approx(-0.005) and t.offset_s == H


@pytest.mark.parametrize("start, third, message", [
    ("2023-08-01", "20.0", "field 'energy_price.start': no row of prices.csv starts with"),
    ("2023-07-01 01:00", "cheap", "prices.csv:4: field 'Price (USD/MWh)'"),
])
def test_bad_price_files_name_the_file_line_and_field(tmp_path, start, third, message):
    (tmp_path / "prices.csv").write_text(PRICES.format(third=third))
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER.format(start=start))
    with pytest.raises(ScenarioError) as info:
        read_cluster(path)
    assert message in str(info.value)


def test_a_scenario_with_a_tariff_round_trips(tmp_path):
    scenario = _day()
    write_scenario(scenario, tmp_path / "s")
    again = load_scenario(tmp_path / "s")
    assert again.cluster.tariff.prices == scenario.cluster.tariff.prices
    a = simulate(scenario, make_policy("andreas", seed=1)).summary["total_cost"]
    b = simulate(again, make_policy("andreas", seed=1)).summary["total_cost"]
    assert a == pytest.approx(b)
    assert "eur_per_kwh" in (tmp_path / "s" / "cluster.yaml").read_text()


def test_milp_runs_a_job_inside_a_negative_price_minute_rather_than_idle_the_cluster():
    # Found by the invariants property test. At t = 0 the price is -0.05 EUR/kWh for 60 s,
    # then 0.10. A job of 12 epochs (1 s each on 2 GPUs) can run wholly at the negative price;
    # priced at the mean over the decision's horizon (positive) it looked dearer than waiting,
    # and the milp left it waiting on an idle cluster. Priced over its own run it earns.
    tariff = Tariff((-0.05, 0.10), 60.0)
    cluster = Cluster({"A": GpuType("A", (50.0, 50.0))}, (Node("n0", "A", 2),), 0.025, 1.0, 0.0,
                      tariff)
    profiles = Profiles({"p": {("A", 1): 8.0, ("A", 2): 1.0}})
    jobs = (Job("j0", 0.0, 0.0, 0.0, 0.5, "p"), Job("j1", 0.0, 0.0, 0.0, 0.5, "p"),
            Job("j2", 0.0, 0.0, 0.0, 12.0, "p"))
    result = simulate(Scenario(cluster, profiles, jobs), make_policy("milp", seed=1))
    # j0 and j1 share the node for 4 s; j2 then runs 12 s on both GPUs: 50 W x 16 s at -0.05
    assert {r.job_id: r.completion_time for r in result.jobs} == pytest.approx(
        {"j0": 4.0, "j1": 4.0, "j2": 16.0})
    assert result.summary["total_cost"] == pytest.approx(50.0 * 16.0 * -0.05 / 3.6e6)


def test_a_waiting_job_no_free_gpus_can_host_does_not_break_the_price_horizon():
    # Found by the round-based hypothesis test: with a tariff, fifo is asked about its waiting
    # jobs on the GPUs left free; a job that needs 2 GPUs where 1 is free has no candidate
    # (its run time NaN), and the mean price over the planning horizon became NaN (ValueError).
    from andreas.policies.base import JobView, Snapshot
    from andreas.policies.search.planning import PlanningContext

    tariff = Tariff((0.30, 0.05), H)
    free = Cluster({"g": GpuType("g", (300.0, 550.0))}, (Node("a", "g", 1),), 0.146, 1.0,
                   0.0, tariff)
    profiles = Profiles({"big": {("g", 2): 35.0}, "small": {("g", 1): 60.0}})
    views = (JobView(Job("two", 0.0, H, 0.01, 10.0, "big"), 10.0),
             JobView(Job("one", 0.0, H, 0.01, 10.0, "small"), 10.0))
    ctx = PlanningContext(Snapshot(0.0, free, profiles, views))
    # the horizon is the small job's 600 s, all at 0.30 EUR/kWh
    assert ctx.eur_per_joule == pytest.approx(free.eur_per_joule(0.0, 600.0))
    assert ctx.eur_per_joule == pytest.approx(0.30 / 3.6e6)
    plan = make_policy("fifo").decide(Snapshot(0.0, free, profiles, views))
    assert set(plan) == {"one"} and (plan["one"].node, plan["one"].gpus) == ("a", 1)


def test_a_forecast_reads_the_hours_it_simulates_not_the_first_hours():
    """A forecast runs on times relative to its now: at t = 2 h, a half-hour job on a 1 kW
    node costs 0.5 kWh at the third hour's 1.0 EUR/kWh (0.5 EUR) and emits at its 400 g/kWh
    (0.2 kg), not at hour 0's 0.1 EUR and 100 g (it read those before)."""
    from andreas.policies.base import Assignment, JobView, Snapshot
    from andreas.sim.forecast import forecast

    H = 3600.0
    cluster = Cluster({"g": GpuType("g", (1000.0,))}, (Node("a", "g", 1),), 0.5, 1.0, 0.0,
                      Tariff((0.1, 0.1, 1.0, 1.0), H), Tariff((100.0, 100.0, 400.0, 400.0), H))
    job = Job("a", 2 * H, 1e9, 0.01, 1.0, "p")
    snapshot = Snapshot(2 * H, cluster, Profiles({"p": {("g", 1): 1800.0}}), (JobView(job, 1.0),))
    f = forecast(snapshot, {"a": Assignment("a", 1)}, make_policy("greedy"))["a"]
    assert f.energy_cost == pytest.approx(0.5, rel=1e-12)
    assert f.emissions_kg == pytest.approx(0.2, rel=1e-12)
    assert f.completion == pytest.approx(2.5 * H)
    shifted = cluster.from_time(2 * H)
    assert shifted.tariff.price_at(0.0) == 1.0 and shifted.carbon.price_at(7200.0) == 100.0
