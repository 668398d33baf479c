"""Jobs take an optional idempotency key, unique per owner: a client that retries a
submission after a crash or a lost answer gets the job it already made, not a second one.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("idempotency_key", sa.String(200), nullable=True))
    op.create_index("ix_jobs_owner_idempotency_key", "jobs", ["owner_id", "idempotency_key"],
                    unique=True)


def downgrade() -> None:
    op.drop_index("ix_jobs_owner_idempotency_key", table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("idempotency_key")
