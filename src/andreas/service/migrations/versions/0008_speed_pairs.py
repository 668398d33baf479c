"""How many pairs of progress reports back a job's learned speed (service.learning.SpeedEvidence
.pairs): with its spread it gives the learned speed's standard error, which a plan switch
must outweigh (planner.Planner.gain_needed). None on jobs that reported before this column.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-07
"""
import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("speed_pairs", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("speed_pairs")
