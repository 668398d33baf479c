"""Drained nodes: an operator's `andreas drain NODE` (POST /nodes/{name}/drain) lets the jobs
there finish or move and starts nothing new there, across restarts, until undrained.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("drained_nodes",
                    sa.Column("name", sa.String(200), primary_key=True),
                    sa.Column("since", sa.Float(), nullable=False),
                    sa.Column("by_user", sa.String(100), nullable=False))


def downgrade() -> None:
    op.drop_table("drained_nodes")
