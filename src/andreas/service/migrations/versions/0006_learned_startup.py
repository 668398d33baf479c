"""What the service learns of a job beside its speed: its start-up, seconds from a run's
launch to its first progress report less the epochs that report counts
(service.learning.startup_s), which its forecasts and restarts use instead of its profile's or
the cluster's overhead; and how much its speed varies (service.learning.speed_spread), which
its forecast's range takes.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-06
"""
import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("startup_s", sa.Float(), nullable=True))
        batch.add_column(sa.Column("speed_spread", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("speed_spread")
        batch.drop_column("startup_s")
