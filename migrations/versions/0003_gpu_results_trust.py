"""conversions.gpu_results_trust: who sent the GPU results a run was finished from
(a GPU worker of the service, or a user: then the run can never PASS).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("conversions") as batch:
        batch.add_column(sa.Column("gpu_results_trust", sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("conversions") as batch:
        batch.drop_column("gpu_results_trust")
