"""The per-decision MILP against brute force, and against the Randomized Greedy."""

import itertools

import pytest
from helpers import cluster, job, policy_with, scenario, snapshot
from hypothesis import given, settings
from hypothesis import strategies as st

from andreas.optim.highs import solve
from andreas.optim.milp_policy import build_milp, decision_cost, plan_from_solution
from andreas.policies import make_policy
from andreas.policies.search.placement import Placement
from andreas.policies.search.planning import PlanningContext
from andreas.sim.engine import simulate


def brute_force(ctx):
    k = ctx.packed
    options = []
    for j in range(len(ctx.job_ids)):  # every (node, candidate column) that fits, or waiting
        opts = [None]
        for c in range(k.nc[j]):
            for n in ctx.nodes_of_type[k.ct[j, c]]:
                if ctx.node_cap[n] >= k.cg[j, c]:
                    opts.append((n, c))
        options.append(opts)
    best = float("inf")
    waiting = Placement.waiting(len(ctx.job_ids))
    for combo in itertools.product(*options):
        used = [0] * len(ctx.node_cap)
        for j, e in enumerate(combo):
            if e is not None:
                used[e[0]] += k.cg[j, e[1]]
        if all(u <= c for u, c in zip(used, ctx.node_cap)):
            best = min(best, decision_cost(ctx, waiting.moved_to(ctx, dict(enumerate(combo)))))
    return best


@st.composite
def tiny(draw):
    nodes = [("n0", "A", draw(st.integers(1, 4))), ("n1", draw(st.sampled_from("AB")),
                                                     draw(st.integers(1, 2)))]
    power = {t: sorted(draw(st.lists(st.integers(60, 500), min_size=4, max_size=4)))
             for t in "AB"}
    profiles = {"p": {("A", 1): float(draw(st.integers(5, 60))),
                      ("A", 2): float(draw(st.integers(3, 40))),
                      ("B", 1): float(draw(st.integers(5, 90)))}}
    jobs = [job(f"j{i}", due=draw(st.integers(10, 3000)), weight=draw(st.sampled_from(
        [0.001, 0.01, 0.05])), epochs=draw(st.integers(1, 30))) for i in range(4)]
    sc = scenario(cluster(nodes, power), profiles, jobs)
    return PlanningContext(snapshot(sc, now=float(draw(st.integers(0, 100)))))


@settings(max_examples=30, deadline=None)
@given(tiny())
def test_milp_equals_brute_force_on_tiny_instances(ctx):
    d = build_milp(ctx)
    result = solve(d.model, time_limit=30)
    assert result.optimal
    plan = plan_from_solution(d, ctx, result.values)
    assert decision_cost(ctx, plan) == pytest.approx(result.objective, rel=1e-7, abs=1e-9)
    assert result.objective == pytest.approx(brute_force(ctx), rel=1e-7, abs=1e-9)


def test_milp_never_worse_than_andreas_per_decision():
    from andreas.sim.generate import generate_paper_style, load_template
    sc = generate_paper_style(load_template("paper"), 3, 2, 3000, jobs_per_node=3)
    milp = make_policy("milp", seed=1)
    andreas = make_policy("andreas", seed=1)
    checked = 0

    class Both:
        name = "both"

        def decide(self, snap):
            nonlocal checked
            ctx = PlanningContext(snap)
            placed, cost, _ = milp.optimise(ctx)
            mine = decision_cost(ctx, andreas.elite(ctx)[0].placement)
            assert cost <= mine + 1e-9
            checked += 1
            return placed.to_plan(ctx)

    result = simulate(sc, Both())
    assert checked == result.summary["rescheduling_points"] > 5
    assert milp.stats["decisions"] == checked


@st.composite
def small_scenarios(draw):
    types = ["A", "B"][: draw(st.integers(1, 2))]
    nodes = [(f"n{i}", types[i % len(types)], draw(st.integers(1, 3)))
             for i in range(draw(st.integers(1, 2)))]
    power = {t: sorted(draw(st.lists(st.integers(60, 500), min_size=3, max_size=3)))
             for t in types}
    profiles = {"p": {("A", 1): float(draw(st.integers(5, 40)))}}
    for t in types:
        for g in (1, 2):
            if draw(st.booleans()):
                profiles["p"][(t, g)] = float(draw(st.integers(3, 40)))
    jobs = []
    for i in range(draw(st.integers(1, 4))):
        submit = float(draw(st.integers(0, 300)))
        jobs.append(job(f"j{i}", submit=submit, due=submit + draw(st.integers(0, 600)),
                        weight=draw(st.sampled_from([0.0, 0.001, 0.02])),
                        epochs=float(draw(st.integers(1, 20)))))
    overhead = float(draw(st.sampled_from([0, 30])))
    cl = cluster(nodes, power, overhead=overhead)
    if draw(st.booleans()):  # nodes that stay powered when idle
        from dataclasses import replace
        cl = replace(cl, gpu_types={t: replace(gt, idle_w=float(draw(st.integers(
            0, int(gt.node_power_w[0]))))) for t, gt in cl.gpu_types.items()})
    return scenario(cl, profiles, jobs)


@settings(max_examples=20, deadline=None)
@given(small_scenarios(), st.sampled_from([6, 15]), st.booleans())
def test_hindsight_bound_is_below_every_policy(sc, slots, lp):
    """Both bounds, the MILP and the LP with mean busy times and an overflow, are below the
    cost of every policy on every example."""
    from andreas.optim.bound import hindsight_bound
    from andreas.policies import policy_names
    bound = hindsight_bound(sc, slots=slots, time_limit=20, lp=lp)
    assert bound.lower_bound >= 0
    for name in policy_names():
        if name == "milp":
            continue  # same core as andreas; the MILP is slow to run on every example
        cost = simulate(sc, policy_with(name, 1)).summary["total_cost"]
        assert bound.lower_bound <= cost * (1 + 1e-7) + 1e-9, name


def test_the_lp_bound_by_hand():
    """One 1-GPU node (100 W, 1e-7 EUR/J), one job of 100 s due at 50 s, 0.01 EUR/s late: no
    schedule costs less than 1e-3 EUR of energy and 50 s late (0.5 EUR), and the LP says so
    whatever its horizon (work past it goes to the overflow at the same energy)."""
    from andreas.optim.bound import hindsight_bound

    sc = scenario(cluster([("n", "T", 1)], {"T": [100]}), {"p": {("T", 1): 10.0}},
                  [job("a", due=50.0, weight=0.01, epochs=10.0)])
    for horizon in (None, 60.0, 400.0):
        bound = hindsight_bound(sc, slots=4, lp=True, horizon=horizon)
        assert bound.optimal
        assert bound.lower_bound == pytest.approx(0.501, rel=1e-9)
    # two such jobs on the one GPU: however they share it, their mean busy times sum to at
    # least 200 s, so the LP charges more than the 0.5 EUR each a lone job would pay
    two = scenario(sc.cluster, {"p": {("T", 1): 10.0}},
                   [job(k, due=50.0, weight=0.01, epochs=10.0) for k in ("a", "b")])
    bound = hindsight_bound(two, slots=20, lp=True)
    best = 2e-3 + 0.01 * (100 - 50) + 0.01 * (200 - 50)  # one after the other: 2.002 EUR
    assert 2e-3 + 2 * 0.5 < bound.lower_bound <= best + 1e-9


def test_bound_command(tmp_path):
    import json
    import subprocess
    import sys

    from andreas.io import write_scenario
    from andreas.sim.generate import generate_paper_style, load_template
    sc = generate_paper_style(load_template("paper"), 2, 4, 20000, jobs_per_node=2)
    write_scenario(sc, tmp_path / "sc")
    run = subprocess.run([sys.executable, "-m", "andreas", "bound", str(tmp_path / "sc"),
                          "--slots", "20", "--policies", "fifo,andreas", "--out",
                          str(tmp_path / "b")], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    data = json.loads((tmp_path / "b" / "bound.json").read_text())
    assert [p["policy"] for p in data["policies"]] == ["fifo", "andreas"]
    assert all(p["total_cost"] >= data["lower_bound"] for p in data["policies"])
    assert (tmp_path / "b" / "bound_schedule.csv").read_text().startswith("slot,start,end")
