"""The service's decisions in a worker process: the same plans and forecasts as inline, a
dead worker replaced, and no worker left behind when the service is killed."""

import os
import signal
import time

import psutil
import pytest
from conftest import scheduler_with_queued_jobs, write_service_files

from andreas.errors import AndreasError
from andreas.model import Job
from andreas.policies import make_policy
from andreas.policies.base import JobView, Snapshot
from andreas.service.config import read_service_config
from andreas.service.decider import (
    InlineDecider,
    ProcessDecider,
    make_decider,
    warm_up_snapshot,
)

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = pytest.mark.service


def _snapshot(config, jobs: int = 6) -> Snapshot:
    views = tuple(JobView(Job(f"j{i}", 0.0, 50.0 + 10 * i, 0.01, 20.0 + i, "mlp"), 20.0 + i)
                  for i in range(jobs))
    return Snapshot(0.0, config.cluster, config.profiles, views)


def test_a_worker_process_decides_and_forecasts_as_inline(tmp_path):
    config = read_service_config(write_service_files(tmp_path))
    options = {"seed": 3, "decision_budget_ms": 0.0}
    snapshot = _snapshot(config)
    inline = InlineDecider(make_policy("andreas", **options), "andreas", options)
    worker = ProcessDecider("andreas", options)
    try:
        plan = worker.decide(snapshot)
        assert dict(plan) == dict(inline.decide(snapshot)) and plan
        assert getattr(plan, "reasons", {}) == getattr(inline.decide(snapshot), "reasons", {})
        predicted, foreseen = worker.forecast(snapshot, plan, None)
        expected, expected_foreseen = inline.forecast(snapshot, plan, None)
        assert predicted == expected and set(predicted) == {v.job_id for v in snapshot.jobs}
        assert foreseen == expected_foreseen[:len(foreseen)]
        assert worker.what_if(snapshot, "j2") == inline.what_if(snapshot, "j2")
    finally:
        worker.close()


def test_a_dead_worker_fails_one_call_and_is_replaced(tmp_path):
    from concurrent.futures.process import BrokenProcessPool

    config = read_service_config(write_service_files(tmp_path))
    worker = ProcessDecider("fifo", {})
    try:
        snapshot = _snapshot(config)
        worker.warm_up(warm_up_snapshot(config.cluster))
        first = worker.decide(snapshot)
        assert worker._pool is not None
        (child,) = worker._pool._processes.values()  # the one worker process
        os.kill(child.pid, signal.SIGKILL)
        child.join(timeout=30)
        with pytest.raises(BrokenProcessPool):
            worker.decide(snapshot)
        assert worker.decide(snapshot) == first  # a new worker
    finally:
        worker.close()


def test_a_killed_service_leaves_no_decision_worker(tmp_path):
    from andreas.service.sandbox import LocalService

    folder = write_service_files(tmp_path).parent
    service = LocalService(tmp_path / "svc", (folder / "cluster.yaml").read_text(),
                           (folder / "profiles.csv").read_text())
    with service:
        assert service.proc is not None
        workers = psutil.Process(service.proc.pid).children(recursive=True)
        assert workers, "the service started no decision worker"
        service.kill9()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(w.is_running() and w.status() != "zombie"
                                              for w in workers):
        time.sleep(0.2)
    alive = [w.pid for w in workers if w.is_running() and w.status() != "zombie"]
    assert not alive, f"left behind: {alive}"
    assert os.getpid()  # (the test process itself is untouched)


def test_a_forecast_past_its_budget_is_stopped_and_the_plan_stands(tmp_path):
    from andreas.service.decider import ForecastCut, Worker

    config = read_service_config(write_service_files(tmp_path))
    snapshot = _snapshot(config)
    worker = Worker(make_policy("fifo"), "fifo", {}, forecast_budget_s=1e-9)
    with pytest.raises(ForecastCut, match="forecast of 6 queued jobs was stopped after"):
        worker.forecast(snapshot, worker.decide(snapshot), None)
    with pytest.raises(ForecastCut):
        worker.what_if(snapshot, "j1")
    assert Worker(make_policy("fifo"), "fifo", {}).forecast(
        snapshot, worker.decide(snapshot), None)[0]  # no budget: a whole forecast

    scheduler = scheduler_with_queued_jobs(
        config, ("a", "b", "c"), InlineDecider(make_policy("fifo"), "fifo", {}, 1e-9))
    try:
        scheduler.replan(["submit"])
        assert scheduler.board.latest.assignments and scheduler.board.latest.forecast == {}
        assert "stopped after" in (scheduler.planner.forecast_cut or "")
    finally:
        scheduler.shutdown(stop_jobs=True)


@pytest.mark.parametrize("line, expected", [("forecast_budget_s: null\n", None),
                                            ("forecast_budget_s: 5\n", 5.0), ("", 30.0)])
def test_the_forecast_budget_is_read_from_service_yaml(tmp_path, line, expected):
    path = write_service_files(tmp_path, extra=line)
    assert read_service_config(path).forecast_budget_s == expected


def test_the_worker_runs_at_the_configured_niceness(tmp_path):
    # nice 10 by default (the API's requests go first); a host busy with other work starves
    # it, so service.yaml's decide_nice sets it (0 = the service's own priority)
    path = write_service_files(tmp_path, extra="decide_nice: 3\n")
    config = read_service_config(path)
    assert config.decide_nice == 3
    worker = make_decider(config)
    try:
        worker.warm_up(warm_up_snapshot(config.cluster))
        (child,) = worker._pool._processes.values()
        assert psutil.Process(child.pid).nice() == os.nice(0) + 3
    finally:
        worker.close()
    assert read_service_config(write_service_files(tmp_path / "d")).decide_nice == 10
    for i, bad in enumerate(("20", "-1", "2.5", "high")):
        with pytest.raises(AndreasError, match=r"service.yaml.*decide_nice"):
            read_service_config(write_service_files(tmp_path / f"bad{i}",
                                                    extra=f"decide_nice: {bad}\n"))
