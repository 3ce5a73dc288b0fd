"""conversions.gpu_results: the accepted GPU result folder a run awaiting a GPU
is to be completed from (run-relative), until its completion has run.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("conversions") as batch:
        batch.add_column(sa.Column("gpu_results", sa.String(length=500), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("conversions") as batch:
        batch.drop_column("gpu_results")
