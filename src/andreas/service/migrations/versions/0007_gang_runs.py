"""A run of a gang (a job over several nodes, docs/gangs.md) holds GPUs on each of its nodes:
`more_nodes` lists the nodes after rank 0's with their GPU indices (`db.run_places`); a run on
one node leaves it empty.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06
"""
import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("more_nodes", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("more_nodes")
