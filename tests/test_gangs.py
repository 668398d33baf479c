"""Gangs: jobs over several nodes, planned whole for every policy (policies/gangs.py), run and
accounted node by node (sim/engine.py, cost.py), read and written in profiles.csv (io.py)."""

from collections import defaultdict
from dataclasses import replace

import pytest
from helpers import cluster, job, policy_with
from hypothesis import given, settings
from hypothesis import strategies as st
from test_invariants import check_invariants

from andreas.cost import account_segments
from andreas.errors import PlanError, ScenarioError
from andreas.io import load_scenario, write_scenario
from andreas.model import Profiles, Scenario
from andreas.policies import make_policy, policy_names
from andreas.policies.base import Assignment, JobView, Snapshot, check_plan
from andreas.policies.gangs import decide as gang_decide
from andreas.sim.engine import simulate

# 1 EUR per kWh: a joule costs 1 / 3.6e6 EUR
PRICE = 1.0


def two_by_two(extra_type: bool = False):
    """Nodes n1, n2 of type A with 2 GPUs each (100 W with one busy, 200 W with two); with
    `extra_type`, a node b1 of type B too."""
    nodes = [("n1", "A", 2), ("n2", "A", 2)] + ([("b1", "B", 2)] if extra_type else [])
    power = {"A": [100, 200], **({"B": [100, 200]} if extra_type else {})}
    return cluster(nodes, power, price=PRICE)


def gang_profiles(single: dict | None = None) -> Profiles:
    """Profile g: a gang of 2 nodes x 2 A GPUs at 10 s per epoch; profile s: one A GPU at
    1 s per epoch (or `single`)."""
    return Profiles({"s": single or {("A", 1): 1.0}}, gangs={"g": {("A", 2, 2): 10.0}})


def test_a_gang_draws_on_every_node_and_logs_a_segment_per_node():
    # 36 epochs x 10 s = 360 s on both nodes, each at 200 W: 2 x 200 x 360 J = 0.04 kWh
    sc = Scenario(two_by_two(), gang_profiles(), (job("g1", epochs=36, profile="g"),))
    for name in policy_names():
        result = simulate(sc, policy_with(name, 1))
        assert result.summary["energy_cost"] == pytest.approx(2 * 200 * 360 / 3.6e6 * PRICE), name
        assert result.jobs[0].completion_time == pytest.approx(360.0), name
        runs = [s for s in result.segments if s.phase == "run"]
        assert sorted(s.node for s in runs) == ["n1", "n2"], name
        assert sorted(s.epochs for s in runs) == [0.0, 36.0], name  # epochs counted once
        again = account_segments(sc.cluster, sc.jobs, result.segments)
        assert again.energy_cost == pytest.approx(result.summary["energy_cost"], rel=1e-12)
        assert again.job_energy_cost["g1"] == pytest.approx(result.jobs[0].energy_cost,
                                                            rel=1e-12)


def test_a_gangs_restart_and_own_draw_count_on_every_node():
    # start-up 20 s (the profile's), own draw 60 W per GPU against the table's 100 W per busy
    # GPU: each node draws 200 - 2 x (100 - 60) = 120 W while it trains, 200 W while it
    # starts (the table's: no restart draw given). First starts pay the start-up here.
    profiles = Profiles({}, power={"g": {("A", 2, 2): 60.0}},
                        startup={"g": {("A", 2, 2): 20.0}}, gangs={"g": {("A", 2, 2): 10.0}})
    sc = Scenario(two_by_two(), profiles, (job("g1", epochs=10, profile="g"),))
    result = simulate(sc, make_policy("fifo"), first_start_overhead=True)
    joules = 2 * (200 * 20 + 120 * 100)
    assert result.summary["energy_kwh"] == pytest.approx(joules / 3.6e6)
    assert result.jobs[0].completion_time == pytest.approx(120.0)
    assert account_segments(sc.cluster, sc.jobs, result.segments).energy_joules == \
        pytest.approx(joules)


def test_a_gang_waits_for_its_nodes_and_says_why_and_nodes_are_kept_for_it():
    # s1 holds one GPU of n1 until t=100. g1 (2 nodes x 2 GPUs) arrives at t=10 and must wait;
    # s2 (one GPU, 200 s) arrives at t=20 and would fit on n2, but n2 is kept for g1, so g1
    # starts at t=100, when s1 ends, not at t=220.
    profiles = gang_profiles()
    jobs = (job("s1", epochs=100, profile="s"), job("g1", submit=10, due=500, epochs=10,
                                                    profile="g"),
            job("s2", submit=20, due=5000, epochs=200, profile="s"))
    sc = Scenario(two_by_two(), profiles, jobs)
    for name in policy_names():
        result = simulate(sc, policy_with(name, 1))
        starts = {r.job_id: r.first_start for r in result.jobs}
        assert starts["g1"] == pytest.approx(100.0), name
        assert starts["s2"] >= 100.0 - 1e-9, name
    # the reason, at t=10 with s1 running on n1
    views = (JobView(jobs[0], 90.0, Assignment("n1", 1), True), JobView(jobs[1], 10.0))
    decision = gang_decide(lambda snap: {}, Snapshot(10.0, sc.cluster, profiles, views))
    assert "g1" not in decision
    assert decision.reasons["g1"].sentence() == "waiting for 2 free nodes of A with 2 GPUs each"


def test_a_gang_starts_in_its_cheapest_configuration_and_backfills_around_a_reservation():
    # profile g may run on one node (A, 2 GPUs: 30 s per epoch) or as a gang (2 x 2: 10 s per
    # epoch). Energy per epoch: one node 200 W x 30 s = 6000 J, two nodes 2 x 200 x 10 =
    # 4000 J: the gang is cheaper and both nodes are free.
    profiles = Profiles({"g": {("A", 2): 30.0}}, gangs={"g": {("A", 2, 2): 10.0}})
    sc = Scenario(two_by_two(), profiles, (job("g1", epochs=5, profile="g"),))
    views = (JobView(sc.jobs[0], 5.0),)
    plan = gang_decide(lambda snap: {}, Snapshot(0.0, sc.cluster, profiles, views))
    assert plan["g1"].nodes == ("n1", "n2") and plan["g1"].gpus == 2
    # with n2 busy, the one-node configuration starts at once rather than wait
    other = job("x", profile="s")
    profiles2 = Profiles({"g": {("A", 2): 30.0}, "s": {("A", 2): 1.0}},
                         gangs={"g": {("A", 2, 2): 10.0}})
    views2 = (JobView(other, 5.0, Assignment("n2", 2), True), JobView(sc.jobs[0], 5.0))
    plan2 = gang_decide(lambda snap: {}, Snapshot(0.0, sc.cluster, profiles2, views2))
    assert plan2["g1"] == Assignment("n1", 2)


def test_the_policy_sees_neither_the_gangs_nor_their_gpus():
    profiles = gang_profiles()
    sc = Scenario(two_by_two(extra_type=True), profiles, ())
    seen = []

    def inner(snap):
        seen.append(snap)
        return {}
    g = job("g1", profile="g")
    s = job("s1", profile="s")
    views = (JobView(g, 3.0, Assignment("n1", 2, None, ("n2",)), True), JobView(s, 3.0))
    plan = gang_decide(inner, Snapshot(0.0, sc.cluster, profiles, views))
    assert plan["g1"] == views[0].assignment  # a running gang is kept where it runs
    assert [n.name for n in seen[0].cluster.nodes] == ["b1"]
    assert [v.job_id for v in seen[0].jobs] == ["s1"]


def plan_error(sc, views, plan):
    with pytest.raises(PlanError) as err:
        check_plan(Snapshot(0.0, sc.cluster, sc.profiles, views), plan, "test")
    return str(err.value)


def test_check_plan_refuses_a_gang_that_is_not_whole():
    sc = Scenario(two_by_two(extra_type=True), Profiles(
        {"s": {("A", 1): 1.0}}, gangs={"g": {("A", 2, 2): 10.0, ("B", 2, 2): 10.0}}), ())
    g = job("g1", profile="g")
    views = (JobView(g, 3.0),)
    assert "does not allow" in plan_error(sc, views, {"g1": Assignment("n1", 2)})  # partial
    assert "two GPU types" in plan_error(sc, views,
                                         {"g1": Assignment("n1", 2, None, ("b1",))})
    assert "twice on one node" in plan_error(sc, views,
                                             {"g1": Assignment("n1", 2, None, ("n1",))})
    assert "unknown node" in plan_error(sc, views, {"g1": Assignment("n1", 2, None, ("zz",))})
    assert "does not allow" in plan_error(sc, views,
                                          {"g1": Assignment("n1", 1, None, ("n2",))})
    s = job("s1", profile="s")
    over = (JobView(s, 3.0, Assignment("n2", 1), True), JobView(g, 3.0))
    assert "over-subscribed node 'n2'" in plan_error(
        sc, over, {"s1": Assignment("n2", 1), "g1": Assignment("n1", 2, None, ("n2",))})
    # a one-node job of a plain profile cannot be spread either
    assert "does not allow" in plan_error(sc, (JobView(s, 3.0),),
                                          {"s1": Assignment("n1", 1, None, ("n2",))})
    check_plan(Snapshot(0.0, sc.cluster, sc.profiles, views),
               {"g1": Assignment("n1", 2, None, ("n2",))}, "test")  # whole: accepted


def test_profiles_round_trip_with_gangs_and_bad_gang_rows_name_line_and_field(tmp_path):
    profiles = Profiles({"s": {("A", 1): 1.0}, "g": {("A", 2): 30.0}},
                        power={"g": {("A", 2, 2): 150.0}}, startup={"g": {("A", 2, 2): 12.0}},
                        gangs={"g": {("A", 2, 2): 10.0}})
    sc = Scenario(two_by_two(), profiles, (job("g1", epochs=3, profile="g"),))
    write_scenario(sc, tmp_path / "sc")
    back = load_scenario(tmp_path / "sc")
    assert back.profiles.gangs == {"g": {("A", 2, 2): 10.0}}
    assert back.profiles.table["g"] == {("A", 2): 30.0}
    assert back.profiles.power == {"g": {("A", 2, 2): 150.0}}
    assert back.profiles.startup == {"g": {("A", 2, 2): 12.0}}
    path = tmp_path / "sc" / "profiles.csv"
    header = "profile,gpu_type,gpus,seconds_per_epoch,nodes\n"
    for row, field, words in (("g,A,2,10,0", "nodes", "expected a node count >= 1, got 0"),
                              ("g,A,4,10,2", "gpus", "the largest A node has 2"),
                              ("g,A,2,10,3", "nodes", "only 2 A nodes with 2 GPUs or more"),
                              ("g,A,2,10,two", "nodes", "expected an integer")):
        path.write_text(header + "s,A,1,1,\n" + row + "\n")
        with pytest.raises(ScenarioError) as err:
            load_scenario(tmp_path / "sc")
        text = str(err.value)
        assert f"profiles.csv:3: field '{field}'" in text, text
        assert words in text, text
    path.write_text("profile,gpu_type,gpus,seconds_per_epoch,nodes,power_limit_w,gpu_power_w\n"
                    "s,A,1,1,,,\ng,A,2,10,2,200,150\n")
    with pytest.raises(ScenarioError, match="profiles.csv:3: field 'power_limit_w': a gang runs "
                                            "at the default power limit"):
        load_scenario(tmp_path / "sc")


@st.composite
def gang_scenarios(draw):
    """Up to four nodes of types A and B, maybe in groups; plain profiles p0, p1 and a gang
    profile g (2 or 3 nodes, maybe also one-node rows, maybe slower across groups); a few jobs
    of each."""
    nodes = [(f"n{i}", "AB"[i % 2] if draw(st.booleans()) else "A", draw(st.integers(1, 4)))
             for i in range(draw(st.integers(2, 4)))]
    types = sorted({t for _, t, _ in nodes})
    power = {t: sorted(draw(st.lists(st.integers(50, 600), min_size=4, max_size=4)))
             for t in types}
    table = {p: {("A", 1): float(draw(st.integers(1, 40)))} for p in ("p0", "p1")}
    table["g"] = {}
    if draw(st.booleans()):
        table["g"][("A", 1)] = float(draw(st.integers(20, 80)))
    gangs = {}
    for t in types:
        sizes = sorted((g for _, tt, g in nodes if tt == t), reverse=True)
        for count in (2, 3):
            if len(sizes) >= count and draw(st.booleans()):
                gangs[(t, draw(st.integers(1, sizes[count - 1])), count)] = \
                    float(draw(st.integers(1, 30)))
    if not gangs and len([1 for _, t, _ in nodes if t == "A"]) >= 2:
        gangs[("A", 1, 2)] = 5.0
    if not gangs and not table["g"]:  # a profile with no configuration: not a scenario
        table["g"][("A", 1)] = 30.0
    jobs = []
    for i in range(draw(st.integers(1, 7))):
        submit = float(draw(st.integers(0, 300)))
        jobs.append(job(f"j{i}", submit=submit, due=submit + draw(st.integers(0, 600)),
                        weight=draw(st.sampled_from([0.0, 0.01, 0.05])),
                        epochs=draw(st.sampled_from([0.5, 2.0, 7.25])),
                        profile=draw(st.sampled_from(["p0", "p1", "g"]))))
    overhead = float(draw(st.sampled_from([0, 7])))
    if draw(st.booleans()):  # node groups (racks), and gangs slower across them
        nodes = [(*n, draw(st.sampled_from(["r1", "r2", None]))) for n in nodes]
    cl = cluster(nodes, power, overhead=overhead)
    slowdown = {c: draw(st.sampled_from([1.0, 1.5, 3.0])) for c in gangs}
    profiles = Profiles(table, gangs={"g": gangs} if gangs else {},
                        spread_slowdown={"g": slowdown} if gangs else {})
    return Scenario(cl, profiles, tuple(sorted(jobs, key=lambda j: j.submit_time)))


def gang_runs_whole(sc, result):
    """Every stretch of a gang holds all its nodes at once: its segments come in groups of
    one start and end, of one GPU type and GPU count, on distinct nodes, as many as a
    configuration of its profile gives."""
    counts = {p: {n for (_, _, n) in cs} for p, cs in sc.profiles.gangs.items()}
    profile_of = {j.job_id: j.profile for j in sc.jobs}
    groups = defaultdict(list)
    for s in result.segments:
        groups[(s.job_id, s.start, s.end, s.phase)].append(s)
    for (job_id, *_), segs in groups.items():
        assert len({s.node for s in segs}) == len(segs)
        assert len({(s.gpu_type, s.gpus) for s in segs}) == 1
        if len(segs) > 1:
            assert len(segs) in counts[profile_of[job_id]]


@settings(max_examples=40, deadline=None)
@given(gang_scenarios(), st.sampled_from(policy_names()), st.integers(1, 3), st.booleans())
def test_every_policy_runs_gangs_whole_and_accounts_them(sc, policy, seed, first_start):
    result = simulate(sc, policy_with(policy, seed), first_start_overhead=first_start)
    check_invariants(sc, result)
    gang_runs_whole(sc, result)


def test_a_plain_scenario_is_planned_as_before():
    # no gang profile: the gang layer is not entered (the zoo's decisions are unchanged; the
    # zoo comparison checks that at scale)
    profiles = Profiles({"s": {("A", 1): 1.0, ("A", 2): 0.6}})
    sc = Scenario(two_by_two(), profiles, tuple(job(f"j{i}", submit=i * 5.0, epochs=50,
                                                    profile="s") for i in range(5)))
    calls = []
    import andreas.policies.pinning as pinning
    original = pinning.decide_with_gangs
    pinning.decide_with_gangs = lambda *a: calls.append(a) or original(*a)
    try:
        simulate(sc, make_policy("greedy"))
        assert calls == []
        simulate(Scenario(sc.cluster, gang_profiles(), (job("g", profile="g"),)),
                 make_policy("greedy"))
        assert len(calls) == 1  # the patch does see a gang scenario
    finally:
        pinning.decide_with_gangs = original


def test_the_service_reads_gang_profiles_for_every_executor(tmp_path):
    """Every executor starts gangs: a gang row of the service's profiles.csv is read as one
    (it was refused while the executors started one process per job)."""
    from conftest import write_service_files

    from andreas.service.config import read_service_config

    nodes = ("nodes:\n  - {name: n1, gpu_type: fast, gpus: 2}\n"
             "  - {name: n3, gpu_type: fast, gpus: 2}\n")
    for executor in ("local", "ray", "slurm"):
        service = write_service_files(tmp_path / executor, nodes=nodes, executor=executor)
        (service.parent / "profiles.csv").write_text(
            "profile,gpu_type,gpus,seconds_per_epoch,nodes\nmlp,fast,1,0.3,\nbig,fast,2,0.1,2\n")
        assert dict(read_service_config(service).profiles.gangs["big"]) == {
            ("fast", 2, 2): 0.1}


def test_the_bound_by_hand_for_one_gang():
    """One gang of 2 nodes x 2 A GPUs, 36 epochs of 10 s, due late: nothing costs less than
    both nodes at 200 W for 360 s, and nothing more is needed (no restart overhead here), so
    both bounds are that energy exactly."""
    from andreas.optim.bound import hindsight_bound

    sc = Scenario(two_by_two(), gang_profiles(), (job("g1", epochs=36, profile="g",
                                                      due=1e6),))
    energy = 2 * 200 * 360 / 3.6e6 * PRICE
    for lp in (False, True):
        bound = hindsight_bound(sc, slots=12, lp=lp)
        assert bound.lower_bound == pytest.approx(energy, rel=1e-6), lp
        if not lp:  # (the LP may leave work to its overflow, past the slots)
            node_time = sum(r["share"] for r in bound.schedule if r.get("gang_nodes") == 2)
            assert node_time * bound.slot_s == pytest.approx(2 * 360.0, rel=1e-6)


@settings(max_examples=25, deadline=None)
@given(gang_scenarios(), st.booleans())
def test_the_bound_with_gangs_is_below_every_policy(sc, lp):
    from andreas.optim.bound import hindsight_bound

    bound = hindsight_bound(sc, slots=8, time_limit=20, lp=lp)
    assert bound.lower_bound >= 0
    for name in policy_names():
        if name == "milp":
            continue  # slow to run on every example; same core as andreas
        cost = simulate(sc, policy_with(name, 1)).summary["total_cost"]
        assert bound.lower_bound <= cost * (1 + 1e-7) + 1e-9, name


def test_philly_jobs_over_a_node_become_gangs_of_their_real_size(tmp_path):
    """16 GPUs -> 2 nodes x 8, 12 -> 3 x 4 (the catalogue measures 1, 2, 4, 8 per node); each
    epoch n x e2^log2(n) times as fast as on one node (e2 from Sia, gang_scaling.csv); the
    traced duration is the run at that size on the reference type. 128 GPUs: no room."""
    import math

    from andreas.io import read_cluster
    from andreas.sim.traces import REFERENCE_GPU, import_trace, two_node_efficiency

    (tmp_path / "cluster.yaml").write_text(
        "energy_price: 0.2\ngpu_types: {P100: {}, V100: {}}\nnodes:\n"
        + "".join(f"  - {{name: p{i}, gpu_type: P100, gpus: 8}}\n" for i in range(3))
        + "  - {name: v0, gpu_type: V100, gpus: 8}\n")
    cluster = read_cluster(tmp_path / "cluster.yaml")
    trace = tmp_path / "philly.csv"
    trace.write_text("submit_time_s,duration_s,num_gpus,vc\n0,3600,16,a\n10,7200,12,a\n"
                     "20,100,128,a\n30,600,4,a\n")
    sc, report = import_trace("philly", trace, cluster, seed=2)
    e2 = two_node_efficiency()
    assert 0.7 < e2 < 1.0
    assert report.gangs == 2 and report.skipped_no_room == 1 and len(sc.jobs) == 3
    from andreas.catalogue import catalogue_profiles_path
    from andreas.io import read_profiles
    from andreas.sim.traces import _with_reference
    catalogue = read_profiles(catalogue_profiles_path(), _with_reference(cluster))
    by_id = {j.job_id: j for j in sc.jobs}
    for job_id, nodes, per_node, duration in (("philly-1", 2, 8, 3600), ("philly-2", 3, 4, 7200)):
        j = by_id[job_id]
        model = j.profile.rsplit("x", 1)[0]
        assert j.profile == f"{model}x{nodes}"
        gangs = sc.profiles.gangs[j.profile]
        one_node = catalogue.table[model][(REFERENCE_GPU, per_node)]
        speedup = nodes * e2 ** math.log2(nodes)
        assert gangs[(REFERENCE_GPU, per_node, nodes)] == pytest.approx(one_node / speedup)
        assert j.epochs * gangs[(REFERENCE_GPU, per_node, nodes)] == pytest.approx(duration)
        assert all(n == nodes for (_, _, n) in gangs)  # only its real size; V100: one node
        assert ("V100", per_node, nodes) not in gangs
    # the older approximation, on request: an 8-GPU job doing twice the work
    old, old_report = import_trace("philly", trace, cluster, seed=2, gangs=False)
    assert old_report.gangs == 0 and not old.profiles.gangs and len(old.jobs) == 4
    result = simulate(sc, make_policy("edf"))
    check_invariants(sc, result)
    gang_runs_whole(sc, result)


def test_a_template_with_gang_rows_generates_gang_jobs_with_their_due_dates(tmp_path):
    """A template may give gang rows (its cluster has no nodes yet: their fit is checked on
    the generated cluster); a job class whose only configuration is a gang gets its due date
    from the gang's run time, and configurations the cluster cannot hold are left out."""
    from andreas.sim.generate import WorkloadShape, generate, load_template

    d = tmp_path / "tpl"
    d.mkdir()
    (d / "template.yaml").write_text("energy_price: 0.2\ngpu_types:\n"
                                     "  A: {node_power_w: [100, 200]}\n")
    (d / "profiles.csv").write_text("profile,gpu_type,gpus,seconds_per_epoch,nodes\n"
                                    "s,A,1,2,\ng,A,2,5,2\ng,A,2,3,3\n")
    (d / "job_classes.csv").write_text("job_class,profile,epochs\nS,s,10\nG,g,10\n")
    template = load_template(d)
    assert template.profiles.gangs == {"g": {("A", 2, 2): 5.0, ("A", 2, 3): 3.0}}
    sc = generate(template, 2, seed=4, shape=WorkloadShape(lam=100.0, jobs_per_node=5,
                                                           due_factor=(2.0, 2.0)))
    assert sc.profiles.gangs == {"g": {("A", 2, 2): 5.0}}  # 3 nodes: not on 2
    gang_jobs = [j for j in sc.jobs if j.profile == "g"]
    assert gang_jobs
    for j in gang_jobs:
        assert j.due_date - j.submit_time == pytest.approx(2.0 * 5.0 * 10, abs=1e-3)
    result = simulate(sc, make_policy("andreas", seed=1))
    check_invariants(sc, result)
    gang_runs_whole(sc, result)


def test_the_forward_checks_profiles_keep_start_ups_and_gangs_when_a_sample_adds_one():
    """A sampled future may copy a finished job whose profile the snapshot lacks: the
    profiles built for it keep the snapshot's start-ups and gangs (they were dropped)."""
    from andreas.policies.arrivals import ArrivalLog
    from andreas.policies.steps.forward_check import with_profiles_of

    old = job("old", profile="gone")
    log = ArrivalLog()
    log.observe(Snapshot(0.0, two_by_two(), Profiles({"gone": {("A", 1): 2.0}}),
                         (JobView(old, 3.0),)))
    profiles = Profiles({"s": {("A", 1): 1.0}}, startup={"s": {("A", 1): 9.0}},
                        gangs={"g": {("A", 2, 2): 10.0}})
    snap = Snapshot(5.0, two_by_two(), profiles, (JobView(job("x", profile="s"), 3.0),))
    wider = with_profiles_of(snap, log, [(replace(old, job_id="~s0"),)])
    assert wider.profiles.table["gone"] == {("A", 1): 2.0}
    assert wider.profiles.startup == {"s": {("A", 1): 9.0}}
    assert wider.profiles.gangs == {"g": {("A", 2, 2): 10.0}}


def test_the_job_helper_gives_rank_and_world_size_and_only_rank_0_writes(tmp_path, monkeypatch):
    """A gang's ranks read RANK, WORLD_SIZE and LOCAL_RANK through the helper (0, 1, 0 outside
    a gang); only rank 0 writes checkpoints and the progress file; every rank resumes from
    rank 0's checkpoint."""
    from andreas import job as helper

    monkeypatch.setenv("ANDREAS_CHECKPOINT_DIR", str(tmp_path))
    monkeypatch.delenv("ANDREAS_PROGRESS_URL", raising=False)
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert (helper.rank(), helper.world_size(), helper.local_rank(), helper.is_main()) == \
        (0, 1, 0, True)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert (helper.rank(), helper.world_size(), helper.is_main()) == (1, 2, False)
    helper.save_bytes("state.bin", b"rank 1")
    helper.progress(3)
    assert not (tmp_path / "state.bin").exists()
    assert helper.resume_epoch() == 0
    monkeypatch.setenv("RANK", "0")
    helper.save_bytes("state.bin", b"rank 0")
    helper.progress(3)
    monkeypatch.setenv("RANK", "1")
    assert helper.load_bytes("state.bin") == b"rank 0" and helper.resume_epoch() == 3
    monkeypatch.setenv("RANK", "one")
    with pytest.raises(RuntimeError, match="RANK='one'"):
        helper.rank()


def test_andreas_account_recomputes_a_gang_run_from_segments_csv(tmp_path):
    """Written and read back, the segments of a run with gangs (one per node, a restart
    included) give every cost again, through the command line's `andreas account`."""
    import json
    import subprocess
    import sys

    from andreas.sim.output import recompute, write_result

    profiles = Profiles({"s": {("A", 1): 1.0}}, startup={"g": {("A", 2, 2): 30.0}},
                        gangs={"g": {("A", 2, 2): 10.0}})
    jobs = (job("s1", epochs=100, profile="s"), job("g1", submit=10, due=200, epochs=20,
                                                    profile="g"),
            job("s2", submit=20, due=5000, epochs=200, profile="s"))
    sc = Scenario(two_by_two(), profiles, jobs)
    result = simulate(sc, make_policy("andreas", seed=1), first_start_overhead=True)
    write_result(result, tmp_path / "out")
    write_scenario(sc, tmp_path / "sc")
    again = recompute(load_scenario(tmp_path / "sc"), tmp_path / "out")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert again.total_cost == pytest.approx(summary["total_cost"], rel=1e-9)
    assert any(s.phase == "restart" and s.job_id == "g1" for s in result.segments)
    run = subprocess.run([sys.executable, "-m", "andreas", "account", str(tmp_path / "sc"),
                          str(tmp_path / "out")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr + run.stdout


def test_the_policy_sees_the_same_reduced_cluster_while_the_gangs_hold_the_same_gpus():
    """The per-cluster tables of a policy are built per Cluster object: the cluster left
    after the gangs is one object while what they hold does not change, a new one when it
    does."""
    profiles = gang_profiles()
    sc = Scenario(two_by_two(extra_type=True), profiles, ())
    seen = []

    def inner(snap):
        seen.append(snap.cluster)
        return {}
    g = JobView(job("g1", profile="g"), 3.0, Assignment("n1", 2, None, ("n2",)), True)
    s1 = JobView(job("s1", profile="s"), 3.0)
    gang_decide(inner, Snapshot(0.0, sc.cluster, profiles, (g, s1)))
    gang_decide(inner, Snapshot(5.0, sc.cluster, profiles, (g, s1)))
    gang_decide(inner, Snapshot(9.0, sc.cluster, profiles, (s1,)))  # the gang has ended
    assert seen[0] is seen[1] and [n.name for n in seen[0].nodes] == ["b1"]
    assert seen[2] is sc.cluster  # no gang job: the policy sees the snapshot as it is


def test_submit_options_make_one_inline_row_or_say_which_option_is_wrong():
    from andreas.client_cli import _inline_row
    from andreas.errors import AndreasError

    assert _inline_row("mlp", None, None, 1, None) is None
    assert _inline_row(None, "V100", 8, 2, 30.0) == [
        {"gpu_type": "V100", "gpus": 8, "seconds_per_epoch": 30.0, "nodes": 2}]
    assert _inline_row(None, "V100", 2, 1, 5.0) == [
        {"gpu_type": "V100", "gpus": 2, "seconds_per_epoch": 5.0}]
    with pytest.raises(AndreasError, match="missing: --gpus, --seconds-per-epoch"):
        _inline_row(None, "V100", None, 2, None)
    with pytest.raises(AndreasError, match="give --profile or --gpus, --nodes, not both"):
        _inline_row("mlp", None, 4, 2, None)


def test_the_service_charges_a_gangs_run_on_every_node_as_the_simulator_does():
    """A service run of a 2-node gang (the store's more_nodes) costs what the simulator's
    segments of the same stretch cost: 200 W on each node for 360 s, epochs counted once."""
    from types import SimpleNamespace

    from andreas.service.accounting import Accounting

    run = SimpleNamespace(job_id="g1", node="n1", gpu_type="A", gpu_indices=[0, 1],
                          more_nodes=[{"node": "n2", "gpu_indices": [0, 1]}], started_at=0.0,
                          ended_at=360.0, epochs_at_start=0.0, epochs_at_end=36.0)
    accounts = Accounting(None, two_by_two, clock=lambda: 360.0)  # type: ignore[arg-type]
    _, segments = accounts.segments([run], 360.0, jobs=[])
    assert sorted((s.node, s.gpus, s.epochs) for s in segments) == [
        ("n1", 2, 36.0), ("n2", 2, 0.0)]
    cost = account_segments(two_by_two(), (job("g1", epochs=36, profile="g"),), segments)
    assert cost.energy_cost == pytest.approx(2 * 200 * 360 / 3.6e6 * PRICE, rel=1e-12)


# ---------------------------------------------------------------------- locality: node groups
def racks(groups: tuple[str, ...] = ("r1", "r1", "r2", "r2")):
    """Four A nodes of 2 GPUs (100 W / 200 W), n1..n4, in the given groups."""
    return cluster([(f"n{i + 1}", "A", 2, g) for i, g in enumerate(groups)], {"A": [100, 200]},
                   price=PRICE)


def test_a_gang_across_node_groups_runs_slower_and_one_inside_a_group_does_not():
    """g: 2 nodes x 1 GPU at 10 s per epoch, 3x slower across groups. On two nodes of two
    racks it must span them: 10 epochs take 300 s. On two nodes of one rack: 100 s."""
    profiles = Profiles({}, gangs={"g": {("A", 1, 2): 10.0}},
                        spread_slowdown={"g": {("A", 1, 2): 3.0}})
    apart = replace(racks(), nodes=racks().nodes[1:3])  # n2 (r1) and n3 (r2)
    together = replace(racks(), nodes=racks().nodes[:2])
    for cl, seconds in ((apart, 300.0), (together, 100.0)):
        sc = Scenario(cl, profiles, (job("g1", epochs=10, profile="g"),))
        for name in policy_names():
            result = simulate(sc, policy_with(name, 1))
            assert result.jobs[0].completion_time == pytest.approx(seconds), name
            check_invariants(sc, result)


def test_the_gang_planner_keeps_a_gang_inside_one_group_over_a_tighter_fit():
    """One GPU is busy on n1 (rack r1) and on n3 (rack r2): tightest fit alone would put the
    gang on n1 and n3, across racks; it goes to n1 and n2, inside r1. Without groups, n1 and
    n3."""
    profiles = Profiles({"s": {("A", 1): 1.0}}, gangs={"g": {("A", 1, 2): 10.0}},
                        spread_slowdown={"g": {("A", 1, 2): 2.0}})
    for groups, expected in ((("r1", "r1", "r2", "r2"), {"n1", "n2"}),
                             ((None, None, None, None), {"n1", "n3"})):
        sc = Scenario(racks(groups), profiles, (job("b1", profile="s", epochs=1000),
                                                job("b3", profile="s", epochs=1000),
                                                job("g1", profile="g")))
        views = (JobView(sc.jobs[0], 1000, Assignment("n1", 1), True),
                 JobView(sc.jobs[1], 1000, Assignment("n3", 1), True),
                 JobView(sc.jobs[2], 10, None, False))
        plan = gang_decide(lambda snap: {}, Snapshot(0.0, sc.cluster, profiles, views))
        assert set(plan["g1"].nodes) == expected, groups


def test_groups_and_slowdowns_round_trip_and_bad_ones_name_line_and_field(tmp_path):
    profiles = Profiles({"g": {("A", 1): 30.0}}, gangs={"g": {("A", 1, 2): 10.0}},
                        spread_slowdown={"g": {("A", 1, 2): 1.5}})
    sc = Scenario(racks(("r1", "r1", "r2", "r2")), profiles, (job("g1", profile="g"),))
    write_scenario(sc, tmp_path / "ok")
    again = load_scenario(tmp_path / "ok")
    assert [n.group for n in again.cluster.nodes] == ["r1", "r1", "r2", "r2"]
    assert dict(again.profiles.spread_slowdown["g"]) == {("A", 1, 2): 1.5}
    bad_rows = {"g,A,1,30,,1.5\n": "on a one-node row", "g,A,1,10,2,0.5\n": "got '0.5'"}
    for row, says in bad_rows.items():
        write_scenario(sc, tmp_path / "bad")
        (tmp_path / "bad" / "profiles.csv").write_text(
            "profile,gpu_type,gpus,seconds_per_epoch,nodes,spread_slowdown\n" + row)
        with pytest.raises(ScenarioError) as info:
            load_scenario(tmp_path / "bad")
        text = str(info.value)
        assert "profiles.csv:2:" in text and "field 'spread_slowdown'" in text, text
        assert says in text, text
    cluster_yaml = (tmp_path / "ok" / "cluster.yaml").read_text()
    write_scenario(sc, tmp_path / "bad")
    (tmp_path / "bad" / "cluster.yaml").write_text(
        cluster_yaml.replace("group: r2", "group: ''", 1))
    with pytest.raises(ScenarioError, match=r"nodes\[2\]\.group.*expected the name"):
        load_scenario(tmp_path / "bad")


def test_quotas_count_a_gangs_gpus_on_every_node_and_drains_close_any_of_its_nodes():
    """A 2 x 2 gang holds 4 GPUs: over a quota of 3 it waits, within 4 it starts. A gang
    with any node drained does not start, and says which node."""
    from andreas.service.quotas import Limits, Quotas, within_limits

    sc = Scenario(two_by_two(), gang_profiles(), (job("g1", profile="g"),))
    snap = Snapshot(0.0, sc.cluster, sc.profiles, (JobView(sc.jobs[0], 10, None, False),))
    plan = {"g1": Assignment("n1", 2, None, ("n2",))}
    owners = {"g1": "alice"}
    for limit, starts in ((3, False), (4, True)):
        kept, why = within_limits(snap, plan, owners, Quotas(Limits(max_gpus=limit), {}), set())
        assert ("g1" in kept) == starts, limit
        assert starts or why["g1"].kind == "over_quota"
    kept, why = within_limits(snap, plan, owners, Quotas(Limits(), {}), {"n2"})
    assert not kept and why["g1"].kind == "node_drained" and "n2" in why["g1"].sentence()


def test_a_job_paused_for_a_gang_names_it_even_off_the_gangs_first_node():
    from andreas.service.planner import displaced_by

    sc = Scenario(two_by_two(), gang_profiles(), (job("s1", profile="s"),
                                                  job("g1", profile="g")))
    paused = JobView(sc.jobs[0], 5, Assignment("n2", 1), True)
    snap = Snapshot(0.0, sc.cluster, sc.profiles, (paused, JobView(sc.jobs[1], 10, None, False)))
    reason = displaced_by(paused, {"g1": Assignment("n1", 2, None, ("n2",))}, snap)
    assert reason is not None and reason.job == "g1"


def test_the_service_measures_a_gangs_speed_against_its_profile_slowed_across_groups(
        tmp_path):
    """A gang's progress is measured against 10 s per epoch inside a rack and 10 x 1.5 across
    racks, so the speed it learns is its own, not the racks'."""
    from types import SimpleNamespace

    from conftest import write_service_files

    from andreas.service.config import read_service_config
    from andreas.service.runs import Runs

    nodes = ("nodes:\n  - {name: n1, gpu_type: fast, gpus: 1, group: r1}\n"
             "  - {name: n2, gpu_type: fast, gpus: 1, group: r1}\n"
             "  - {name: n3, gpu_type: fast, gpus: 1, group: r2}\n")
    path = write_service_files(tmp_path, nodes=nodes)
    (path.parent / "profiles.csv").write_text(
        "profile,gpu_type,gpus,seconds_per_epoch,nodes,spread_slowdown\n"
        "g,fast,1,10,2,1.5\ng,fast,1,30,,\n")
    runs = Runs(read_service_config(path), None, SimpleNamespace(kind="test"),  # type: ignore
                lambda reason: None)
    job = SimpleNamespace(inline_profile=None, profile_name="g", speed_factor=1.0)

    def run(*names):
        return SimpleNamespace(node=names[0], gpu_type="fast", gpu_indices=[0], more_nodes=[
            {"node": n, "gpu_indices": [0]} for n in names[1:]] or None)

    assert runs._profiled_seconds(job, run("n1", "n2")) == 10.0
    assert runs._profiled_seconds(job, run("n1", "n3")) == 15.0
    assert runs._profiled_seconds(job, run("n3")) == 30.0
