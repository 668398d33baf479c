import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import itertools
import textwrap

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TRAIN = EXAMPLES / "train_numpy.py"
_db_counter = itertools.count()
# `make test` runs the suite on two workers (pytest-xdist, --dist loadgroup); the tests of
# this group run on one of them, one after another: they start engines that share the machine
# (Ray clusters, whose fixture ends with `ray stop --force`; Slurm daemons; the OS users jobs
# run as, made and removed per session). The group does nothing in a plain `pytest` run.
ENGINES = pytest.mark.xdist_group("engines")


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory):
    """A real PostgreSQL server (binaries from the `pgserver` wheel), started once per session.

    Not skipped when missing: the service must be tested against PostgreSQL too."""
    import pgserver

    server = pgserver.get_server(tmp_path_factory.mktemp("pgdata"), cleanup_mode="stop")
    yield server
    server.cleanup()


@pytest.fixture(scope="session")
def ray_cluster():
    """A real one-node Ray cluster (`ray start --head`) with 2 CPUs and 2 logical GPUs of type
    `fast`, shared by the Ray executor's tests and the simulations run on Ray."""
    import json
    import socket
    import subprocess

    ray = Path(sys.executable).with_name("ray")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    subprocess.run([str(ray), "start", "--head", f"--port={port}", "--num-cpus=2",
                    "--num-gpus=2", "--resources", json.dumps({"gpu_type:fast": 2}),
                    "--include-dashboard=false", "--disable-usage-stats"],
                   check=True, capture_output=True, timeout=180)
    yield f"127.0.0.1:{port}"
    subprocess.run([str(ray), "stop", "--force"], capture_output=True, timeout=120)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path):
    """Each test gets an empty database of each engine."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/state.db"
    server = request.getfixturevalue("pg_server")
    name = f"t{next(_db_counter)}_{abs(hash(str(tmp_path))) % 10**8}"
    server.psql(f"CREATE DATABASE {name};")
    return psycopg_url(server, name)


def psycopg_url(server, name: str) -> str:
    """The SQLAlchemy URL (psycopg 3 driver) of database `name` on a pgserver server."""
    from andreas.service.store import engine_url

    return engine_url(server.get_uri(name))


def write_service_files(directory: Path, *, nodes: str | None = None, extra: str = "",
                        executor: str = "local", job_user: str | None = None) -> Path:
    """A small cluster (fast node with 2 GPUs, slow node with 1), one profile, service.yaml.
    Holding for company is off: these seconds-long jobs would otherwise wait minutes for their
    latest start, and the tests are about the service's mechanics. `job_user`: the OS user
    jobs run as; None: the service's own (jobs_as_service_user), since pytest's folders are
    closed to other users; tests/test_job_isolation.py runs jobs as other users."""
    directory.mkdir(parents=True, exist_ok=True)
    nodes = nodes if nodes is not None else textwrap.dedent("""\
        nodes:
          - {name: n1, gpu_type: fast, gpus: 2}
          - {name: n2, gpu_type: slow, gpus: 1}
        """)
    (directory / "cluster.yaml").write_text(textwrap.dedent("""\
        energy_price: 0.2
        pue: 1.0
        restart_overhead_s: 1
        gpu_types:
          fast: {node_power_w: [400, 700]}
          slow: {node_power_w: [200, 380]}
        """) + nodes)
    (directory / "profiles.csv").write_text(
        "profile,gpu_type,gpus,seconds_per_epoch\n"
        "mlp,fast,1,0.3\nmlp,fast,2,0.2\nmlp,slow,1,0.5\n"
        "one,fast,1,0.3\none,slow,1,0.5\n")
    (directory / "service.yaml").write_text(textwrap.dedent(f"""\
        cluster: cluster.yaml
        profiles: profiles.csv
        data_dir: state
        executor: {executor}
        policy: andreas
        policy_options: {{seed: 1, consolidate.share: null, wait.share: null, company.share: null}}
        period_s: null
        grace_s: 5
        poll_s: 0.1
        """) + (f"job_user: {job_user}\n" if job_user else "jobs_as_service_user: true\n")
        + extra)
    return directory / "service.yaml"


def scheduler_with_queued_jobs(config, job_ids, decider=None):
    """A service Scheduler (local executor, its own store) with `job_ids` queued: 3-epoch jobs
    of profile mlp that run `true`, due far ahead. Call its shutdown(stop_jobs=True)."""
    from andreas.executors.local import LocalExecutor
    from andreas.service.api import _nodes
    from andreas.service.db import JobRow
    from andreas.service.scheduler import Scheduler
    from andreas.service.store import Store

    store = Store(config.database_url)
    store.create_token("u", "user")
    scheduler = Scheduler(config, store, LocalExecutor(_nodes(config)), decider=decider)
    with store.session() as s:
        for name in job_ids:
            s.add(JobRow(id=name, owner_id=1, name=name, command=["true"], epochs=3.0,
                         submitted_at=0.0, due_date=1e10, weight=1.0, profile_name="mlp",
                         state="queued", epochs_done=0.0, cancel_requested=False,
                         speed_factor=1.0))
    return scheduler


def train_job(epochs: int, *, deadline_s: float = 600, samples: int = 60000,
              extra_args: list[str] | None = None, **extra) -> dict:
    """A submission of the NumPy example training script (`extra_args`: more of its options)."""
    body = {"script": str(TRAIN), "args": ["--samples", str(samples), *(extra_args or [])],
            "epochs": epochs, "deadline_s": deadline_s, "profile": "mlp"}
    body.update(extra)
    return body


def wait_for(predicate, timeout: float = 60.0, interval: float = 0.1, what="condition"):
    """Poll `predicate` until it is truthy (returned) or `timeout` s pass (AssertionError
    naming `what`: a string, or a callable asked only then, to report the state it found)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for "
                         f"{what() if callable(what) else what}")


def epoch_lines(log_text: str) -> list[int]:
    """Epoch numbers the example script logged as done (after checkpointing them)."""
    out = []
    for line in log_text.splitlines():
        if line.startswith("epoch ") and " done" in line:
            out.append(int(line.split()[1]))
    return out


def processes(job_id):
    """(launcher pid, training pids) of a job's live run, from the command lines."""
    import psutil

    launchers, trainers = [], []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if f"/jobs/{job_id}/" in cmd and "andreas.executors.launch" in cmd:
            launchers.append(proc.info["pid"])
            trainers += [c.pid for c in proc.children(recursive=True)]
    return launchers, trainers


def assert_each_epoch_once(log: str, epochs: int | None) -> None:
    """Every epoch done once, from the log: none logged twice, and each not logged is the one
    a SIGKILL cut between its checkpoint and its log line (the next run resumes after it).
    `epochs`: how many the job has (None: a job stopped early, up to the last one logged)."""
    done, seen = [], set()
    for line in log.splitlines():
        if line.startswith("epoch ") and " done" in line:
            n = int(line.split()[1])
            assert n not in seen, f"epoch {n} ran twice"
            seen.add(n)
            done.append(n)
        elif line.startswith("resumed from checkpoint at epoch "):
            k = int(line.split()[-1])
            last = done[-1] if done else 0
            assert last <= k <= last + 1, f"resumed at {k} after epoch {last}"
            if k == last + 1:
                seen.add(k)  # checkpointed, killed before its line
                done.append(k)
    assert sorted(seen) == list(range(1, (max(seen, default=0) if epochs is None
                                          else epochs) + 1))


def all_gone(pids) -> bool:
    """Whether none of `pids` runs any more (a zombie, ended but not yet reaped, counts as
    gone)."""
    import psutil

    def running(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False
    return not any(running(p) for p in pids)


JOB_USERS = ("andreas-test-job-a", "andreas-test-job-b")


@pytest.fixture(scope="session")
def job_users():
    """Two unprivileged OS users for jobs to run as (created here, removed after), for the
    tests of what a job can reach. Needs root, as CI runs; elsewhere those tests skip."""
    import os
    import pwd
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("running jobs as other OS users needs root (CI runs as root)")
    made = []
    for name in JOB_USERS:
        try:
            pwd.getpwnam(name)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                            "/usr/sbin/nologin", name], check=True, capture_output=True)
            made.append(name)
    granted = _grant_passage(JOB_USERS)
    yield JOB_USERS
    for folder in granted:
        for name in JOB_USERS:
            subprocess.run(["setfacl", "-x", f"u:{name}", str(folder)], capture_output=True)
    for name in made:
        subprocess.run(["userdel", name], capture_output=True)


def _grant_passage(users) -> list[Path]:
    """Let `users` pass (x, no listing) through each folder above the interpreter and this
    project that is closed to other users (a pyenv under /root): an ACL entry for them
    alone, removed after the session, instead of opening the folder to everyone. Returns
    the folders changed."""
    import os
    import stat
    import subprocess

    places = {Path(os.path.realpath(sys.executable)), Path(sys.prefix).resolve(),
              Path(__file__).resolve().parent.parent}
    folders = sorted({a for p in places for a in p.parents} | {p for p in places if p.is_dir()})
    granted = []
    for folder in folders:
        if not folder.stat().st_mode & stat.S_IXOTH:
            for name in users:
                subprocess.run(["setfacl", "-m", f"u:{name}:x", str(folder)], check=True,
                               capture_output=True)
            granted.append(folder)
    return granted


@pytest.fixture
def open_dir():
    """A folder other OS users may pass through (pytest's own are closed to them), for a
    service whose jobs run as another user; removed after."""
    import os
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="andreas-test-", dir="/tmp"))
    os.chmod(folder, 0o711)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def hostile_result(log: str) -> dict:
    """What tests/data/hostile_job.py reported, from its log."""
    import json

    line = next(x for x in log.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])
