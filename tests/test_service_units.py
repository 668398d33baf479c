"""Service pieces without a running service: configuration errors, the token command, the
online speed estimator, and forecasts made by the simulator from a live snapshot."""

import subprocess
import sys
from dataclasses import dataclass

import pytest
from conftest import scheduler_with_queued_jobs, wait_for, write_service_files

from andreas.errors import ScenarioError
from andreas.model import Cluster, GpuType, Job, Node, Profiles, Scenario
from andreas.policies import make_policy
from andreas.policies.base import Assignment, JobView, Snapshot
from andreas.service.config import read_service_config
from andreas.service.learning import speed_factor
from andreas.service.snapshots import read_snapshot
from andreas.sim.engine import simulate
from andreas.sim.forecast import forecast

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = pytest.mark.service


def andreas(*args):
    return subprocess.run([sys.executable, "-m", "andreas", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("extra, message", [
    ("executor: pbs\n", "field 'executor': expected local, ray or slurm, got 'pbs'"),
    ("gpu_indices: {n1: [0]}\n", "field 'gpu_indices.n1': expected a list of 2 GPU numbers"),
    ("gpu_indices: {n9: [0]}\n", "field 'gpu_indices.n9': unknown node"),
    ("priority_weights: {7: 1}\n", "field 'priority_weights.7'"),
    ("grace_s: -1\n", "field 'grace_s': expected a number >= 0.0, got -1"),
    ("decision_budget_ms: -5\n", "field 'decision_budget_ms': expected a number >= 0.0"),
    ("decide_in: gpu\n", "field 'decide_in': expected process or thread, got 'gpu'"),
    ("forecast_budget_s: 0\n", "field 'forecast_budget_s': expected a number > 0"),
    ("switch_gain: 1.5\n", "field 'switch_gain': expected a share below 1 (0.05 = 5 %), got 1.5"),
    ("switch_gain: -0.1\n", "field 'switch_gain': expected a number >= 0.0"),
])
def test_bad_service_config_names_file_line_and_field(tmp_path, extra, message):
    path = write_service_files(tmp_path, extra=extra)
    with pytest.raises(ScenarioError) as info:
        read_service_config(path)
    assert message in str(info.value) and str(path) in str(info.value)
    line = len(path.read_text().splitlines())
    run = andreas("serve", "--config", path)  # the CLI: one line, exit 2, no traceback
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert f"{path}:{line}" in run.stderr or f"{path}:1" in run.stderr


def test_a_live_decision_is_bounded_by_default(tmp_path):
    # the service's default budget reaches the policy; policy_options' own value wins; a
    # policy without the option (a baseline) is not given it
    assert read_service_config(write_service_files(tmp_path)).policy_options[
        "decision_budget_ms"] == 500.0
    path = write_service_files(tmp_path, extra="decision_budget_ms: 0\n")
    assert read_service_config(path).policy_options["decision_budget_ms"] == 0.0
    path = write_service_files(tmp_path, extra="decision_budget_ms: 200\n"
                               "policy_options: {seed: 1, decision_budget_ms: 50}\n")
    assert read_service_config(path).policy_options["decision_budget_ms"] == 50.0
    path = write_service_files(tmp_path, extra="policy: fifo\npolicy_options: {}\n")
    assert "decision_budget_ms" not in read_service_config(path).policy_options


def test_token_command_prints_a_working_token(tmp_path):
    path = write_service_files(tmp_path)
    run = andreas("token", "--config", path, "--user", "ops", "--role", "admin")
    assert run.returncode == 0, run.stderr
    token = run.stdout.strip()
    from andreas.service.store import Store

    store = Store(read_service_config(path).database_url)
    assert store.user_for(token).name == "ops" and store.user_for(token).role == "admin"
    bad = andreas("token", "--config", path, "--user", "ops", "--role", "root")
    assert bad.returncode == 2 and "unknown role 'root'" in bad.stderr


@dataclass
class R:
    run_id: int
    time: float
    epochs_done: float


def test_speed_factor_converges_to_the_true_ratio_and_ignores_start_up():
    true_spe = {1: 1.3 * 2.0, 2: 1.3 * 0.5}  # both configurations 30 % slower than profiled
    profiled = {1: 2.0, 2: 0.5}
    reports, t = [], 100.0
    for run_id, epochs in ((1, range(1, 6)), (2, range(6, 20))):
        t += 7.0  # start-up before each run's first report: must not count
        for e in epochs:
            t += true_spe[run_id]
            reports.append(R(run_id, t, float(e)))
    assert speed_factor(reports, profiled) == pytest.approx(1.3, rel=1e-9)
    assert speed_factor(reports[:1], profiled) is None  # one report: nothing to learn yet
    noisy = [R(r.run_id, r.time + (0.05 if i % 2 else -0.05), r.epochs_done)
             for i, r in enumerate(reports)]
    assert speed_factor(noisy, profiled) == pytest.approx(1.3, rel=0.02)


def _reports(seconds):
    """One run's reports, an epoch apart, taking `seconds` each (profiled: 1 s per epoch)."""
    t, out = 0.0, [R(1, 0.0, 0.0)]
    for e, dt in enumerate(seconds, 1):
        t += dt
        out.append(R(1, t, float(e)))
    return out


def test_a_learned_speed_replans_only_past_its_reports_noise():
    from andreas.service.learning import speed_evidence, worth_replanning

    def worth(seconds):
        return worth_replanning(1.0, speed_evidence(_reports(seconds), {1: 1.0}), 0.1)

    # steady 30 % slower: a replan from the third pair on, not on one or two
    assert [worth([1.3] * n) for n in (1, 2, 3)] == [False, False, True]
    # 1.0, 1.4, 1.0, 1.4 s: factor 1.2, spread 0.2309 / 1.2 = 0.192; twice the standard error,
    # 2 x 0.192 x 1.2 / sqrt(4) = 0.231, exceeds the move of 0.2: noise, no replan. Eight
    # such pairs: 2 x 0.178 x 1.2 / sqrt(8) = 0.151 < 0.2: a replan
    assert not worth([1.0, 1.4] * 2) and worth([1.0, 1.4] * 4)
    assert not worth([1.05] * 8)  # a steady 5 % is under replan_deviation (10 %)


def _running_job_reports(tmp_path, ratios, epochs=3.0):
    """A fresh scheduler whose one job "j" (`epochs` epochs) runs on n1 and reports 0 epochs
    done at 5 s, then one more epoch after each of `ratios` x its profiled seconds per epoch.
    Returns the config, the scheduler (the caller shuts it down), whether each report
    replanned, the job's learned factor after each, and its report pairs at the end."""
    from andreas.service.db import JobRow, RunRow

    config = read_service_config(write_service_files(tmp_path))
    scheduler = scheduler_with_queued_jobs(config, ["j"])
    try:
        with scheduler.store.session() as s:
            s.add(RunRow(id=1, job_id="j", node="n1", gpu_type="fast", gpu_indices=[0],
                         state="running", token_hash="x", started_at=0.0,
                         epochs_at_start=0.0))
        moved, factors = [], []
        with scheduler.store.session() as s:
            job, run = s.get(JobRow, "j"), s.get(RunRow, 1)
            job.epochs = epochs
            spe = scheduler.runs._profiled_seconds(job, run)
            t = 5.0
            for epoch, ratio in enumerate([0.0, *ratios]):
                t += ratio * spe
                moved.append(scheduler.runs.record_progress(s, job, run, float(epoch), at=t))
                factors.append(job.speed_factor)
            pairs = job.speed_pairs
    except BaseException:
        scheduler.shutdown(stop_jobs=True)
        raise
    return config, scheduler, moved, factors, pairs


def test_a_profile_30_percent_off_replans_at_its_third_pair_of_reports(tmp_path):
    """The service keeps the profile until three pairs of reports back a learned speed; then
    the whole move (1.0 to 1.3) is judged at once and replans. Taking the first pair's factor
    would have spent the move on noise: no later report would move it past 10 %."""
    # a report at each epoch, 30 % slower than profiled (the fifth: no epoch left to count)
    _, scheduler, moved, factors, _ = _running_job_reports(tmp_path, [1.3] * 4)
    scheduler.shutdown(stop_jobs=True)
    assert moved == [False, False, False, True, False]
    assert factors[:3] == [1.0, 1.0, 1.0] and factors[3:] == [pytest.approx(1.3)] * 2


def test_a_learned_speeds_standard_error_is_stored_and_read_with_the_snapshot(tmp_path):
    """Three epochs of ten measured at 1.0, 1.4 and 1.0 x the profile: factor 3.4 / 3 =
    1.133, spread (sample standard deviation sqrt(0.1067 / 2) = 0.2309, over the factor)
    0.2038 from 3 pairs, so a standard error of 0.2038 / sqrt(3) = 0.1177 of the factor,
    which the snapshot read hands the planner."""
    from andreas.service.learning import standard_error

    assert standard_error(0.3, 2) is None and standard_error(None, 9) is None
    assert standard_error(0.3, 9) == pytest.approx(0.1)
    # (with all its epochs done the job would be finishing: out of the plan)
    config, scheduler, _, factors, pairs = _running_job_reports(tmp_path, [1.0, 1.4, 1.0],
                                                                epochs=10.0)
    try:
        assert (pairs, factors[-1]) == (3, pytest.approx(3.4 / 3))
        read = read_snapshot(scheduler.store, scheduler.executor, config)
        assert read.speed_error == {"j": pytest.approx(0.2309401 / (3.4 / 3) / 3 ** 0.5)}
    finally:
        scheduler.shutdown(stop_jobs=True)


def _cluster():
    return Cluster({"g": GpuType("g", (100.0, 180.0))}, (Node("a", "g", 2),), 0.3, 1.2, 5.0)


def test_forecast_from_an_empty_start_equals_a_simulation():
    cluster = _cluster()
    profiles = Profiles({"p": {("g", 1): 10.0, ("g", 2): 6.0}})
    jobs = tuple(Job(f"j{i}", 0.0, 30.0 + 10 * i, 0.01, 3.0 + i, "p") for i in range(4))
    snapshot = Snapshot(0.0, cluster, profiles, tuple(JobView(j, j.epochs) for j in jobs))
    policy = make_policy("andreas", seed=3)
    plan = policy.decide(snapshot)
    predicted = forecast(snapshot, plan, make_policy("andreas", seed=3))
    simulated = simulate(Scenario(cluster, profiles, jobs), make_policy("andreas", seed=3))
    for record in simulated.jobs:
        f = predicted[record.job_id]
        assert f.completion == pytest.approx(record.completion_time)
        assert f.energy_cost == pytest.approx(record.energy_cost)
        assert f.tardiness_cost == pytest.approx(record.tardiness_cost)


def test_forecast_charges_restart_overhead_only_to_resumed_or_moved_jobs():
    cluster = _cluster()
    profiles = Profiles({"p": {("g", 1): 10.0}})
    running = JobView(Job("run", 0.0, 1e6, 0.0, 2.0, "p"), 2.0, Assignment("a", 1), True)
    resumed = JobView(Job("res", 0.0, 1e6, 0.0, 2.0, "p"), 2.0, None, True)
    plan = {"run": Assignment("a", 1), "res": Assignment("a", 1)}
    f = forecast(Snapshot(50.0, cluster, profiles, (running, resumed)), plan,
                 make_policy("fifo"))
    assert f["run"].completion == pytest.approx(50.0 + 20.0)
    assert f["res"].completion == pytest.approx(50.0 + 5.0 + 20.0)  # pays the 5 s overhead


def test_a_job_that_finished_as_it_was_paused_counts_as_completed(tmp_path):
    from andreas.executors.local import LocalExecutor
    from andreas.service.api import _nodes
    from andreas.service.db import JobRow, RunRow
    from andreas.service.scheduler import Scheduler
    from andreas.service.store import Store

    config = read_service_config(write_service_files(tmp_path))
    store = Store(config.database_url)
    store.create_token("u", "user")
    scheduler = Scheduler(config, store, LocalExecutor(_nodes(config)))
    with store.session() as s:
        s.add(JobRow(id="j", owner_id=1, name="j", command=["true"], epochs=3.0,
                     submitted_at=0.0, due_date=10.0, weight=0.0, profile_name="mlp",
                     state="running", epochs_done=3.0, cancel_requested=False,
                     speed_factor=1.0))
        s.add(RunRow(id=1, job_id="j", node="n1", gpu_type="fast", gpu_indices=[0],
                     state="running", token_hash="x", started_at=0.0, epochs_at_start=0.0,
                     stop_reason="pause"))
    with store.session() as s:
        job, run = s.get(JobRow, "j"), s.get(RunRow, 1)
        scheduler.runs._end_run(s, job, run, 0, True)  # exit 0 with every epoch done
        assert job.state == "completed" and run.state == "ended"
        job.state, job.epochs_done, run.state = "running", 2.0, "running"
        scheduler.runs._end_run(s, job, run, 0, True)  # stopped part way: a pause
        assert job.state == "paused"


def test_an_unreachable_database_is_one_clear_line(tmp_path):
    path = write_service_files(tmp_path)
    run = andreas("serve", "--config", path, "--database-url",
                  "postgresql+psycopg://nobody@127.0.0.1:1/andreas")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "cannot open the database" in run.stderr and "Connection refused" in run.stderr


def test_modelled_energy_charges_each_runs_start_up_at_the_restart_draw():
    from andreas.service.energy import modelled_costs, run_segments

    cluster = Cluster({"G": GpuType("G", (300.0, 600.0), restart_w=100.0)},
                      (Node("n", "G", 2),), 0.25, 1.0, 5.0)
    t0 = 1_700_000_000.0  # Unix times, as the service records them
    # a: 2 GPUs for 20 s (5 s start-up at 2 x 100 W, 15 s at 600 W); b: 1 GPU, ended in its
    # start-up after 3 s (1 GPU restarting beside a's two restarting ones would exceed 2 GPUs,
    # so b runs later, alone: 3 s at 100 W)
    segs = (run_segments(cluster, "a", "n", "G", 2, t0, t0 + 20, 10.0)
            + run_segments(cluster, "b", "n", "G", 1, t0 + 30, t0 + 33, 0.0))
    assert [(s.phase, s.end - s.start) for s in segs] == [
        ("restart", 5.0), ("run", 15.0), ("restart", 3.0)]
    jobs = [Job("a", t0, t0 + 100, 0.01, 10.0, "p"), Job("b", t0, t0 + 100, 0.01, 1.0, "p")]
    costs = modelled_costs(cluster, jobs, segs)
    assert costs.energy_joules == pytest.approx(200 * 5 + 600 * 15 + 100 * 3)
    assert costs.completion["a"] == pytest.approx(t0 + 20)
    plain = Cluster({"G": GpuType("G", (300.0, 600.0))}, cluster.nodes, 0.25, 1.0, 5.0)
    assert [s.phase for s in run_segments(plain, "a", "n", "G", 2, t0, t0 + 20, 10.0)] \
        == ["run"]  # no restart draw set: a run is busy from its start (the paper's model)


def test_sqlite_commits_are_synchronous_full(tmp_path):
    """What docs/service-executors.md promises: an acknowledged job is on disk (WAL,
    synchronous=FULL)."""
    from sqlalchemy import text

    from andreas.service.store import Store

    store = Store(f"sqlite:///{tmp_path}/state.db")
    with store.engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA synchronous")).scalar() == 2  # FULL


def test_an_older_database_is_upgraded_without_losing_its_jobs(tmp_path):
    """A database made by the previous release (revision 0001) gets the idempotency key
    (0002) at start, its jobs intact."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine, text

    from andreas.service.store import MIGRATIONS, Store

    url = f"sqlite:///{tmp_path}/old.db"
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with create_engine(url).begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0001")
        connection.execute(text("INSERT INTO users (id, name, role, created_at) "
                                "VALUES (1, 'ann', 'user', 0)"))
        connection.execute(text(
            "INSERT INTO jobs (id, owner_id, name, command, epochs, submitted_at, due_date, "
            "weight, state, epochs_done, cancel_requested, speed_factor) VALUES ('job-old', 1, "
            "'old', '[\"true\"]', 3, 0, 100, 0.01, 'queued', 0, 0, 1)"))
    store = Store(url)
    with store.engine.connect() as conn:
        rows = conn.execute(text("SELECT id, idempotency_key FROM jobs")).all()
    assert [tuple(r) for r in rows] == [("job-old", None)]


@pytest.mark.parametrize("policy", ["fifo", "edf", "ps", "wspt", "atc", "greedy", "andreas",
                                    "andreas-paper", "andreas-ls", "andreas-pr", "milp"])
def test_the_service_decides_and_forecasts_with_every_policy(tmp_path, policy):
    # once, with policy: fifo, every tick failed: the forecast gave fifo options it lacks
    from andreas.policies import policy_names

    assert policy in policy_names()
    path = write_service_files(tmp_path)
    text = path.read_text().replace("policy: andreas\n", f"policy: {policy}\n")
    path.write_text(text.replace("{seed: 1, consolidate.share: null, wait.share: null, "
                                 "company.share: null}", "{}"))
    scheduler = scheduler_with_queued_jobs(read_service_config(path), ("a", "b", "c", "d"))
    try:
        scheduler.replan(["submit"])
        assert scheduler.board.latest.assignments  # something started on the idle cluster
        assert set(scheduler.board.latest.forecast) == {"a", "b", "c", "d"}
    finally:
        scheduler.shutdown(stop_jobs=True)


def test_a_job_killed_after_its_last_epoch_is_started_again_and_completes(tmp_path):
    # a run killed after it reported its last epoch left the job paused with nothing
    # remaining, and the snapshot skipped it for ever (found killing a Ray actor)
    from andreas.service.db import JobRow

    scheduler = scheduler_with_queued_jobs(read_service_config(write_service_files(tmp_path)),
                                           ("done",))
    try:
        with scheduler.store.session() as s:
            job = s.get(JobRow, "done")
            job.state, job.epochs_done, job.first_started_at = "paused", 3.0, 1.0
        snapshot = read_snapshot(scheduler.store, scheduler.executor, scheduler.config).snapshot
        assert [(v.job_id, v.remaining_epochs) for v in snapshot.jobs] == [("done", 1.0)]
        scheduler.replan(["run-ended"])
        assert "done" in scheduler.board.latest.assignments  # a run to resume and end it

        def completed() -> bool:
            scheduler.tick()
            with scheduler.store.session() as s:
                return s.get(JobRow, "done").state == "completed"
        wait_for(completed, timeout=60, what="completion")
    finally:
        scheduler.shutdown(stop_jobs=True)


@pytest.mark.parametrize("url, folder", [
    ("sqlite:////srv/andreas/andreas.db", "/srv/andreas"),
    ("sqlite+pysqlite:////srv/andreas/andreas.db", "/srv/andreas"),
    ("sqlite:///state/andreas.db", "state"),
    ("sqlite://", None),  # in memory: no folder to create, probe or name
    ("sqlite:///:memory:", None),
    ("postgresql+psycopg://andreas@db/andreas", None),
])
def test_sqlite_folder_is_the_database_files_folder_or_none(url, folder):
    from pathlib import Path

    from andreas.service.folders import sqlite_folder
    assert sqlite_folder(url) == (None if folder is None else Path(folder))


@pytest.mark.parametrize("orig, said", [
    ('could not extend file "base/16384/16431": No space left on device\nHINT:  Check free '
     'disk space.', 'the database cannot write: the disk is full (could not extend file '
     '"base/16384/16431": No space left on device)'),
    ("attempt to write a readonly database",
     "the database cannot write: its files are read-only (attempt to write a readonly "
     "database)"),
    ("connection refused\nIs the server running?", "the database failed: connection refused"),
])
def test_a_failed_tick_is_described_without_its_sql(orig, said):
    """SQLAlchemy's message carries the statement and its parameters (another job's id, a run
    token's hash): /healthz and the jobs' reasons get the driver's first line only."""
    from sqlalchemy.exc import OperationalError

    from andreas.service.database_errors import describe_failure
    exc = OperationalError("INSERT INTO runs (job_id, token_hash) VALUES (%(job_id)s, %(h)s)",
                           {"job_id": "job-0123456789ab", "h": "f" * 64}, Exception(orig))
    assert "INSERT" in str(exc) and "job-0123456789ab" in str(exc)  # what reached /healthz
    assert describe_failure(exc) == said
    assert describe_failure(ValueError("bad\nsecond line")) == "ValueError: bad"
    assert describe_failure(KeyError("job-0123456789ab")) == "KeyError: 'job-…'"  # no one's id


def record_forecasts(scheduler, completions, *, tardiness=0.0, at=0.0):
    """Record a plan whose forecast ends each job at `completions[job]` (1 EUR of energy,
    `tardiness` EUR late), as a decision at time `at` would (Scheduler._publish)."""
    from types import SimpleNamespace

    from andreas.sim.forecast import JobForecast

    predicted = {j: JobForecast(j, 100.0, c, 1.0, tardiness) for j, c in completions.items()}
    read = SimpleNamespace(snapshot=SimpleNamespace(time=at, jobs=()), drained_out={})
    proposal = SimpleNamespace(plan={}, decision_s=0.01, source="policy", revisit_at=None,
                               why={}, weighed=None, gain_needed=None)
    scheduler._publish(read, proposal, predicted, ["test"])


def test_a_jobs_row_holds_its_first_forecast_and_its_last_once_it_leaves_the_plan(tmp_path):
    """A job's row keeps its first forecast (`predicted`, and `forecast` until then) and, once
    the job leaves the plan, the last one; moves in between stay in memory, where the API
    reads them. A restarted scheduler does not plan a job as new."""
    from andreas.executors.local import LocalExecutor
    from andreas.service.api import _nodes
    from andreas.service.db import JobRow
    from andreas.service.scheduler import Scheduler

    config = read_service_config(write_service_files(tmp_path))
    scheduler = scheduler_with_queued_jobs(config, ["a", "b"])
    store = scheduler.store

    def rows():
        with store.session() as s:
            return {j: (s.get(JobRow, j).predicted["completion"],
                        s.get(JobRow, j).forecast["completion"]) for j in ("a", "b")}

    record_forecasts(scheduler, {"a": 500.0})
    with store.session() as s:
        assert s.get(JobRow, "b").predicted is None
    record_forecasts(scheduler, {"a": 510.0, "b": 600.0})  # b planned first now
    assert rows() == {"a": (500.0, 500.0), "b": (600.0, 600.0)}
    assert scheduler.board.latest.forecast["a"]["completion"] == 510.0
    again = Scheduler(config, store, LocalExecutor(_nodes(config)))  # a restart
    record_forecasts(again, {"a": 520.0, "b": 630.0})
    assert rows() == {"a": (500.0, 500.0), "b": (600.0, 600.0)}
    record_forecasts(again, {"b": 640.0})  # a ended
    assert rows() == {"a": (500.0, 520.0), "b": (600.0, 600.0)}
    record_forecasts(again, {})  # b cancelled
    assert rows() == {"a": (500.0, 520.0), "b": (600.0, 640.0)}


def test_the_service_records_the_workload_history_only_when_asked(tmp_path):
    """The predicted workload total per decision is `andreas validate`'s plot; in the service
    it would read every job and run at every decision."""
    config = read_service_config(write_service_files(tmp_path))
    scheduler = scheduler_with_queued_jobs(config, ["a"])
    record_forecasts(scheduler, {"a": 500.0}, tardiness=0.5)
    assert not scheduler.board.history
    scheduler.board.record_history = True
    record_forecasts(scheduler, {"a": 500.0}, tardiness=0.5, at=1.0)
    assert [h["predicted_total"] for h in scheduler.board.history] == [pytest.approx(1.5)]
    assert scheduler.board.history[0]["forecast_jobs"] == 1


def test_a_workloads_first_plan_is_the_first_decision_that_forecast_it():
    """`andreas validate` compares the measured total with the first plan's: a decision made
    as the batch came in, which read the queue before it and forecast nothing, is not it (it
    read as a first plan 100 % off). Later decisions with nothing left to forecast stay."""
    from andreas.measure.validate import plans_of_the_workload

    history = [{"time": t, "predicted_total": total, "forecast_jobs": n} for t, total, n in
               ((0.5, 0.0, 0), (1.1, 0.0, 0), (1.2, 2.0, 3), (3.0, 2.1, 1), (5.0, 2.2, 0))]
    assert [h["time"] for h in plans_of_the_workload(history, 1.0)] == [1.2, 3.0, 5.0]


def test_a_queue_longer_than_one_statements_ids_gets_its_first_forecasts(tmp_path):
    """The new jobs' rows are looked up IN_BATCH ids per statement (SQLite refuses more than
    32,766 parameters): every one of them, across the batches, gets its first forecast."""
    from sqlalchemy import select

    from andreas.service.db import JobRow
    from andreas.service.store import IN_BATCH

    config = read_service_config(write_service_files(tmp_path))
    ids = [f"j{i}" for i in range(2 * IN_BATCH + 7)]
    scheduler = scheduler_with_queued_jobs(config, ids)
    record_forecasts(scheduler, {j: 500.0 + i for i, j in enumerate(ids)})
    with scheduler.store.session() as s:
        stored = dict(s.execute(select(JobRow.id, JobRow.predicted)).all())
    assert {j: f["completion"] for j, f in stored.items()} == {
        j: 500.0 + i for i, j in enumerate(ids)}
