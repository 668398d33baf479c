"""Initial schema: users, tokens, jobs, runs, progress reports.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(100), nullable=False, unique=True),
        sa.Column("role", sa.String(10), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "tokens",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("revoked", sa.Boolean, nullable=False, server_default=sa.false()),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("owner_id", sa.Integer, sa.ForeignKey("users.id"), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("command", sa.JSON, nullable=False),
        sa.Column("workdir", sa.Text, nullable=True),
        sa.Column("epochs", sa.Float, nullable=False),
        sa.Column("submitted_at", sa.Float, nullable=False),
        sa.Column("due_date", sa.Float, nullable=False),
        sa.Column("weight", sa.Float, nullable=False),
        sa.Column("profile_name", sa.String(200), nullable=True),
        sa.Column("inline_profile", sa.JSON, nullable=True),
        sa.Column("state", sa.String(12), nullable=False, index=True),
        sa.Column("epochs_done", sa.Float, nullable=False, server_default="0"),
        sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("first_started_at", sa.Float, nullable=True),
        sa.Column("completed_at", sa.Float, nullable=True),
        sa.Column("message", sa.Text, nullable=True),
        sa.Column("predicted", sa.JSON, nullable=True),
        sa.Column("forecast", sa.JSON, nullable=True),
        sa.Column("speed_factor", sa.Float, nullable=False, server_default="1"),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(40), sa.ForeignKey("jobs.id"), nullable=False,
                  index=True),
        sa.Column("node", sa.String(200), nullable=False),
        sa.Column("gpu_type", sa.String(100), nullable=False),
        sa.Column("gpu_indices", sa.JSON, nullable=False),
        sa.Column("state", sa.String(10), nullable=False, index=True),
        sa.Column("handle", sa.JSON, nullable=True),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("ended_at", sa.Float, nullable=True),
        sa.Column("epochs_at_start", sa.Float, nullable=False),
        sa.Column("epochs_at_end", sa.Float, nullable=True),
        sa.Column("stop_reason", sa.String(20), nullable=True),
        sa.Column("exit_code", sa.Integer, nullable=True),
        sa.Column("energy_j", sa.Float, nullable=True),
        sa.Column("nvml_start_mj", sa.JSON, nullable=True),
    )
    op.create_table(
        "progress",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(40), sa.ForeignKey("jobs.id"), nullable=False,
                  index=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("time", sa.Float, nullable=False),
        sa.Column("epochs_done", sa.Float, nullable=False),
    )


def downgrade() -> None:
    for table in ("progress", "runs", "jobs", "tokens", "users"):
        op.drop_table(table)
