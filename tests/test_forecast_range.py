"""Forecasts that say how sure they are (issue 44 point 3): each job's forecast carries a
range, from an early bound (every job faster by its speed's spread) and a late bound (every
job that much slower, and sampled arrivals competing for the GPUs). Hand-computed bounds, the
learned spread, and the range where users see it."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from helpers import cluster, job

from andreas.model import Profiles
from andreas.policies import make_policy
from andreas.policies.base import Assignment, JobView, Snapshot
from andreas.service.learning import speed_spread
from andreas.sim.forecast import at_speeds, forecast, forecast_range


def one_gpu():
    """One 1-GPU node drawing 100 W (1e-7 EUR per joule); a running (10 epochs of 10 s) and
    b waiting (the same), both due far away."""
    cl = cluster([("n0", "A", 1)], {"A": [100]})
    a = JobView(job("a", epochs=10), 10.0, Assignment("n0", 1), True)
    b = JobView(job("b", epochs=10), 10.0)
    return Snapshot(0.0, cl, Profiles({"p": {("A", 1): 10.0}}), (a, b))


def test_the_bounds_by_hand():
    snap = one_gpu()
    plan = {"a": Assignment("n0", 1)}
    predicted = forecast(snap, plan, make_policy("edf"))
    assert predicted["a"].completion == pytest.approx(100.0)
    assert predicted["b"].completion == pytest.approx(200.0)
    # 20 % faster: a 0-80, b 80-160; 20 % slower, and c (1 epoch of 10 s, due at 70) arriving
    # at 50 goes before b: a 0-120, c 120-130, b 130-250
    arrival = job("c", submit=50, due=70, epochs=1)
    ranges = forecast_range(snap, plan, lambda: make_policy("edf"), predicted,
                            {"a": 0.2, "b": 0.2}, (arrival,))
    assert ranges["a"].completion == (pytest.approx(80.0), pytest.approx(120.0))
    assert ranges["b"].completion == (pytest.approx(160.0), pytest.approx(250.0))
    # energy only (due far away): 100 W over 80 s and 120 s
    assert ranges["b"].total_cost == (pytest.approx(80 * 100 * 1e-7),
                                      pytest.approx(120 * 100 * 1e-7))
    assert "c" not in ranges  # a sampled arrival is not a job to forecast


def test_a_range_always_holds_the_forecast_itself():
    snap = one_gpu()
    plan = {"a": Assignment("n0", 1)}
    predicted = forecast(snap, plan, make_policy("edf"))
    ranges = forecast_range(snap, plan, lambda: make_policy("edf"), predicted, {})
    for job_id, f in predicted.items():
        assert ranges[job_id].completion == (pytest.approx(f.completion),) * 2
        lo, hi = ranges[job_id].total_cost
        assert lo <= f.total_cost <= hi


def test_speeds_scale_each_job_alone():
    snap = one_gpu()
    scaled = at_speeds(snap, {"a": 0.5})
    a, b = scaled.jobs
    assert scaled.profiles.seconds_per_epoch(a.job.profile, "A", 1) == pytest.approx(5.0)
    assert scaled.profiles.seconds_per_epoch(b.job.profile, "A", 1) == pytest.approx(10.0)
    assert scaled.profiles.seconds_per_epoch("p", "A", 1) == pytest.approx(10.0)  # arrivals'
    assert a.assignment == Assignment("n0", 1) and a.started


def test_a_jobs_own_profile_never_replaces_a_profile_of_that_name():
    """Profile names are the users': one named `~a` keeps its rows when job a, scaled, gets a
    profile of its own (before: `~a` was overwritten with a's scaled rows, for the job on it
    and every arrival of it)."""
    cl = cluster([("n0", "A", 1)], {"A": [100]})
    a = JobView(job("a", epochs=10), 10.0, Assignment("n0", 1), True)
    b = JobView(job("b", epochs=10, profile="~a"), 10.0)
    snap = Snapshot(0.0, cl, Profiles({"p": {("A", 1): 10.0}, "~a": {("A", 1): 20.0}}), (a, b))
    scaled = at_speeds(snap, {"a": 0.5})
    a, b = scaled.jobs
    assert scaled.profiles.seconds_per_epoch(a.job.profile, "A", 1) == pytest.approx(5.0)
    assert scaled.profiles.seconds_per_epoch(b.job.profile, "A", 1) == pytest.approx(20.0)
    assert scaled.profiles.seconds_per_epoch("~a", "A", 1) == pytest.approx(20.0)
    assert a.job.profile != b.job.profile


def test_the_learned_spread_by_hand():
    r = SimpleNamespace
    # profiled 2 s per epoch; pairs measured at 2, 3 and 4 s per epoch: ratios 1, 1.5, 2
    reports = [r(run_id=1, time=0.0, epochs_done=0.0), r(run_id=1, time=2.0, epochs_done=1.0),
               r(run_id=1, time=5.0, epochs_done=2.0), r(run_id=2, time=9.0, epochs_done=3.0),
               r(run_id=2, time=17.0, epochs_done=5.0)]
    # run 2's first report starts a new run: no pair across runs; ratios 1, 1.5 and 2
    assert speed_spread(reports, {1: 2.0, 2: 2.0}) == pytest.approx(0.5 / 1.5)
    assert speed_spread(reports[:3], {1: 2.0}) is None  # two pairs: not yet


@pytest.mark.service
def test_the_service_shows_each_forecasts_range(tmp_path):
    """The job's forecast carries its range (default spread 10 %), holding the forecast;
    `andreas jobs` shows it; with `forecast_spread: null` there is none."""
    from conftest import train_job, wait_for, write_service_files
    from fastapi.testclient import TestClient
    from rich.console import Console

    from andreas.client import Job as ClientJob
    from andreas.client_cli import jobs_table
    from andreas.service.api import create_app
    from andreas.service.config import read_service_config

    admin = {"Authorization": "Bearer admin-secret"}
    for spread in ("", "forecast_spread: null\n"):
        config = read_service_config(write_service_files(tmp_path / f"svc{len(spread)}",
                                                         extra=spread))
        with TestClient(create_app(config, admin_token="admin-secret")) as client:
            job_id = client.post("/jobs", headers=admin,
                                 json=train_job(200, samples=20000)).json()["id"]
            wait_for(lambda job_id=job_id: (client.get(f"/jobs/{job_id}", headers=admin)
                                            .json().get("forecast") or {}).get("completion"),
                     timeout=60, what="a forecast")
            job = client.get(f"/jobs/{job_id}", headers=admin).json()
            client.post(f"/jobs/{job_id}/cancel", headers=admin)
        f = job["forecast"]
        if spread:
            assert "completion_range" not in f
            continue
        lo, hi = f["completion_range"]
        assert lo <= f["completion"] <= hi and lo < hi
        clo, chi = f["total_cost_range"]
        assert clo <= f["total_cost"] <= chi
        out = io.StringIO()
        Console(file=out, width=300).print(jobs_table([ClientJob.of(job)], 0.0))
        assert "END RANGE" in out.getvalue()
        assert ClientJob.of(job).completion_range == (lo, hi)


def test_the_late_bound_samples_arrivals_from_finished_jobs_too():
    """The decision worker samples the late bound's arrivals from every job it has seen; a
    copy of a finished job whose profile is gone from the snapshot (a service's learned or
    inline profile) still plans, and every forecast gets its range."""
    from andreas.service.decider import InlineDecider

    cl = cluster([("n0", "A", 2)], {"A": [100, 180]})
    worker = InlineDecider(make_policy("greedy"), "greedy", {})
    ranged = []
    for t, (job_id, profile) in enumerate([("x", "job:x"), ("y", "job:y"), ("z", "job:z")]):
        view = JobView(job(job_id, submit=100.0 * t, epochs=30, profile=profile), 30.0)
        snap = Snapshot(100.0 * t, cl, Profiles({profile: {("A", 1): 10.0}}), (view,))
        plan = worker.decide(snap)
        predicted, _ = worker.forecast(snap, plan, None, None, {job_id: 0.2})
        ranged.append(predicted[job_id].range)
    assert all(r is not None for r in ranged)
    assert ranged[-1].completion[1] >= ranged[-1].completion[0] + 0.3 * 300 - 1e-6
