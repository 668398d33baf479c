"""The store's concurrency: a fair lock, and submissions committed in groups."""

import threading
import time

import pytest

from andreas.service.db import JobRow
from andreas.service.group_commit import GroupCommit
from andreas.service.store import FairLock, Store

# real services, engines or processes: make test runs these, make test-fast does not
pytestmark = pytest.mark.service


def test_the_fair_lock_is_granted_in_the_order_asked_and_is_reentrant():
    lock = FairLock()
    order: list[int] = []
    lock.__enter__()
    with lock:  # re-entrant: no deadlock
        pass
    threads = []
    for i in range(8):
        t = threading.Thread(target=lambda i=i: (lock.__enter__(), order.append(i),
                                                 lock.__exit__()))
        t.start()
        threads.append(t)
        while len(lock._waiting) < i + 1:  # each asks after the one before
            time.sleep(0.001)
    lock.__exit__()
    for t in threads:
        t.join(timeout=30)
    assert order == list(range(8))


def _job(job_id: str, key: str | None = None) -> JobRow:
    return JobRow(id=job_id, owner_id=1, name=job_id, command=["true"], epochs=1.0,
                  submitted_at=0.0, due_date=10.0, weight=0.0, profile_name="p",
                  state="queued", epochs_done=0.0, cancel_requested=False, speed_factor=1.0,
                  idempotency_key=key)


def test_a_group_commits_together_and_one_failure_fails_only_its_caller(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/a.db")
    store.create_token("u", "user")
    group = GroupCommit(store)
    release = threading.Event()
    results: dict[str, object] = {}

    def blocker(s):  # holds the writer, so the next pieces queue up into one group
        release.wait(timeout=30)
        s.add(_job("first"))
        return "first"

    def add(job_id: str, key: str | None = None):
        def work(s):
            if job_id == "bad":
                raise ValueError("bad piece")
            s.add(_job(job_id, key))
            s.flush()
            return job_id
        return work

    def call(name, work):
        try:
            results[name] = group.run(work)
        except Exception as exc:
            results[name] = exc

    first = threading.Thread(target=call, args=("first", blocker))
    first.start()
    time.sleep(0.05)
    rest = [threading.Thread(target=call, args=(n, add(n))) for n in ("a", "bad", "b")]
    for t in rest:
        t.start()
    while group._queue.qsize() < 3:
        time.sleep(0.01)
    release.set()
    for t in [first, *rest]:
        t.join(timeout=30)
    group.close()
    assert results["first"] == "first" and results["a"] == "a" and results["b"] == "b"
    assert isinstance(results["bad"], ValueError)
    with store.session() as s:
        assert sorted(s.scalars(JobRow.__table__.select().with_only_columns(JobRow.id))) \
            == ["a", "b", "first"]


def test_a_taken_key_in_a_group_fails_only_that_piece(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/a.db")
    store.create_token("u", "user")
    with store.session() as s:
        s.add(_job("old", key="k"))
    group = GroupCommit(store)

    def add(job_id, key):
        def work(s):
            s.add(_job(job_id, key))
            s.flush()
            return job_id
        return work

    assert group.run(add("new", "other")) == "new"
    from sqlalchemy.exc import IntegrityError

    with pytest.raises(IntegrityError):
        group.run(add("dup", "k"))
    group.close()


def test_a_libpq_url_opens_postgresql_with_the_psycopg_driver(pg_server):
    """`postgresql://` (as psql, hosts and pgserver print it) and `postgres://` get the psycopg
    3 driver: SQLAlchemy's default for them, psycopg2, is not installed."""
    from andreas.service.store import engine_url

    assert engine_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert engine_url("postgresql://u@h:5/db") == "postgresql+psycopg://u@h:5/db"
    for kept in ("postgresql+psycopg://u@h/db", "sqlite:///x.db", "sqlite:///postgresql://"):
        assert engine_url(kept) == kept
    pg_server.psql("CREATE DATABASE libpq_url;")
    store = Store(pg_server.get_uri("libpq_url"))
    try:
        assert store.engine.url.drivername == "postgresql+psycopg"
        store.create_token("alice")
    finally:
        store.close()
