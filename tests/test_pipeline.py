"""The decision pipeline: named steps, reasons for waiting jobs, steps written elsewhere."""

import sys
from pathlib import Path

import pytest
from helpers import NO_HOLDS, cluster, job, scenario, snapshot

from andreas.errors import AndreasError
from andreas.policies import make_policy
from andreas.policies.arrivals import ArrivalLog
from andreas.policies.base import Assignment
from andreas.policies.decision import Decision, Reason
from andreas.policies.greedy import GreedyParams, refine
from andreas.policies.steps.pipeline import DEFAULT_STEPS
from andreas.policies.steps.registry import kind_of

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `examples` importable

CL = cluster([("n", "T", 2)], {"T": [100, 150]})
PROFILES = {"p": {("T", 1): 10.0, ("T", 2): 6.0}}


def test_decision_is_a_read_only_plan_with_revisit_and_reasons():
    d = Decision({"a": Assignment("n", 1)}, 50.0, {"b": Reason("held_for_company", 50.0),
                                                  "a": Reason("no_capacity")})
    assert d == {"a": Assignment("n", 1)} and d.revisit_at == 50.0
    assert set(d.reasons) == {"b"}  # a job it runs has no reason to wait
    assert d.reasons["b"].text() == "held for company until t=50s"
    later = d.replaced({}, revisit_at=80.0, reasons={"a": Reason("paused_for", job="b")})
    assert later.revisit_at == 50.0 and later.reasons["a"].text() == "paused for job b"
    with pytest.raises(TypeError):
        d["c"] = Assignment("n", 1)  # type: ignore[index]
    with pytest.raises(ValueError, match="unknown reason"):
        Reason("bored")


def test_every_waiting_job_gets_a_reason():
    # three 1-GPU-or-more jobs on a 2-GPU node: the greedy pass can place two
    sc = scenario(CL, PROFILES, [job("a", due=1e4), job("b", due=1e4), job("c", due=1e4)])
    decision = make_policy("andreas", seed=1).decide(snapshot(sc))
    assert isinstance(decision, Decision)
    waiting = [j for j in "abc" if j not in decision]
    assert waiting and all(j in decision.reasons for j in waiting)
    assert {decision.reasons[j].kind for j in waiting} <= {"no_capacity", "held_for_company",
                                                           "waiting_for_gpus", "consolidated"}


def test_steps_are_chosen_by_name_and_turned_off_by_their_options():
    assert [s.name for s in GreedyParams.of().steps().steps] == list(DEFAULT_STEPS)
    assert [s.name for s in GreedyParams.of(**NO_HOLDS).steps().steps] == ["defer",
                                                                           "power_limits"]
    assert GreedyParams.of(steps=()).steps().steps == ()
    with pytest.raises(AndreasError, match="unknown step 'holdd'"):
        GreedyParams.of(steps=("holdd",))
    with pytest.raises(AndreasError, match="cannot load 'nowhere:Step'"):
        GreedyParams.of(steps=("nowhere:Step",))


def test_a_step_written_elsewhere_runs_by_its_import_path():
    # job a runs on both GPUs with 5 % of its epochs left; the pipeline is only the example
    sc = scenario(CL, PROFILES, [job("a", epochs=20.0, due=1e4)])
    snap = snapshot(sc, running={"a": ("n", 2)}, remaining={"a": 1.0})
    params = GreedyParams.of(steps=("examples.plan_step:FinishNearlyDone",))
    kept = refine(snap, {}, params, ArrivalLog())  # a plan that pauses a
    assert kept == {"a": Assignment("n", 2)}
    far = snapshot(sc, running={"a": ("n", 2)}, remaining={"a": 10.0})  # half done: paused
    paused = refine(far, {}, params, ArrivalLog())
    assert paused == {} and paused.reasons["a"].kind == "no_capacity"


def test_no_forward_check_with_a_pass_budget(monkeypatch):
    # a trace replay bounds its decisions with a pass budget: the check would replay the
    # whole queue, so the steps it would judge are skipped there (an unchecked bet is not
    # taken), while a step it does not judge still runs
    import andreas.policies.steps.forward_check as fc

    calls = []
    monkeypatch.setattr(fc, "keeps_cost", lambda *a, **k: calls.append(1) or False)
    cl = cluster([("n0", "T", 2), ("n1", "T", 2)], {"T": [100, 150]})
    sc = scenario(cl, PROFILES, [job("a", due=1e4)])
    snap = snapshot(sc)

    class Hold:  # a checked step that always holds job a
        name = "hold_a"

        @classmethod
        def apply(self, snapshot, decision, ctx):
            return decision.replaced({}, revisit_at=100.0,
                                     reasons={"a": Reason("held_for_company", until=100.0)})

    from andreas.policies.steps import registry

    monkeypatch.setitem(registry.STEPS, "hold_a", kind_of(Hold))
    plan = {"a": Assignment("n0", 1)}
    checked = GreedyParams.of(steps=("hold_a",), checked_steps=("hold_a",))
    assert refine(snap, plan, checked, ArrivalLog()) == plan  # check said no: undone
    assert calls == [1]
    budget = GreedyParams.of(steps=("hold_a",), checked_steps=("hold_a",), pass_budget=1000)
    assert refine(snap, plan, budget, ArrivalLog()) == plan  # not checked: not taken
    assert calls == [1]
    unjudged = GreedyParams.of(steps=("hold_a",), checked_steps=(), pass_budget=1000)
    assert refine(snap, plan, unjudged, ArrivalLog()) == {}  # not a checked step: runs
    assert calls == [1]


def test_no_hold_when_the_plan_already_leaves_a_job_late(monkeypatch):
    # a decision that pays tardiness has no slack to spend: the checked steps (the holds) are
    # skipped, unless hold_when_late; the zoo's overloaded instances lost with them
    # (bench/zoo-seeds.md)
    import andreas.policies.steps.forward_check as fc
    from andreas.policies.steps import registry

    monkeypatch.setattr(fc, "keeps_cost", lambda *a, **k: True)  # the check would say yes
    applied = []

    class Hold:
        name = "hold_a"

        @classmethod
        def apply(self, snapshot, decision, ctx):
            applied.append(1)
            return decision.replaced({}, revisit_at=100.0,
                                     reasons={"a": Reason("held_for_company", until=100.0)})

    monkeypatch.setitem(registry.STEPS, "hold_a", kind_of(Hold))
    snap = snapshot(scenario(CL, PROFILES, [job("a", due=1e4)]))
    plan = {"a": Assignment("n", 1)}
    params = GreedyParams.of(steps=("hold_a",), checked_steps=("hold_a",))
    assert not params.pipeline.hold_when_late  # the default
    assert refine(snap, plan, params, ArrivalLog(), late=True) == plan
    assert applied == []
    assert refine(snap, plan, params, ArrivalLog(), late=False) == {}  # held
    bold = GreedyParams.of(steps=("hold_a",), checked_steps=("hold_a",), hold_when_late=True)
    assert refine(snap, plan, bold, ArrivalLog(), late=True) == {}
    assert applied == [1, 1]


def test_the_policy_tells_the_pipeline_when_its_plan_leaves_a_job_late(monkeypatch):
    from andreas.policies import greedy

    seen = []
    real = greedy.run_pipeline
    monkeypatch.setattr(greedy, "run_pipeline",
                        lambda *a, **k: seen.append(a[-1]) or real(*a, **k))
    # 10 epochs take at least 60 s (both GPUs): due at 30 s it is late whatever runs it
    make_policy("andreas", seed=1).decide(snapshot(scenario(CL, PROFILES, [job("a", due=30.0)])))
    make_policy("andreas", seed=1).decide(snapshot(scenario(CL, PROFILES, [job("a", due=1e4)])))
    assert seen == [True, False]


def test_holds_off_names_only_the_holding_steps_that_run():
    """A forecast assumes no arrival, so it turns the holding steps off; an option for a step
    not in `steps` would be refused, so only those named are turned off."""
    from andreas.policies.steps.pipeline import holds_off

    assert holds_off(None) == NO_HOLDS  # the default steps hold all three
    assert holds_off("wait,defer") == {"wait.share": None}
    assert holds_off(("defer", "my_module:Step")) == {}
    make_policy("andreas", steps="wait,defer", **holds_off("wait,defer"))  # accepted
