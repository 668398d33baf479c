"""Hand-computed cost cases. Power and price are chosen so that 1 J costs 1e-7 EUR."""

import math

import pytest
from helpers import Scripted, cluster, job, scenario
from hypothesis import given
from hypothesis import strategies as st

from andreas.cost import account_segments
from andreas.policies import make_policy
from andreas.sim.engine import simulate

E = 1e-7  # EUR per joule in these cases


def by_job(result):
    return {r.job_id: r for r in result.jobs}


def test_one_job_takes_fastest_config_when_none_meets_due_date():
    cl = cluster([("n1", "G", 2)], {"G": [100, 150]})
    # (G,1): 100 s, 10 kJ; (G,2): 60 s, 9 kJ. Due at 50 s: neither meets it -> fastest, (G,2).
    sc = scenario(cl, {"p": {("G", 1): 10.0, ("G", 2): 6.0}}, [job("a", due=50, weight=0.01)])
    r = simulate(sc, make_policy("fifo"))
    a = by_job(r)["a"]
    assert a.completion_time == pytest.approx(60.0)
    assert a.tardiness_cost == pytest.approx(10 * 0.01)
    assert r.summary["energy_cost"] == pytest.approx(150 * 60 * E)
    assert r.summary["total_cost"] == pytest.approx(0.1 + 9000 * E)
    assert [(s.gpus, s.start, s.end) for s in r.segments] == [(2, 0.0, 60.0)]


def test_cheapest_config_that_meets_due_date():
    cl = cluster([("n1", "G", 2)], {"G": [100, 150]})
    # Due at 200 s: both meet it; (G,2) costs 9 kJ < 10 kJ for (G,1).
    sc = scenario(cl, {"p": {("G", 1): 10.0, ("G", 2): 6.0}}, [job("a", due=200)])
    r = simulate(sc, make_policy("edf"))
    assert r.segments[0].gpus == 2
    # With (G,2) at 200 W the one-GPU run is cheaper (10 kJ < 12 kJ).
    cl2 = cluster([("n1", "G", 2)], {"G": [100, 200]})
    sc2 = scenario(cl2, {"p": {("G", 1): 10.0, ("G", 2): 6.0}}, [job("a", due=200)])
    assert simulate(sc2, make_policy("edf")).segments[0].gpus == 1


def test_two_jobs_share_a_node_and_split_its_energy_by_gpus():
    cl = cluster([("n1", "G", 2)], {"G": [100, 150]})
    jobs = [job("a", submit=0, due=90, weight=0.01, epochs=10),
            job("b", submit=50, due=200, weight=0.01, epochs=5)]
    sc = scenario(cl, {"p": {("G", 1): 10.0}}, jobs)
    r = simulate(sc, make_policy("fifo"))
    # [0,50]: 1 busy GPU, 100 W -> 5000 J (all a). [50,100]: 2 busy, 150 W -> 7500 J, split.
    assert r.summary["energy_cost"] == pytest.approx(12500 * E)
    a, b = by_job(r)["a"], by_job(r)["b"]
    assert a.energy_cost == pytest.approx(8750 * E)
    assert b.energy_cost == pytest.approx(3750 * E)
    assert a.tardiness_cost == pytest.approx(0.1)  # done at 100, due 90
    assert b.tardiness_cost == 0.0
    assert r.summary["tardy_jobs"] == 1


@pytest.mark.parametrize("overhead, completion, energy_j, tardiness", [
    (0.0, 120.0, 12000.0, 0.0),   # resumed at 50, 7 epochs left: 50 + 70
    (5.0, 125.0, 12500.0, 0.1),   # 5 s restart (powered, no progress), 5 s late x 0.02
])
def test_paused_and_resumed_job(overhead, completion, energy_j, tardiness):
    cl = cluster([("n1", "G", 1)], {"G": [100]}, overhead=overhead)
    jobs = [job("a", submit=0, due=120, weight=0.02, epochs=10),
            job("b", submit=30, due=1000, epochs=2)]
    sc = scenario(cl, {"p": {("G", 1): 10.0}}, jobs)
    # b preempts a while it runs; a resumes when b is done.
    policy = Scripted(lambda t, ids: {"b": ("n1", 1)} if "b" in ids else {"a": ("n1", 1)})
    r = simulate(sc, policy)
    a = by_job(r)["a"]
    assert a.completion_time == pytest.approx(completion)
    assert a.restarts == 1 and by_job(r)["b"].restarts == 0
    assert r.summary["restarts"] == 1
    assert r.summary["energy_cost"] == pytest.approx(energy_j * E)
    assert r.summary["tardiness_cost"] == pytest.approx(tardiness)
    phases = [(s.job_id, s.phase, s.start, s.end, round(s.epochs, 9)) for s in r.segments]
    expected = [("a", "run", 0.0, 30.0, 3.0), ("b", "run", 30.0, 50.0, 2.0)]
    if overhead:
        expected.append(("a", "restart", 50.0, 55.0, 0.0))
    expected.append(("a", "run", 50.0 + overhead, completion, 7.0))
    assert sorted(phases, key=lambda p: (p[2], p[0])) == \
        sorted(expected, key=lambda p: (p[2], p[0]))
    # The independent recomputation from segments agrees.
    again = account_segments(sc.cluster, sc.jobs, r.segments)
    assert again.total_cost == pytest.approx(r.summary["total_cost"])


def test_pue_and_price_scale_energy_cost():
    cl = cluster([("n1", "G", 1)], {"G": [1000]}, price=0.2, pue=1.5)
    sc = scenario(cl, {"p": {("G", 1): 36.0}}, [job("a", epochs=100)])  # 3600 s at 1 kW
    r = simulate(sc, make_policy("fifo"))
    assert r.summary["energy_kwh"] == pytest.approx(1.0)
    assert r.summary["energy_cost"] == pytest.approx(1.0 * 0.2 * 1.5)


def test_idle_draw_of_powered_nodes_is_charged_to_the_cluster():
    from andreas.model import Cluster, GpuType, Node
    cl = Cluster({"G": GpuType("G", (100.0,), idle_w=20.0)},
                 (Node("n1", "G", 1), Node("n2", "G", 1)), 0.36)
    # One job, submitted at 5 s, runs 10 s on one node: n1 idles 5 s then draws 100 W for 10 s;
    # n2 idles all 15 s: 20*5 + 100*10 + 20*15 = 1400 J. The job pays its node's 1000 J.
    sc = scenario(cl, {"p": {("G", 1): 10.0}}, [job("a", submit=5, epochs=1)])
    r = simulate(sc, make_policy("fifo"))
    assert r.summary["energy_cost"] == pytest.approx(1400 * E)
    assert r.jobs[0].energy_cost == pytest.approx(1000 * E)
    assert account_segments(sc.cluster, sc.jobs, r.segments).energy_cost == \
        pytest.approx(1400 * E)


def test_first_start_overhead_delays_and_powers_a_first_start_without_counting_a_restart():
    cl = cluster([("n1", "G", 1)], {"G": [100]}, overhead=5.0)
    # 10 epochs of 2 s: 20 s of work. With the option, 5 s of start-up first, GPU held at 100 W.
    sc = scenario(cl, {"p": {("G", 1): 2.0}}, [job("a", submit=3.0, due=25.0, weight=0.01)])
    plain = by_job(simulate(sc, make_policy("fifo")))["a"]
    assert plain.completion_time == pytest.approx(23.0) and plain.tardiness_cost == 0.0
    r = simulate(sc, make_policy("fifo"), first_start_overhead=True)
    a = by_job(r)["a"]
    assert a.first_start == pytest.approx(3.0) and a.completion_time == pytest.approx(28.0)
    assert a.restarts == 0
    assert a.tardiness_cost == pytest.approx(3 * 0.01)
    assert r.summary["energy_cost"] == pytest.approx(100 * 25 * E)


def test_restarting_gpus_draw_the_types_restart_power():
    from dataclasses import replace

    cl = cluster([("n1", "G", 2)], {"G": [100, 200]}, overhead=5.0)
    cl = replace(cl, gpu_types={"G": replace(cl.gpu_types["G"], restart_w=40.0)})
    # a (1 GPU, 10 s of work) and b (1 GPU, 20 s) both start at 0 and pay a 5 s start-up at
    # 40 W each (the table's full-node share is 100 W per GPU): 0-5 s two GPUs at 2 x 40 W,
    # 5-15 s 200 W, 15-25 s b alone at 100 W.
    sc = scenario(cl, {"p": {("G", 1): 1.0}, "q": {("G", 1): 2.0}},
                  [job("a", epochs=10.0), job("b", epochs=10.0, profile="q")])
    r = simulate(sc, make_policy("fifo"), first_start_overhead=True)
    jobs = by_job(r)
    assert jobs["a"].completion_time == pytest.approx(15.0)
    assert jobs["b"].completion_time == pytest.approx(25.0)
    assert r.summary["energy_cost"] == pytest.approx((80 * 5 + 200 * 10 + 100 * 10) * E)
    assert jobs["a"].energy_cost == pytest.approx((40 * 5 + 100 * 10) * E)
    assert jobs["b"].energy_cost == pytest.approx((40 * 5 + 100 * 10 + 100 * 10) * E)
    again = account_segments(sc.cluster, sc.jobs, r.segments)  # the segments say the same
    assert again.energy_cost == pytest.approx(r.summary["energy_cost"])
    # unset, the restart draws as busy (the paper's model)
    plain = simulate(scenario(replace(cl, gpu_types={"G": replace(cl.gpu_types["G"],
                                                                  restart_w=None)}),
                              sc.profiles.table, sc.jobs), make_policy("fifo"),
                     first_start_overhead=True)
    assert plain.summary["energy_cost"] == pytest.approx((200 * 15 + 100 * 10) * E)


@given(st.lists(st.tuples(st.floats(0, 10), st.one_of(st.floats(-1e6, 1e6), st.just(math.nan)),
                          st.floats(-1e6, 1e6)), max_size=20))
def test_tardiness_costs_is_tardiness_cost_elementwise_to_the_bit(rows):
    import numpy as np

    from andreas.cost import tardiness_cost, tardiness_costs

    w, c, d = (np.array([r[i] for r in rows], float) for i in range(3))
    assert tardiness_costs(w, c, d).tolist() == [tardiness_cost(*r) for r in rows]


def test_one_node_draw_rule():
    from andreas.cost import job_draw_w, node_draw_w
    from andreas.model import GpuType

    kind = GpuType("T", (100.0, 160.0, 210.0), idle_w=40.0)
    assert node_draw_w(kind, 0) == 40.0  # idle: the idle draw, whatever is saved
    assert node_draw_w(kind, 0, saved_w=30.0) == 40.0
    assert node_draw_w(kind, 2) == 160.0
    assert node_draw_w(kind, 3, saved_w=25.0) == 185.0
    # two of three busy GPUs take 2/3 of 210 W = 140 W, less the job's own 15 W saved
    assert job_draw_w(kind, 3, 2, saved_w=15.0) == pytest.approx(125.0)
    assert job_draw_w(kind, 2, 2) == 160.0
