"""A job cannot become the service: it runs as an unprivileged OS user (service.yaml's
`job_user`, or `job_users` per submitting user) and reaches none of the service's secrets,
files, run records or processes, on the local, Ray and Slurm executors
(docs/security.md, "What a job can reach")."""

import json
import os
import pwd
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import ENGINES, hostile_result, train_job, wait_for, write_service_files
from fastapi.testclient import TestClient

from andreas.errors import AndreasError, ScenarioError
from andreas.executors.identity import IdentityError, JobIdentity
from andreas.service.api import create_app
from andreas.service.config import read_service_config
from andreas.service.job_accounts import JobAccounts, read_job_file
from andreas.service.sandbox import THREE_GPUS, LocalService
from andreas.service.secret_env import check_config_secrets, read_secret_file

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = [pytest.mark.service, ENGINES]

HOSTILE = Path(__file__).parent / "data" / "hostile_job.py"
ADMIN = {"Authorization": "Bearer admin-secret"}
PROFILES = "profile,gpu_type,gpus,seconds_per_epoch\none,fast,1,0.3\n"
# what every hostile job tries besides the service's environment: forge its own exit record,
# read its own run's records and log (the service's), and the service's database
OWN_RECORDS = ["{checkpoint}/../runs/{run}/exit.json", "{checkpoint}/../runs/{run}/pid.json",
               "{checkpoint}/../logs/run-{run}.log"]


def hostile(service_pid: int, database: Path, *more: str) -> list[str]:
    return [sys.executable, str(HOSTILE), str(service_pid), *OWN_RECORDS, str(database), *more]


def assert_refused(result: dict, database: Path, user: str) -> None:
    """The job ran as `user` and got none of what it tried."""
    entry = pwd.getpwnam(user)
    assert result["uid"] == entry.pw_uid and result["home"] == entry.pw_dir
    assert result["env"] == ["ANDREAS_PROGRESS_TOKEN"]  # its own job's token, nothing else
    tried = ["environ", "signal", "write", *OWN_RECORDS[1:], str(database)]
    got = {k: v for k, v in result.items() if k in tried or "{" in k or k.startswith("/")}
    assert all(v.startswith("refused:") for v in got.values()), got
    assert len([k for k in got]) == len(tried)


def wait_done(get, job_id: str, timeout: float = 120) -> dict:
    return wait_for(lambda: (lambda j: j if j["state"] in ("completed", "failed") else None)(
        get(f"/jobs/{job_id}").json()), timeout=timeout, what=f"job {job_id} to end")


# ---------------------------------------------------------------- the local executor, for real
def run_hostile_on_service(open_dir, user: str, profiles: str, profile: str
                           ) -> tuple[str, str, Path]:
    """The hostile job, run to completion by a real local service whose jobs run as `user`:
    (its id, its log, the service's database). The admin token is not in the log."""
    with LocalService(open_dir / "svc", THREE_GPUS, profiles, job_user=user,
                      options="period_s: null\npoll_s: 0.1\n") as service:
        database = open_dir / "svc" / "state" / "andreas.db"
        job = service.post("/jobs", json={
            "command": hostile(service.proc.pid, database), "epochs": 1, "deadline_s": 600,
            "profile": profile}).json()["id"]
        assert wait_done(service.get, job)["state"] == "completed"
        log = service.get(f"/jobs/{job}/logs").text
        assert service.token not in log  # the admin token, from the service's environment
    return job, log, database


def test_a_job_of_a_real_service_reads_no_secret_and_forges_no_record(job_users, open_dir):
    job, log, database = run_hostile_on_service(open_dir, job_users[0], PROFILES, "one")
    assert_refused(hostile_result(log), database, job_users[0])
    folder = open_dir / "svc" / "state"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o711
    assert stat.S_IMODE(database.stat().st_mode) == 0o600
    checkpoint = folder / "jobs" / job / "checkpoint"
    assert checkpoint.stat().st_uid == pwd.getpwnam(job_users[0]).pw_uid
    exit_record = json.loads(next((folder / "jobs" / job / "runs").glob("*/exit.json"))
                             .read_text())
    assert exit_record["returncode"] == 0  # the wrapper's, not forged


def test_every_rank_of_a_gang_runs_as_the_job_user_and_reaches_nothing(job_users, open_dir):
    """The rank launcher keeps the wrapper's privileges and starts each rank as the job's
    account: neither rank reads a secret, forges a record or signals the service."""
    gang = "profile,gpu_type,gpus,seconds_per_epoch,nodes\ngang,fast,1,0.3,2\n"
    _, log, database = run_hostile_on_service(open_dir, job_users[0], gang, "gang")
    results = [json.loads(x[len("RESULT "):]) for x in log.splitlines()
               if x.startswith("RESULT ")]
    assert len(results) == 2, log  # one per rank, each on its node
    for result in results:
        assert_refused(result, database, job_users[0])


def test_each_submitter_runs_as_their_own_account_and_cannot_read_anothers(job_users, open_dir,
                                                                           ):
    path = write_service_files(open_dir, job_user=job_users[0], extra=textwrap.dedent(f"""\
        job_users: {{alice: {job_users[0]}, bob: {job_users[1]}}}
        """))
    with TestClient(create_app(read_service_config(path), admin_token="admin-secret")) as c:
        tokens = {u: c.post("/tokens", headers=ADMIN, json={"user": u}).json()["token"]
                  for u in ("alice", "bob")}
        as_user = {u: {"Authorization": f"Bearer {t}"} for u, t in tokens.items()}
        keep = ("import os; open(os.path.join(os.environ['ANDREAS_CHECKPOINT_DIR'], 'secret'),"
                " 'w').write('alice-only')")
        alice = c.post("/jobs", headers=as_user["alice"], json={
            "command": [sys.executable, "-c", keep], "epochs": 1, "deadline_s": 600,
            "profile": "one"}).json()["id"]
        assert wait_done(lambda p: c.get(p, headers=ADMIN), alice)["state"] == "completed"
        secret = open_dir / "state" / "jobs" / alice / "checkpoint" / "secret"
        assert secret.read_text() == "alice-only"
        bob = c.post("/jobs", headers=as_user["bob"], json={
            "command": hostile(os.getpid(), open_dir / "state" / "andreas.db", str(secret)),
            "epochs": 1, "deadline_s": 600, "profile": "one"}).json()["id"]
        assert wait_done(lambda p: c.get(p, headers=ADMIN), bob)["state"] == "completed"
        result = hostile_result(c.get(f"/jobs/{bob}/logs", headers=ADMIN).text)
        assert result["uid"] == pwd.getpwnam(job_users[1]).pw_uid
        assert result[str(secret)].startswith("refused:")


def test_a_training_job_as_another_user_checkpoints_and_reports_progress(job_users, open_dir):
    path = write_service_files(open_dir, job_user=job_users[0])
    with TestClient(create_app(read_service_config(path), admin_token="admin-secret")) as c:
        job = c.post("/jobs", headers=ADMIN, json=train_job(3)).json()["id"]
        done = wait_done(lambda p: c.get(p, headers=ADMIN), job)
        assert done["state"] == "completed" and done["epochs_done"] == 3
        checkpoint = open_dir / "state" / "jobs" / job / "checkpoint"
        owner = pwd.getpwnam(job_users[0]).pw_uid
        assert {p.stat().st_uid for p in checkpoint.iterdir()} == {owner}


# ---------------------------------------------------------------- Ray and Slurm
def test_a_ray_job_runs_as_the_job_user_and_reaches_nothing(job_users, open_dir, ray_cluster):
    path = write_service_files(open_dir, nodes="", executor="ray", job_user=job_users[0],
                               extra=f"ray_address: '{ray_cluster}'\n")
    with TestClient(create_app(read_service_config(path), admin_token="admin-secret")) as c:
        run_hostile_job(c, open_dir / "state" / "andreas.db", job_users[0])


def run_hostile_job(client, database: Path, user: str) -> None:
    """Submit the hostile job to an in-process service (this process is the service) and
    check that it ran as `user` and got nothing."""
    job = client.post("/jobs", headers=ADMIN, json={
        "command": hostile(os.getpid(), database), "epochs": 1, "deadline_s": 600,
        "profile": "one"}).json()["id"]
    assert wait_done(lambda p: client.get(p, headers=ADMIN), job)["state"] == "completed"
    assert_refused(hostile_result(client.get(f"/jobs/{job}/logs", headers=ADMIN).text),
                   database, user)


def test_a_slurm_job_runs_as_the_job_user_and_reaches_nothing(job_users, open_dir):
    from andreas.executors.slurm_sandbox import LocalSlurm

    with LocalSlurm(open_dir / "slurm", [("n1", "fast", 2), ("n2", "slow", 1)]) as slurm, \
            pytest.MonkeyPatch.context() as mp:
        for key, value in slurm.env.items():
            mp.setenv(key, value)
        path = write_service_files(open_dir / "svc", nodes="", executor="slurm",
                                   job_user=job_users[0])
        os.chmod(open_dir / "svc", 0o711)
        app = create_app(read_service_config(path), admin_token="admin-secret")
        with TestClient(app) as c:
            run_hostile_job(c, open_dir / "svc" / "state" / "andreas.db", job_users[0])


# ---------------------------------------------------------------- the rules, one by one
def _service_yaml(tmp_path: Path, lines: str) -> Path:
    write_service_files(tmp_path)
    path = tmp_path / "service.yaml"
    text = path.read_text().replace("jobs_as_service_user: true\n", "")
    path.write_text(text + lines)
    return path


@pytest.mark.parametrize("lines, message", [
    ("", r"service.yaml:\d+: field 'job_user': missing; jobs must not run as the service's"),
    ("job_user: root\n", r"field 'job_user'.*'root' is root \(uid 0\)"),
    ("job_user: no-such-user-here\n", r"field 'job_user'.*no OS user 'no-such-user-here'"),
    ("job_user: nobody\njob_users: [nobody]\n", r"field 'job_users'.*expected a mapping"),
    ("job_user: nobody\njobs_as_service_user: true\n", r"field 'jobs_as_service_user'"),
])
def test_service_yaml_names_a_job_user_that_can_run_jobs(tmp_path, lines, message):
    with pytest.raises(ScenarioError, match=message):
        read_service_config(_service_yaml(tmp_path, lines))


def test_the_job_user_must_reach_the_data_folder(job_users, tmp_path):
    # pytest's folders are closed to other users: the service says so before any job fails
    config = read_service_config(_service_yaml(tmp_path, f"job_user: {job_users[0]}\n"))
    with pytest.raises(AndreasError, match=rf"job user '{job_users[0]}' cannot reach .*chmod o\+x"):
        JobAccounts(config).check_reach()


def test_the_wrapper_refuses_an_account_it_cannot_use(tmp_path):
    run = tmp_path / "run"
    code = subprocess.run([sys.executable, "-m", "andreas.executors.launch", "--run-dir",
                           str(run), "--lock", str(tmp_path / "lock"), "--log",
                           str(tmp_path / "log"), "--user", "no-such-user-here", "--",
                           "true"], timeout=60).returncode
    record = json.loads((run / "exit.json").read_text())
    assert code == 127 and "no OS user 'no-such-user-here'" in record["reason"]
    with pytest.raises(IdentityError, match="is root"):
        JobIdentity.lookup("root")


def test_the_admin_token_leaves_no_trace_in_the_process_environment():
    # os.environ.pop alone leaves it in /proc/<pid>/environ, which the kernel shows
    code = ("from andreas.service.secret_env import take_from_environment as take\n"
            "value = take('ANDREAS_ADMIN_TOKEN')\n"
            "seen = open('/proc/self/environ', 'rb').read()\n"
            "print(value, b'canary-7d1f' in seen, b'ANDREAS_ADMIN_TOKEN' in seen)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "ANDREAS_ADMIN_TOKEN": "canary-7d1f"},
                         timeout=60).stdout.split()
    assert out == ["canary-7d1f", "False", "False"]


def test_a_token_file_must_be_private(tmp_path):
    path = tmp_path / "token"
    path.write_text("s3cret\n")
    os.chmod(path, 0o644)
    with pytest.raises(AndreasError, match=r"open to other users \(mode 0644\).*chmod 600"):
        read_secret_file(path)
    os.chmod(path, 0o600)
    assert read_secret_file(path) == "s3cret"


def test_a_database_password_is_refused_where_others_can_read_it(tmp_path):
    config = tmp_path / "service.yaml"
    config.write_text("database_url: postgresql://andreas:pw@db/andreas\n")
    url = "postgresql://andreas:pw@db/andreas"
    with pytest.raises(AndreasError, match="--database-url: holds a password"):
        check_config_secrets(config, url, from_command_line=True)
    os.chmod(config, 0o644)
    with pytest.raises(AndreasError, match=r"field 'database_url' holds a password.*0644"):
        check_config_secrets(config, url, from_command_line=False)
    os.chmod(config, 0o600)
    check_config_secrets(config, url, from_command_line=False)
    check_config_secrets(config, "postgresql://andreas@db/andreas", from_command_line=True)


def test_what_a_job_wrote_is_read_as_hostile(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # a plain open() would wait for a writer for ever, and stop planning
    started = time.monotonic()
    assert read_job_file(fifo) is None and time.monotonic() - started < 5
    secret = tmp_path / "secret"
    secret.write_text("the service's")
    (tmp_path / "link").symlink_to(secret)
    assert read_job_file(tmp_path / "link") is None
    (tmp_path / "big").write_bytes(b"x" * 100_000)
    assert len(read_job_file(tmp_path / "big", limit=10)[0]) == 10


def test_a_job_user_works_in_its_uploaded_folder(job_users, open_dir):
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("data.txt")
        info.size = 5
        tar.addfile(info, io.BytesIO(b"hello"))
    path = write_service_files(open_dir, job_user=job_users[0])
    with TestClient(create_app(read_service_config(path), admin_token="admin-secret")) as c:
        upload = c.post("/uploads", content=buffer.getvalue(), headers={
            **ADMIN, "Content-Type": "application/gzip"}).json()["id"]
        work = ("import os; open('out.txt', 'w').write(open('data.txt').read() + ' back'); "
                "print('uid', os.getuid())")
        job = c.post("/jobs", headers=ADMIN, json={
            "command": [sys.executable, "-c", work], "working_dir": upload, "epochs": 1,
            "deadline_s": 600, "profile": "one"}).json()["id"]
        assert wait_done(lambda p: c.get(p, headers=ADMIN), job)["state"] == "completed"
        tree = open_dir / "state" / "uploads" / upload / "tree"
        assert (tree / "out.txt").read_text() == "hello back"
        assert tree.stat().st_uid == pwd.getpwnam(job_users[0]).pw_uid
        assert stat.S_IMODE(tree.stat().st_mode) == 0o700


def test_a_workdir_inside_the_data_folder_is_refused(tmp_path):
    # a job there could be handed another user's upload tree, or run among checkpoints
    path = write_service_files(tmp_path)
    with TestClient(create_app(read_service_config(path), admin_token="admin-secret")) as c:
        answer = c.post("/jobs", headers=ADMIN, json={
            "command": ["true"], "workdir": str(tmp_path / "state" / "jobs"), "epochs": 1,
            "deadline_s": 600, "profile": "one"})
        assert answer.status_code == 422
        assert "is inside the service's data folder" in answer.json()["detail"]
