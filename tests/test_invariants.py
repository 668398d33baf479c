"""Property-based invariants of whole simulations, for every policy."""

import json
from collections import defaultdict

import pytest
from helpers import cluster, drawn_jobs, drawn_profiles, policy_with, scenario
from hypothesis import given, settings
from hypothesis import strategies as st

from andreas.cost import account_segments
from andreas.policies import make_policy, policy_names
from andreas.sim.engine import simulate
from andreas.sim.output import recompute, write_result


@st.composite
def scenarios(draw):
    n_nodes = draw(st.integers(1, 3))
    types = ["A", "B"][: draw(st.integers(1, 2))]
    nodes = [(f"n{i}", types[i % len(types)], draw(st.integers(1, 4))) for i in range(n_nodes)]
    power = {t: sorted(draw(st.lists(st.integers(50, 600), min_size=4, max_size=4)))
             for t in types}
    profiles = drawn_profiles(draw, types)
    jobs = drawn_jobs(draw, 7, 400, 800)
    overhead = float(draw(st.sampled_from([0, 0, 7])))
    cl = cluster(nodes, power, overhead=overhead)
    if draw(st.booleans()):  # nodes that stay powered when idle
        from dataclasses import replace
        cl = replace(cl, gpu_types={t: replace(gt, idle_w=float(draw(st.integers(
            0, int(gt.node_power_w[0]))))) for t, gt in cl.gpu_types.items()})
    if overhead and draw(st.booleans()):  # restarting GPUs draw less (or more) than busy ones
        from dataclasses import replace
        cl = replace(cl, gpu_types={t: replace(gt, restart_w=float(draw(st.integers(
            0, int(gt.node_power_w[0]))))) for t, gt in cl.gpu_types.items()})
    if draw(st.booleans()):  # an hourly-ish tariff (short steps), negative prices included
        from dataclasses import replace

        from andreas.model import Tariff
        prices = tuple(draw(st.lists(st.sampled_from([-0.05, 0.0, 0.1, 0.2, 0.4]),
                                     min_size=1, max_size=5)))
        tariff = Tariff(prices, float(draw(st.sampled_from([60, 250]))),
                        float(draw(st.integers(0, 100))))
        cl = replace(cl, tariff=tariff, energy_price=sum(prices) / len(prices))
    return scenario(cl, profiles, jobs)


def check_invariants(sc, result):
    capacity = {n.name: n.gpus for n in sc.cluster.nodes}
    # No node is ever over-subscribed: sweep each node's segment boundaries.
    per_node = defaultdict(list)
    for s in result.segments:
        assert s.end > s.start
        per_node[s.node].append(s)
    for node, segs in per_node.items():
        events = sorted([(s.start, s.gpus) for s in segs] + [(s.end, -s.gpus) for s in segs],
                        key=lambda e: (e[0], e[1]))  # releases before acquisitions
        busy = 0
        for _, delta in events:
            busy += delta
            assert 0 <= busy <= capacity[node]
    # Every epoch is accounted for, and only run segments make progress.
    done = defaultdict(float)
    for s in result.segments:
        if s.phase == "restart":
            assert s.epochs == 0.0
        done[s.job_id] += s.epochs
    for j in sc.jobs:
        assert done[j.job_id] == pytest.approx(j.epochs, rel=1e-9, abs=1e-9)
    # Costs recomputed from the segments alone equal the summary.
    again = account_segments(sc.cluster, sc.jobs, result.segments)
    assert again.energy_cost == pytest.approx(result.summary["energy_cost"], rel=1e-9, abs=1e-12)
    assert again.tardiness_cost == pytest.approx(result.summary["tardiness_cost"], rel=1e-9,
                                                 abs=1e-12)
    # The figures' power curve and cumulative cost come to the same totals.
    from andreas.experiments import figures as F
    power = F.power_series(result.segments, sc.cluster)
    assert power.energy_joules() / 3.6e6 == pytest.approx(result.summary["energy_kwh"],
                                                          rel=1e-9, abs=1e-12)
    cumulative = F.cumulative_cost_data(result.segments, sc.cluster, {
        r.job_id: (r.completion_time, r.tardiness_cost) for r in result.jobs})
    assert cumulative.total_eur[-1] == pytest.approx(result.summary["total_cost"], rel=1e-9,
                                                     abs=1e-12)
    for r in result.jobs:
        assert again.completion[r.job_id] == pytest.approx(r.completion_time)
        assert again.job_energy_cost.get(r.job_id, 0.0) == pytest.approx(r.energy_cost,
                                                                         rel=1e-9, abs=1e-12)
        assert r.first_start >= r.submit_time - 1e-9


def fingerprint(result):
    summary = {k: v for k, v in result.summary.items() if k != "scheduler_seconds"}
    return summary, result.segments, result.jobs


@settings(max_examples=40, deadline=None)
@given(scenarios(), st.sampled_from(policy_names()), st.sampled_from([None, 50.0]),
       st.integers(1, 5), st.booleans())
def test_simulation_invariants(sc, policy, period, seed, first_start_overhead):
    result = simulate(sc, policy_with(policy, seed), period=period,
                      first_start_overhead=first_start_overhead)
    check_invariants(sc, result)
    again = simulate(sc, policy_with(policy, seed), period=period,
                     first_start_overhead=first_start_overhead)
    assert fingerprint(again) == fingerprint(result)


def test_costs_recomputed_from_written_segments_csv(tmp_path):
    from andreas.sim.generate import generate_paper_style, load_template
    sc = generate_paper_style(load_template("paper"), 4, seed=3, lam=2000)
    result = simulate(sc, make_policy("fifo"))
    write_result(result, tmp_path / "out")
    again = recompute(sc, tmp_path / "out")

    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["tardiness_cost"] > 0  # a loaded instance, so both parts are exercised
    assert again.energy_cost == pytest.approx(summary["energy_cost"], rel=1e-12)
    assert again.tardiness_cost == pytest.approx(summary["tardiness_cost"], rel=1e-12)
    assert again.total_cost == pytest.approx(summary["total_cost"], rel=1e-12)
