"""Per-job controls: `preemptible` (false: once started, never paused or moved), `start_asap`
(never held back to save energy), `max_runtime_s` (a wall-time limit: then stopped, state
`timeout`) and `hard_deadline` (refused at submission when the forecast misses the due date).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("preemptible", sa.Boolean(), nullable=False,
                                   server_default=sa.true()))
        batch.add_column(sa.Column("start_asap", sa.Boolean(), nullable=False,
                                   server_default=sa.false()))
        batch.add_column(sa.Column("max_runtime_s", sa.Float(), nullable=True))
        batch.add_column(sa.Column("hard_deadline", sa.Boolean(), nullable=False,
                                   server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        for column in ("hard_deadline", "max_runtime_s", "start_asap", "preemptible"):
            batch.drop_column(column)
