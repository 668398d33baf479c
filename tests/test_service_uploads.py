"""Working folders sent with a job (andreas submit --working-dir): the job runs in its own copy;
unsafe archives, other users' uploads and oversized ones are refused with a sentence."""

import io
import json
import tarfile
import time

import pytest
from conftest import wait_for, write_service_files
from fastapi.testclient import TestClient
from test_client import cli
from test_service_durability import TOKEN, Service, free_port

from andreas.service.api import create_app
from andreas.service.config import read_service_config
from andreas.service.db import JobRow

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = pytest.mark.service

ADMIN = {"Authorization": "Bearer admin-secret"}


def archive(members: dict[str, bytes | None], links: dict[str, str] | None = None) -> bytes:
    """A gzipped tar: name -> content (None: a folder), and symbolic links name -> target."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            if content is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return buffer.getvalue()


def test_unsafe_foreign_and_oversized_uploads_are_refused(tmp_path):
    config = read_service_config(write_service_files(tmp_path, extra="max_upload_bytes: 4096\n"))
    with TestClient(create_app(config, admin_token="admin-secret", run_scheduler=False)) as c:
        def post(body: bytes, headers=ADMIN):
            return c.post("/uploads", content=body, headers={**headers,
                                                             "Content-Type": "application/gzip"})

        for body, says in ((archive({"../evil.py": b"x"}), "outside the working folder"),
                           (archive({"/etc/evil": b"x"}), "outside the working folder"),
                           (archive({"a.py": b"x"}, {"link": "/etc/passwd"}), "not a plain file"),
                           (b"not a tar", "expected a gzipped tar"),
                           (archive({"big": b"0" * 50_000}), "unpacked it would exceed")):
            r = post(body)
            assert r.status_code == 422 and says in r.json()["detail"], (says, r.text)
        r = post(b"0" * 5000)
        assert r.status_code == 413 and "over 4096 bytes" in r.json()["detail"]
        good = post(archive({"src": None, "src/train.py": b"print('hi')\n"}))
        assert good.status_code == 201 and good.json()["files"] == 2
        upload = good.json()["id"]
        job = {"script": "src/train.py", "epochs": 1, "deadline_s": 60, "profile": "one",
               "working_dir": upload}
        assert c.post("/jobs", headers=ADMIN, json={**job, "script": "nope.py"}).json()[
            "detail"].startswith("script: 'nope.py' is not a file of the uploaded folder")
        bob = {"Authorization": "Bearer " + c.post("/tokens", headers=ADMIN,
                                                     json={"user": "bob"}).json()["token"]}
        r = c.post("/jobs", headers=bob, json=job)  # not bob's upload
        assert r.status_code == 404 and "no upload" in r.json()["detail"]
        made = c.post("/jobs", headers=ADMIN, json=job)
        assert made.status_code == 201, made.text
        workdir = config.data_dir / "uploads" / upload / "tree"  # unpacked once, at upload
        assert (workdir / "src" / "train.py").read_text() == "print('hi')\n"
        again = c.post("/jobs", headers=ADMIN, json=job)  # a second job: no second copy
        assert again.status_code == 201
        assert not any((config.data_dir / "jobs" / j.json()["id"] / "workdir").exists()
                       for j in (made, again))


def test_a_job_runs_in_its_copy_of_the_working_dir(tmp_path):
    config = write_service_files(tmp_path / "svc", extra="public_url: http://127.0.0.1:{port}\n")
    port = free_port()
    config.write_text(config.read_text().replace("{port}", str(port)))
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    (project / "data" / "message.txt").write_text("hello from the working folder\n")
    (project / "job.py").write_text(
        "import os\nprint(open('data/message.txt').read().strip(), 'in', os.getcwd())\n")
    (project / ".git").mkdir()
    (project / ".git" / "secret").write_text("not sent")
    service = Service(config, port)
    service.start()
    try:
        code, out = cli("submit", str(project / "job.py"), "--working-dir", str(project),
                        "--epochs", "1", "--deadline", "1h", "--profile", "one", "--json",
                        token=TOKEN, url=service.url)
        assert code == 0, out
        job = json.loads(out)
        done = wait_for(lambda: (lambda j: j if j["state"] in ("completed", "failed") else None)(
            service.get(f"/jobs/{job['id']}")), timeout=120, what="the job to end")
        assert done["state"] == "completed", done
        log = service.get_text(f"/jobs/{job['id']}/logs")
        uploads = tmp_path / "svc" / "state" / "uploads"
        (copy,) = [u / "tree" for u in uploads.iterdir()]  # the upload's one unpacked folder
        assert f"hello from the working folder in {copy}" in log
        assert not (copy / ".git").exists()  # .git stays home
        code, out = cli("submit", str(tmp_path / "elsewhere.py"), "--working-dir", str(project),
                        "--epochs", "1", "--deadline", "1h", "--profile", "one",
                        token=TOKEN, url=service.url)
        assert code == 2 and "is not inside --working-dir" in out
    finally:
        service.stop()


def test_uploads_are_deleted_once_older_than_upload_ttl_s(tmp_path):
    # they were kept for ever: every `andreas submit --working-dir` left its archive behind
    config = read_service_config(write_service_files(tmp_path, extra="upload_ttl_s: 3600\n"))
    assert config.upload_ttl_s == 3600
    with TestClient(create_app(config, admin_token="admin-secret", run_scheduler=False)) as c:
        def post():
            r = c.post("/uploads", content=archive({"train.py": b"pass\n"}),
                       headers={**ADMIN, "Content-Type": "application/gzip"})
            assert r.status_code == 201, r.text
            return r.json()

        old, recent = post(), post()
        assert 3500 < old["expires_at"] - time.time() <= 3600  # an hour from now
        uploads = config.data_dir / "uploads"
        meta = uploads / old["id"] / "meta.json"  # sent two hours ago
        meta.write_text(json.dumps({**json.loads(meta.read_text()),
                                    "sent_at": old["expires_at"] - 3600 - 7200}))
        job = {"script": "train.py", "epochs": 1, "deadline_s": 60, "profile": "one"}
        # kept until the next upload sweeps, and past it while a waiting job uses it
        user_of_old = c.post("/jobs", headers=ADMIN, json={**job, "working_dir": old["id"]})
        assert user_of_old.status_code == 201
        post()  # sweeps, but the job waits in old's folder
        assert (uploads / old["id"] / "tree" / "train.py").exists()
        with c.app.state.store.session() as s:  # that job ends (no scheduler runs here)
            s.get(JobRow, user_of_old.json()["id"]).state = "cancelled"
        newest = post()  # sweeps
        assert old["id"] not in [p.name for p in uploads.iterdir()]
        assert {recent["id"], newest["id"]} <= {p.name for p in uploads.iterdir()}
        r = c.post("/jobs", headers=ADMIN, json={**job, "working_dir": old["id"]})
        assert r.status_code == 404 and "send the folder again" in r.json()["detail"]
        assert c.post("/jobs", headers=ADMIN, json={**job, "working_dir": recent["id"]}) \
            .status_code == 201


def test_an_archive_of_too_many_members_or_a_file_and_folder_at_once_is_refused(tmp_path):
    from andreas.service import uploads

    config = read_service_config(write_service_files(tmp_path))
    with TestClient(create_app(config, admin_token="admin-secret", run_scheduler=False)) as c:
        def post(body: bytes):
            return c.post("/uploads", content=body, headers={
                **ADMIN, "Content-Type": "application/gzip"})
        # a file, then a folder below it: before, accepted, and the job's submission was a 500
        # when it was unpacked
        clash = post(archive({"a": b"x", "a/b": b"y"}))
        assert clash.status_code == 422, clash.text
        assert "'a/b' is both a file and a folder" in clash.json()["detail"]
        # empty files, one more than the limit (the archive had two million): refused
        # after reading the limit's worth of headers, not all of them
        many = {f"f{i}": b"" for i in range(uploads.MAX_MEMBERS + 1)}
        started = time.monotonic()
        refused = post(archive(many))
        assert refused.status_code == 422, refused.text
        assert f"more than {uploads.MAX_MEMBERS} files and folders" in refused.json()["detail"]
        assert not any((config.data_dir / "uploads").iterdir())  # nothing kept
        assert time.monotonic() - started < 120


def test_a_users_uploads_are_bounded_together(tmp_path):
    # before: no bound per user; one 1 MB upload and a few hundred jobs, each unpacking its
    # own copy, filled a 300 MB data folder
    config = read_service_config(write_service_files(
        tmp_path, extra="max_upload_bytes_per_user: 25000\n"))
    with TestClient(create_app(config, admin_token="admin-secret", run_scheduler=False)) as c:
        def post(size: int, headers=ADMIN):
            return c.post("/uploads", content=archive({"data.bin": b"0" * size}),
                          headers={**headers, "Content-Type": "application/gzip"})
        assert post(20000).status_code == 201
        refused = post(10000)  # 30,000 bytes unpacked together
        assert refused.status_code == 413, refused.text
        assert "your uploads would hold 30000 bytes unpacked; the limit is 25000" in \
            refused.json()["detail"]
        bob = {"Authorization": "Bearer " + c.post("/tokens", headers=ADMIN,
                                                     json={"user": "bob"}).json()["token"]}
        assert post(10000, bob).status_code == 201  # another user's bound is their own
        assert len(list((config.data_dir / "uploads").iterdir())) == 2  # nothing half-kept
