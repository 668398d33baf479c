"""The service's durable state, as SQLAlchemy tables (SQLite by default, PostgreSQL too).

Times are Unix seconds (floats) so that both engines store them the same way. The schema is
created and changed only by the Alembic migrations in `andreas/service/migrations`.
"""

from __future__ import annotations

from pathlib import Path  # noqa: F401  (the type comment of JobRow.upload)
from typing import Any

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class User(Base):
    __tablename__ = "users"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    role: Mapped[str] = mapped_column(String(10))  # admin | user
    created_at: Mapped[float] = mapped_column(Float)


class Token(Base):
    """An API token, kept only as its SHA-256 (tokens are 256-bit random, so a fast hash
    is enough: nothing to brute-force)."""

    __tablename__ = "tokens"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[float] = mapped_column(Float)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
    expires_at: Mapped[float | None] = mapped_column(Float, nullable=True)  # None: never

    def valid(self, now: float) -> bool:
        return not self.revoked and (self.expires_at is None or now < self.expires_at)


class JobRow(Base):
    __tablename__ = "jobs"
    __table_args__ = (Index("ix_jobs_owner_idempotency_key", "owner_id", "idempotency_key",
                            unique=True),)
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    name: Mapped[str] = mapped_column(String(200))
    command: Mapped[list] = mapped_column(JSON)
    workdir: Mapped[str | None] = mapped_column(Text, nullable=True)
    epochs: Mapped[float] = mapped_column(Float)
    submitted_at: Mapped[float] = mapped_column(Float)
    due_date: Mapped[float] = mapped_column(Float)
    weight: Mapped[float] = mapped_column(Float)
    profile_name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    inline_profile: Mapped[list | None] = mapped_column(JSON, nullable=True)
    # queued (never ran) | running | paused (ran, waiting) | completed | failed | cancelled
    # | timeout (stopped at its max_runtime_s)
    state: Mapped[str] = mapped_column(String(12), index=True)
    epochs_done: Mapped[float] = mapped_column(Float, default=0.0)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    first_started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    completed_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    message: Mapped[str | None] = mapped_column(Text, nullable=True)
    # the cost predicted when the job was first planned, and the latest forecast
    predicted: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    forecast: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    # learned seconds-per-epoch correction (measured / profiled), see service.learning
    speed_factor: Mapped[float] = mapped_column(Float, default=1.0)
    # learned start-up (s) of its runs, None until one reported (migration 0006)
    startup_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    # learned spread of its speed (a share), None until three report pairs (migration 0006)
    speed_spread: Mapped[float | None] = mapped_column(Float, nullable=True)
    # report pairs behind its learned speed, None until it reported (migration 0008)
    speed_pairs: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # the client's Idempotency-Key: a retried submission returns this job (unique per owner)
    idempotency_key: Mapped[str | None] = mapped_column(String(200), nullable=True)
    # per-job controls (migration 0004)
    preemptible: Mapped[bool] = mapped_column(Boolean, default=True)
    start_asap: Mapped[bool] = mapped_column(Boolean, default=False)
    max_runtime_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    hard_deadline: Mapped[bool] = mapped_column(Boolean, default=False)
    # not a column: an uploaded working folder, unpacked once the job has an id (jobs.accept)
    upload = None  # type: Path | None


class RunRow(Base):
    """One start of a job on one node and GPU set, from start to stop or exit."""

    __tablename__ = "runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), index=True)
    node: Mapped[str] = mapped_column(String(200))
    gpu_type: Mapped[str] = mapped_column(String(100))
    gpu_indices: Mapped[list] = mapped_column(JSON)
    # starting (recorded, maybe not yet spawned) | running | ended
    state: Mapped[str] = mapped_column(String(10), index=True)
    handle: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    token_hash: Mapped[str] = mapped_column(String(64))
    started_at: Mapped[float] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    epochs_at_start: Mapped[float] = mapped_column(Float)
    epochs_at_end: Mapped[float | None] = mapped_column(Float, nullable=True)
    stop_reason: Mapped[str | None] = mapped_column(String(20), nullable=True)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    energy_j: Mapped[float | None] = mapped_column(Float, nullable=True)  # NVML, if measured
    nvml_start_mj: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    # a gang's other nodes, rank 1 on: [{"node": name, "gpu_indices": [...]}, ...]; None for
    # a run on one node (`node` and `gpu_indices` are rank 0's)
    more_nodes: Mapped[list | None] = mapped_column(JSON, nullable=True)


def run_places(run: Any) -> list[tuple[str, list[int]]]:
    """Where a run (a RunRow, or a row of its columns) holds GPUs: (node, GPU indices) per
    node, rank 0's first; one pair for a run on one node."""
    return [(run.node, list(run.gpu_indices))] + [
        (p["node"], list(p["gpu_indices"])) for p in (run.more_nodes or ())]


class ProgressRow(Base):
    """A progress report: the evidence the online estimator learns from."""

    __tablename__ = "progress"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), index=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"))
    time: Mapped[float] = mapped_column(Float)
    epochs_done: Mapped[float] = mapped_column(Float)


class DrainedNode(Base):
    """A node an admin drained: its jobs finish or move, nothing new starts there."""

    __tablename__ = "drained_nodes"
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    since: Mapped[float] = mapped_column(Float)
    by_user: Mapped[str] = mapped_column(String(100))

