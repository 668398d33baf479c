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
@given(small_scenarios(), st.sampled_from([6, 15]))
def test_hindsight_bound_is_below_every_policy(sc, slots):
    from andreas.optim.bound import hindsight_bound
    from andreas.policies import policy_names
    bound = hindsight_bound(sc, slots=slots, time_limit=20)
    assert bound.lower_bound >= 0
    for name in policy_names():
        if name == "milp":
            continue  # same core as andreas; the MILP is slow to run on every example
        cost = simulate(sc, policy_with(name, 1)).summary["total_cost"]
        assert bound.lower_bound <= cost * (1 + 1e-7) + 1e-9, name


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
