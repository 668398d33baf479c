"""Open the database, migrate it, and keep users and API tokens.

`Store` owns the SQLAlchemy engine. Every write the scheduler and the API make is a short
transaction committed before the action it records is taken (start a process, signal one), so
that a service killed at any moment finds, on restart, a record of everything it set in motion.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections import deque
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, TypeVar

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, event, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from ...errors import AndreasError
from ..db import DrainedNode, JobRow, Token, User
from ..folders import ensure_writable, sqlite_folder
from ..group_commit import GroupCommit
from ..states import ACTIVE_STATES

MIGRATIONS = Path(__file__).parent.parent / "migrations"
ROLES = ("admin", "user")
# ids per `IN (...)` in one statement: SQLite refuses more than 32,766 parameters (999 before
# 3.32), and a long queue has more jobs than that
IN_BATCH = 900


def in_batches(ids: list[str]) -> Iterator[list[str]]:
    """`ids` in slices of IN_BATCH, one `IN (...)` statement each."""
    for start in range(0, len(ids), IN_BATCH):
        yield ids[start:start + IN_BATCH]


Row = TypeVar("Row")


def must_get(s: Session, model: type[Row], key: object) -> Row:
    """The row of `model` with primary key `key`, which the caller knows exists (it read its
    id in the same transaction, and jobs and runs are never deleted)."""
    row = s.get(model, key)
    if row is None:
        raise LookupError(f"{getattr(model, '__tablename__', model)} {key!r} vanished")
    return row


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return "andr_" + secrets.token_urlsafe(32)


def engine_url(url: str) -> str:
    """`url` as SQLAlchemy needs it: a libpq URL (`postgresql://...` or `postgres://...`, as
    psql and most hosts print them) gets the psycopg 3 driver we install; any other URL is
    kept as given."""
    for scheme in ("postgresql://", "postgres://"):
        if url.startswith(scheme):
            return "postgresql+psycopg://" + url[len(scheme):]
    return url


def make_engine(url: str) -> Engine:
    url = engine_url(url)
    if url.startswith("sqlite"):
        folder = sqlite_folder(url)
        if folder is not None:
            ensure_writable(folder, "the SQLite database's folder",
                            "make it writable or point database_url elsewhere")
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_connection, _record):
            # WAL with synchronous=FULL: every commit is on disk before the API answers, so an
            # acknowledged job survives a power cut too, not only a kill -9 (NORMAL's promise).
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=FULL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()
        return engine
    return create_engine(url, pool_pre_ping=True)


class FairLock:
    """A re-entrant lock granted in the order it was asked for. `threading.RLock` is not
    fair: under a steady stream of requests the scheduler's thread could wait for it until
    the stream ended, and no job would start meanwhile."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._waiting: deque[tuple[int, threading.Lock]] = deque()
        self._owner: int | None = None
        self._depth = 0

    def __enter__(self) -> "FairLock":
        me = threading.get_ident()
        with self._mutex:
            if self._owner == me:
                self._depth += 1
                return self
            if self._owner is None:
                self._owner, self._depth = me, 1
                return self
            gate = threading.Lock()
            gate.acquire()
            self._waiting.append((me, gate))
        gate.acquire()  # the last owner hands the lock over: self._owner is now me
        return self

    def __exit__(self, *exc: object) -> None:
        with self._mutex:
            self._depth -= 1
            if self._depth:
                return
            if self._waiting:
                self._owner, gate = self._waiting.popleft()
                self._depth = 1
                gate.release()
            else:
                self._owner = None


class Store:
    def __init__(self, url: str) -> None:
        self.url = url
        try:
            self.engine = make_engine(url)
            self.migrate()
        except AndreasError:
            raise
        except Exception as exc:  # a bad URL, an unreachable server: say which, no traceback
            raise AndreasError(f"cannot open the database {self.safe_url}: "
                               f"{type(exc).__name__}: {str(exc).splitlines()[0]}") from None
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)
        # SQLite lets one connection write at a time and makes the others sleep and retry
        # (1, 2, 5, ... 100 ms): under concurrent requests those sleeps were most of the
        # latency. One lock, taken for every transaction, queues them here instead, where
        # the next one goes the moment the last commits. PostgreSQL needs none.
        self._serial = FairLock() if url.startswith("sqlite") else None
        self._known: dict[str, tuple[float, User, float | None]] = {}  # token hash -> user
        self.group = GroupCommit(self)  # submissions: one transaction for those that arrive

    @property
    def safe_url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True) if hasattr(self, "engine") \
            else self.url.split("@")[-1]

    def migrate(self) -> None:
        """Bring the schema to the newest Alembic revision (idempotent)."""
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        with self.engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")

    @contextmanager
    def session(self) -> Iterator[Session]:
        if self._serial is None:
            with self.sessions() as session, session.begin():
                yield session
            return
        with self._serial, self.sessions() as session, session.begin():
            yield session

    # ------------------------------------------------------------------ users and tokens
    def create_token(self, user: str, role: str = "user",
                     expires_at: float | None = None) -> tuple[int, str]:
        """Create the user if needed and a new token for it (shown once, kept hashed), valid
        until `expires_at` (Unix time; None: until revoked). Returns its id and the token."""
        if role not in ROLES:
            raise AndreasError(f"unknown role {role!r}; expected admin or user")
        token = new_token()
        with self.session() as s:
            row = _user(s, user, role)
            if row.role != role:
                raise AndreasError(f"user {user!r} exists with role {row.role!r}, not {role!r}")
            entry = Token(user_id=row.id, token_hash=hash_token(token), created_at=time.time(),
                          expires_at=expires_at)
            s.add(entry)
            s.flush()
            return entry.id, token

    def ensure_token(self, user: str, role: str, token: str) -> None:
        """Register a token chosen by the operator (e.g. from an environment variable)."""
        with self.session() as s:
            row = _user(s, user, role)
            digest = hash_token(token)
            if s.scalar(select(Token).where(Token.token_hash == digest)) is None:
                s.add(Token(user_id=row.id, token_hash=digest, created_at=time.time()))

    TOKEN_CACHE_S = 5.0

    def user_for(self, token: str) -> User | None:
        """The user a token belongs to; None for an unknown, revoked or expired token.

        Every request asks, so a valid token's answer is kept for `TOKEN_CACHE_S` seconds:
        a token revoked through this service is refused from its next request on (revoking
        clears the cache); one revoked in the database behind the service's back, within
        that time. Its expiry is checked at every request."""
        known, user = self.cached_user(token)
        if known:
            return user
        digest, now = hash_token(token), time.time()
        with self.session() as s:
            row = s.scalar(select(Token).where(Token.token_hash == digest))
            if row is None or not row.valid(now):
                return None
            user = must_get(s, User, row.user_id)
        if len(self._known) > 10_000:
            self._known.clear()
        self._known[digest] = (now + self.TOKEN_CACHE_S, user, row.expires_at)
        return user

    def cached_user(self, token: str) -> tuple[bool, User | None]:
        """(True, what `user_for` answers) when the answer is kept from a recent lookup,
        (False, None) when only the database can tell: an answer without a query, for
        callers that must not wait on the database (the API's event loop)."""
        now = time.time()
        cached = self._known.get(hash_token(token))
        if cached is None or now >= cached[0]:
            return False, None
        user, expires_at = cached[1], cached[2]
        return True, (user if expires_at is None or now < expires_at else None)

    def tokens(self, user_id: int | None = None) -> list[tuple[Token, User]]:
        """Every token (of one user when `user_id` is given) with its user, oldest first."""
        with self.session() as s:
            query = select(Token, User).join(User, Token.user_id == User.id).order_by(Token.id)
            if user_id is not None:
                query = query.where(Token.user_id == user_id)
            return [(t, u) for t, u in s.execute(query)]

    def revoke_token(self, token_id: int, user_id: int | None = None) -> tuple[Token, User] | None:
        """Revoke a token (one of `user_id`'s when given); None when there is no such token.
        A revoked token is refused from the next request on."""
        with self.session() as s:
            row = s.get(Token, token_id)
            if row is None or (user_id is not None and row.user_id != user_id):
                return None
            row.revoked = True
            owner = must_get(s, User, row.user_id)
        self._known.clear()  # after the commit: no request can cache it valid again
        return row, owner

    def active_workdirs(self) -> set[str]:
        """The working folders of the jobs that wait or run (an upload they use is kept)."""
        with self.session() as s:
            return {w for w in s.scalars(select(JobRow.workdir).where(
                JobRow.state.in_(ACTIVE_STATES), JobRow.workdir.is_not(None))) if w}

    # ------------------------------------------------------------------ drained nodes
    def drained_nodes(self) -> dict[str, tuple[float, str]]:
        """Drained node -> (since when, by whom)."""
        with self.session() as s:
            return {d.name: (d.since, d.by_user) for d in s.scalars(select(DrainedNode))}

    def set_drained(self, node: str, drained: bool, by: str) -> None:
        with self.session() as s:
            row = s.get(DrainedNode, node)
            if drained and row is None:
                s.add(DrainedNode(name=node, since=time.time(), by_user=by))
            elif not drained and row is not None:
                s.delete(row)

    def close(self) -> None:
        self.group.close()
        self.engine.dispose()


def _user(s: Session, name: str, role: str) -> User:
    """The user called `name`, created with `role` if new."""
    row = s.scalar(select(User).where(User.name == name))
    if row is None:
        row = User(name=name, role=role, created_at=time.time())
        s.add(row)
        s.flush()
    return row
