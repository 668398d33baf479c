"""The authors' generator rules, and the paper result the core must reproduce."""

import numpy as np
import pytest

from andreas.experiments.compare import compare
from andreas.io import load_scenario, write_scenario
from andreas.sim.generate import WEIGHT_RANGE, generate_paper_style, load_template


@pytest.fixture(scope="module")
def paper():
    return load_template("paper")


def test_paper_template_is_the_authors_data(paper):
    assert paper.cluster.gpu_types["TESLA"].node_power_w == (530.0, 700.0, 870.0, 1040.0)
    assert paper.cluster.gpu_types["TURING"].node_power_w == (400.0, 470.0)
    assert paper.cluster.energy_price == 0.17168313 and paper.cluster.pue == 1.33
    assert [c.name for c in paper.job_classes] == [f"J{i}" for i in range(1, 11)]
    assert paper.profiles.seconds_per_epoch("LSTMbig", "TESLA", 2) == 30.5512


def test_generator_rules(paper):
    sc = generate_paper_style(paper, 6, seed=11, lam=12000)
    assert [(n.gpu_type, n.gpus) for n in sc.cluster.nodes] == [("TESLA", 4), ("TURING", 2)] * 3
    assert len(sc.jobs) == 61 and sc.jobs[0].submit_time == 0
    gaps = np.diff([j.submit_time for j in sc.jobs])
    assert (gaps >= 0).all()
    for j in sc.jobs:
        times = [spe * j.epochs for spe in sc.profiles.configs(j.profile).values()]
        assert min(times) - 1e-3 <= j.due_date - j.submit_time <= max(times) + 1e-3
        assert WEIGHT_RANGE[0] <= j.tardiness_weight <= WEIGHT_RANGE[1]
    # Mean inter-arrival λ/N, checked on a large instance.
    big = generate_paper_style(paper, 100, seed=2, lam=50000, jobs_per_node=100)
    # 10,000 gaps: SE 1 %
    assert np.mean(np.diff([j.submit_time for j in big.jobs])) == pytest.approx(500, rel=0.04)


def test_generated_scenario_round_trips_through_files(paper, tmp_path):
    sc = generate_paper_style(paper, 3, seed=5, lam=8000)
    write_scenario(sc, tmp_path)
    back = load_scenario(tmp_path)
    assert back.jobs == sc.jobs and back.cluster.nodes == sc.cluster.nodes
    assert dict(back.profiles.table) == dict(sc.profiles.table)


def test_andreas_beats_every_baseline_on_the_paper_scenario(paper):
    """The core issue's done criterion: 10 nodes, λ = 10000, mean over 5 instances."""
    scenarios = [generate_paper_style(paper, 10, k, 10000) for k in range(1, 6)]
    policies = ["fifo", "edf", "ps", "andreas"]
    table = {r["policy"]: r for r in compare(scenarios, policies, [1], workers=2).table()}
    for baseline in ("fifo", "edf", "ps"):
        assert table["andreas"]["total_cost_mean"] < table[baseline]["total_cost_mean"]
        assert table["andreas"][f"reduction_vs_{baseline}_pct"] > 0


def test_workload_shapes(paper):
    from andreas.sim.generate import WorkloadShape, generate

    shape = WorkloadShape(lam=6000, jobs_per_node=5, due_factor=(1.0, 3.0),
                          weight_range=(0.005, 0.05), arrivals="bursts", burst_size=5,
                          node_types=("TURING", "TESLA", "TURING"))
    sc = generate(paper, 6, seed=3, shape=shape)
    assert [n.gpu_type for n in sc.cluster.nodes] == ["TURING", "TESLA", "TURING"] * 2
    profiles = sc.profiles
    for j in sc.jobs:
        fastest = min(t * j.epochs for c, t in profiles.configs(j.profile).items()
                      if c[1] <= (4 if c[0] == "TESLA" else 2))
        assert 1.0 * fastest - 1e-2 <= j.due_date - j.submit_time <= 3.0 * fastest + 1e-2
        assert 0.005 <= j.tardiness_weight <= 0.05
    submits = sorted(j.submit_time for j in sc.jobs)
    # bursts: groups of 5 jobs within a minute of each other
    groups = [submits[i:i + 5] for i in range(0, 30, 5)]
    assert all(g[-1] - g[0] <= 60.0 for g in groups[1:])
    daily = generate(paper, 4, seed=1, shape=WorkloadShape(lam=4000, arrivals="daily"))
    assert len(daily.jobs) == 41 and all(b.submit_time >= a.submit_time
                                         for a, b in zip(daily.jobs, daily.jobs[1:]))
    with pytest.raises(ValueError, match="node types: V100 not in the template"):
        generate(paper, 2, seed=1, shape=WorkloadShape(node_types=("V100",)))
    with pytest.raises(ValueError, match="due factor"):
        WorkloadShape(due_factor=(3.0, 1.0))
