"""A full disk under the service: clear refusals, nothing half-stored, recovery when space
returns; a read-only folder: a sentence at startup. The folders are small tmpfs of their own
(needs root and mount; skipped, saying so, where the machine does not allow it)."""

import errno
import os
import subprocess
import sys
from contextlib import contextmanager

import psutil
import pytest
from conftest import psycopg_url, wait_for, write_service_files

from andreas.service.sandbox import LocalService

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = pytest.mark.service

BODY = {"command": ["sleep", "3600"], "epochs": 1, "deadline_s": 86400, "profile": "one"}


@contextmanager
def _tmpfs(folder, options):
    """A tmpfs mounted on `folder` with mount `options` for the block (skips the test, saying
    why, where the machine does not allow mounting)."""
    folder.mkdir(exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()}): run as root")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


@pytest.fixture
def small_disk(tmp_path):
    with _tmpfs(tmp_path / "disk", "size=64m") as disk:
        yield disk


FIFO = "policy: fifo\nperiod_s: null\ngrace_s: 1\n"  # decides at each event, stops fast


def _service(tmp_path, folder, options="", **kwargs) -> LocalService:
    """A real `andreas serve` in `folder` on conftest's small cluster, planning with fifo;
    `options`: more service.yaml lines; `kwargs`: LocalService's (database_url, log)."""
    files = write_service_files(tmp_path / "files").parent
    return LocalService(folder, (files / "cluster.yaml").read_text(),
                        (files / "profiles.csv").read_text(), options=FIFO + options, **kwargs)


def _fill(path):
    """Write zeros to `path` until the file system says it is full."""
    with open(path, "wb", buffering=0) as f:
        chunk = b"\0" * (1 << 20)
        while True:
            try:
                f.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                chunk = chunk[:len(chunk) // 2]
                if len(chunk) < 512:
                    return


def test_a_full_disk_refuses_clearly_and_recovers(small_disk, tmp_path):
    service = _service(tmp_path, small_disk / "svc")
    with service:
        first = service.post("/jobs", json=BODY)
        assert first.status_code == 201
        _fill(small_disk / "filler")
        refused = service.post("/jobs", json=BODY)
        assert refused.status_code == 503, refused.text
        assert "cannot write to its database: the disk is full" in refused.json()["detail"]
        assert refused.headers["Retry-After"]
        health = service.get("/healthz").json()
        assert health["status"] == "degraded" and health["data_dir"]["low"]
        listed = service.get("/jobs")  # reading still works, and nothing half-stored
        assert listed.status_code == 200 and [j["id"] for j in listed.json()] \
            == [first.json()["id"]]

        os.remove(small_disk / "filler")
        again = wait_for(lambda: (lambda r: r if r.status_code == 201 else None)(
            service.post("/jobs", json=BODY)), what="a submission once space is back")
        wait_for(lambda: {j["state"] for j in service.get("/jobs").json()} == {"running"},
                 what="both jobs to start")
        health = wait_for(lambda: (lambda h: h if h["status"] == "ok" else None)(
            service.get("/healthz").json()), what="a healthy service")
        assert not health["data_dir"]["low"] and again.json()["state"] in ("queued", "running")
        for job in service.get("/jobs").json():
            service.post(f"/jobs/{job['id']}/cancel")
        wait_for(lambda: all(j["state"] == "cancelled" for j in service.get("/jobs").json()),
                 what="the jobs to stop")


@pytest.fixture
def postgres_on_small_disk(tmp_path):
    """A real PostgreSQL server of its own whose data folder is on a 128 MB tmpfs: yields the
    server and the mount point (where a test fills the disk)."""
    import pgserver

    with _tmpfs(tmp_path / "pgdisk", "size=128m") as disk:
        server = pgserver.get_server(disk / "pg", cleanup_mode="stop")
        try:
            server.psql("CREATE DATABASE fulldisk;")
            yield server, disk
        finally:
            server.cleanup()
            _kill_holders(disk)


def test_postgresql_on_a_full_disk_says_so_without_sql_and_recovers(tmp_path,
                                                                    postgres_on_small_disk):
    """PostgreSQL's disk fills while the service runs (its own data folder elsewhere has
    room). PostgreSQL takes a row while a table's last page has room and refuses one that
    needs a new page ("could not extend file"), so which write fails first is PostgreSQL's
    choice: either a submission is refused with a 503 that says the disk is full, or the
    scheduler's next decision fails. Found: the scheduler's failure reached /healthz (no token
    needed) and every waiting job's reason as the raw SQL with its parameters, another job's
    id and its run's token hash among them, and said nothing of a full disk."""
    server, disk = postgres_on_small_disk
    service = _service(tmp_path, tmp_path / "svc", database_url=psycopg_url(server, "fulldisk"))
    with service:
        first = service.post("/jobs", json=BODY).json()["id"]
        wait_for(lambda: service.get(f"/jobs/{first}").json()["state"] == "running",
                 what="the first job to run")
        _fill(disk / "filler")
        stored, refused, health = [first], [], {}
        for _ in range(100):  # until PostgreSQL needs a new page for one write or another
            answer = service.post("/jobs", json=BODY)
            if answer.status_code == 201:
                stored.append(answer.json()["id"])
            else:
                assert answer.status_code == 503, answer.text
                refused.append(answer)
            health = service.get("/healthz").json()
            if refused or health["scheduler"].startswith("failing"):
                break
        assert refused or health["scheduler"].startswith("failing"), health
        for answer in refused:
            detail = answer.json()["detail"]
            assert "cannot write to its database: the disk is full" in detail, detail
            assert "nothing was stored" in detail and answer.headers["Retry-After"]
            assert "try again once the database server's disk has room" in detail, detail
        if health["scheduler"].startswith("failing"):
            said = health["scheduler"]
            assert said.startswith("failing: the database cannot write: the disk is full"), said
            assert "No space left on device" in said
            assert "INSERT" not in said and "job-" not in said and "token" not in said, said
            assert health["status"] == "degraded" and not health["data_dir"]["low"], health
        listed = service.get("/jobs")  # reads work, and every acknowledged job is there
        assert listed.status_code == 200
        assert sorted(j["id"] for j in listed.json()) == sorted(stored)
        reasons = [j["reason"] for j in listed.json() if j["state"] == "queued"]
        assert all(r and "INSERT" not in r and not any(i in r for i in stored)
                   for r in reasons), reasons  # the queued say why, without SQL or job ids
        assert all("the disk is full" in r for r in reasons if "decision failed" in r), reasons

        os.remove(disk / "filler")
        more = wait_for(lambda: (lambda r: r if r.status_code == 201 else None)(
            service.post("/jobs", json=BODY)), what="a submission once space is back")
        stored.append(more.json()["id"])
        wait_for(lambda: service.get("/healthz").json()["status"] == "ok",
                 what="a healthy service once space is back")
        wait_for(lambda: [j["state"] for j in service.get("/jobs").json()].count("running")
                 == min(3, len(stored)), what="the jobs to fill the 3 GPUs once space is back")
        for job in stored:
            service.post(f"/jobs/{job}/cancel")
        wait_for(lambda: all(j["state"] == "cancelled" for j in service.get("/jobs").json()),
                 what="the jobs to stop")


@pytest.mark.parametrize("where", ["data_dir", "database"])
def test_a_read_only_folder_stops_the_service_with_a_sentence(tmp_path, where):
    # a data folder the service cannot write to started the service anyway (the database
    # elsewhere): every job would then fail on its first log line. On SQLite's folder the
    # error said only "unable to open database file".
    with _tmpfs(tmp_path / "frozen", "size=1m,ro") as frozen:
        config = write_service_files(tmp_path / "files")
        lines = {"data_dir": f"data_dir: {frozen}\n",
                 "database": f"data_dir: state\ndatabase_url: sqlite:///{frozen}/andreas.db\n"}
        config.write_text(config.read_text().replace("data_dir: state\n", lines[where]))
        served = subprocess.run([sys.executable, "-m", "andreas", "serve", "--config",
                                 str(config), "--port", "0"],
                                capture_output=True, text=True, timeout=120)
        assert served.returncode != 0
        assert f"cannot write to {frozen}" in served.stderr
        assert "Read-only file system" in served.stderr, served.stderr
        assert "Traceback" not in served.stderr


def test_a_data_folder_turned_read_only_keeps_jobs_queued_and_says_why(tmp_path):
    """The data folder (logs, checkpoints, run folders) turns read-only while the service
    runs, the database elsewhere: a job that should start stays queued, not failed, with the
    reason on the job and on /healthz; it starts once the folder is writable again."""
    with _tmpfs(tmp_path / "data", "size=16m") as data:
        service = _service(tmp_path, tmp_path / "svc", f"data_dir: {data}\n",
                           database_url=f"sqlite:///{tmp_path}/andreas.db")
        with service:
            remounted = subprocess.run(["mount", "-o", "remount,ro", str(data)],
                                       capture_output=True, text=True)
            assert remounted.returncode == 0, remounted.stderr
            job_id = service.post("/jobs", json=BODY).json()["id"]
            job = wait_for(lambda: (lambda j: j if "read-only" in (j["reason"] or "").lower()
                                    else None)(service.get(f"/jobs/{job_id}").json()),
                           what="the job to say why it waits")
            assert job["state"] == "queued" and str(data) in job["reason"], job
            assert job["first_started_at"] is None and job["measured"]["energy_cost"] == 0, job
            runs = service.get(f"/jobs/{job_id}/runs").json()  # none began: none took time
            assert all(r["stop_reason"] == "data-folder" and r["ended_at"] == r["started_at"]
                       for r in runs), runs
            health = service.get("/healthz").json()
            assert health["status"] == "degraded" and str(data) in health["scheduler"], health

            subprocess.run(["mount", "-o", "remount,rw", str(data)], check=True)
            wait_for(lambda: service.get(f"/jobs/{job_id}").json()["state"] == "running",
                     what="the job to start once the folder is writable", timeout=90)
            service.post(f"/jobs/{job_id}/cancel")
            wait_for(lambda: service.get(f"/jobs/{job_id}").json()["state"] == "cancelled",
                     what="the job to stop")


@contextmanager
def _ext4(tmp_path):
    """An ext4 file system in a file, mounted on tmp_path/data with errors=remount-ro, and
    the sysfs switch that makes the kernel see an error on it: it then remounts it read-only
    at once, under the files held open for writing (a remount by hand refuses while any is).
    Skips, saying why, where the machine has no loop devices, mkfs.ext4 or that switch."""
    image, folder = tmp_path / "data.img", tmp_path / "data"
    folder.mkdir()
    made = subprocess.run(f"truncate -s 64M {image} && mkfs.ext4 -q -F {image}", shell=True,
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot make an ext4 image here ({made.stderr.strip()})")
    mounted = subprocess.run(["mount", "-o", "loop,errors=remount-ro", str(image), str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a loop device here ({mounted.stderr.strip()}): run as root")
    try:
        device = subprocess.run(["findmnt", "-n", "-o", "SOURCE", str(folder)],
                                capture_output=True, text=True).stdout.strip()
        switch = f"/sys/fs/ext4/{os.path.basename(device)}/trigger_fs_error"
        if not os.path.exists(switch):
            pytest.skip(f"this kernel has no {switch}")
        yield folder, image, switch
    finally:  # a failed test leaves its jobs running: they hold files there
        _kill_holders(folder)
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def _holders(folder):
    """The pids of processes holding a file under `folder` open."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            held = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue
        if any(h.startswith(str(folder)) for h in held):
            found.append(int(pid))
    return found


def _kill_holders(folder):
    """Kill -9 every process holding a file under `folder` open, as a reboot would (the jobs'
    processes, left running when the service stops), and wait until none holds one: a killed
    process lets go of its files only once it has died, and until then umount says busy."""
    for pid in _holders(folder):
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    wait_for(lambda: not _holders(folder), what=f"the processes holding {folder} to die")


def test_a_file_system_turned_read_only_under_running_jobs_keeps_every_job(tmp_path):
    """The kernel remounts the data folder's file system read-only after a disk error while
    jobs run and write their logs, the SQLite database in that folder: the service answers
    reads, refuses writes with a 503 that names the read-only file system (SQLite says only
    "disk I/O error"), and /healthz says so. Repaired (the service stopped, the jobs gone as
    after a reboot, fsck, mounted again), the service lists every job and runs them again."""
    ticking = {**BODY, "command": ["sh", "-c", "while :; do echo tick; sleep 0.2; done"]}
    with _ext4(tmp_path) as (data, image, switch):
        service = _service(tmp_path, tmp_path / "svc", f"data_dir: {data}/state\n")
        with service:
            ids = [service.post("/jobs", json=ticking).json()["id"] for _ in range(2)]
            wait_for(lambda: [service.get(f"/jobs/{i}").json()["state"] for i in ids]
                     == ["running", "running"], what="both jobs to run")
            with open(switch, "w") as f:
                f.write("1")
            health = wait_for(lambda: (lambda h: h if h["status"] == "degraded" else None)(
                service.get("/healthz").json()), what="/healthz to say degraded")
            assert health["data_dir"]["read_only"], health
            assert health["database"].startswith("read-only") and str(data) in \
                health["database"], health
            listed = service.get("/jobs")
            assert listed.status_code == 200
            assert {j["id"]: j["state"] for j in listed.json()} == dict.fromkeys(ids, "running")
            refused = service.post("/jobs", json=ticking)
            assert refused.status_code == 503, refused.text
            detail = refused.json()["detail"]
            assert "its file system is read-only" in detail and str(data) in detail, detail
            assert "nothing was stored" in detail and refused.headers["Retry-After"]
            assert [j["id"] for j in service.get("/jobs").json()] == ids  # nothing half-stored
        _kill_holders(data)
        assert subprocess.run(["umount", str(data)], capture_output=True).returncode == 0
        checked = subprocess.run(["e2fsck", "-fy", str(image)], capture_output=True, text=True)
        assert checked.returncode in (0, 1), checked.stdout  # 1: errors found and corrected
        subprocess.run(["mount", "-o", "loop", str(image), str(data)], check=True)
        integrity = subprocess.run([sys.executable, "-c", "import sqlite3, sys; print(sqlite3."
                                    "connect(sys.argv[1]).execute('pragma integrity_check')"
                                    ".fetchone()[0])", f"{data}/state/andreas.db"],
                                   capture_output=True, text=True)
        assert integrity.stdout.strip() == "ok", integrity
        with service:
            wait_for(lambda: {j["id"]: j["state"] for j in service.get("/jobs").json()}
                     == dict.fromkeys(ids, "running"), what="both jobs to run again",
                     timeout=120)
            for i in ids:
                service.post(f"/jobs/{i}/cancel")
            wait_for(lambda: all(service.get(f"/jobs/{i}").json()["state"] == "cancelled"
                                 for i in ids), what="the jobs to stop")


def test_postgresql_on_a_file_system_turned_read_only_answers_503_and_recovers(tmp_path):
    """The kernel remounts PostgreSQL's file system read-only after a disk error while the
    service runs a job. PostgreSQL's next WAL write fails, which it reports as a privilege
    error (EROFS is "insufficient privilege" to it), and it stops. Found: that submission
    answered a bare 500. Now every answer meanwhile is a 503 with a sentence (the database's
    file system is read-only, or unreachable once PostgreSQL has stopped); repaired (fsck,
    mounted again, PostgreSQL started), the service lists the job, which ran on throughout."""
    import pgserver

    with _ext4(tmp_path) as (data, image, switch):
        server = pgserver.get_server(data / "pg", cleanup_mode="stop")
        try:
            server.psql("CREATE DATABASE rodisk;")
            service = _service(tmp_path, tmp_path / "svc",
                               database_url=psycopg_url(server, "rodisk"),
                               log=tmp_path / "service.log")
            with service:
                job = service.post("/jobs", json=BODY).json()["id"]
                wait_for(lambda: service.get(f"/jobs/{job}").json()["state"] == "running",
                         what="the job to run")
                os.sync()  # what was written before the error is on the disk (pgserver's
                with open(switch, "w") as f:  # own files too, which it reads to stop)
                    f.write("1")
                said = []
                for _ in range(5):
                    answer = service.post("/jobs", json=BODY)
                    assert answer.status_code == 503, answer.text
                    assert answer.headers["Retry-After"]
                    said.append(answer.json()["detail"])
                    said.append(service.get("/healthz").json()["scheduler"])
                assert any("its file system is read-only" in d for d in said), said
                for detail in said[::2]:
                    assert detail.startswith(("the database is unreachable", "the service cannot "
                                              "write to its database: its file system is read-"
                                              "only")), detail
                    if "read-only" in detail:
                        assert "try again once the database server's disk is writable" in detail
                health = service.get("/healthz")
                assert health.status_code == 503 and health.json()["database"].startswith("error")
                postmaster = server.get_pid()
                _kill_holders(data)  # PostgreSQL, as a reboot would; the job's files are not here
                # gone, not a zombie: its stale postmaster.pid would otherwise look alive
                wait_for(lambda: not psutil.pid_exists(postmaster), what="PostgreSQL to be gone")
                wait_for(lambda: subprocess.run(["umount", str(data)]).returncode == 0,
                         what=f"{data} to unmount")
                checked = subprocess.run(["e2fsck", "-fy", str(image)], capture_output=True,
                                         text=True)
                assert checked.returncode in (0, 1), checked.stdout
                subprocess.run(["mount", "-o", "loop", str(image), str(data)], check=True)
                server.ensure_postgres_running()
                wait_for(lambda: service.get("/healthz").status_code == 200,
                         what="the service to see the database again", timeout=120)
                assert [(j["id"], j["state"]) for j in service.get("/jobs").json()] \
                    == [(job, "running")], (tmp_path / "service.log").read_text()[-3000:]
                service.post(f"/jobs/{job}/cancel")
                wait_for(lambda: service.get(f"/jobs/{job}").json()["state"] == "cancelled",
                         what="the job to stop")
        finally:
            server.cleanup()


def test_an_upload_to_a_full_disk_is_a_507_and_nothing_is_kept(small_disk, tmp_path):
    service = _service(tmp_path, small_disk / "svc")
    with service:
        _fill(small_disk / "filler")
        body = os.urandom(2 << 20)  # incompressible: it cannot fit
        refused = service.post("/uploads", content=body,
                               headers={"Content-Type": "application/gzip"})
        assert refused.status_code == 507, refused.text  # before: a 500
        assert "the service's disk is full; nothing was stored" in refused.json()["detail"]
        assert int(refused.headers["Retry-After"]) > 0
        assert not any((small_disk / "svc" / "state" / "uploads").iterdir())


def test_healthz_is_degraded_when_inodes_run_out(tmp_path):
    from andreas.service.routes.health import LOW_INODES

    with _tmpfs(tmp_path / "disk", f"size=64m,nr_inodes={LOW_INODES + 400}") as disk:
        service = _service(tmp_path, disk / "svc")
        with service:
            health = service.get("/healthz").json()
            assert health["status"] == "ok" and health["data_dir"]["free_inodes"] > 0, health
            for i in range(health["data_dir"]["free_inodes"]):  # empty files: bytes to spare
                try:
                    (disk / f"f{i}").touch()
                except OSError:
                    break
            health = service.get("/healthz").json()  # before: ok, with 0 free inodes
            assert health["status"] == "degraded" and health["data_dir"]["low"], health
            assert health["data_dir"]["free_inodes"] < LOW_INODES
            assert health["data_dir"]["free_bytes"] > 16 * 1024 * 1024
