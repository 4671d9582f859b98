"""The safety gates' state: the arming switch, and when each recovery
started (the per-window brake counts them).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

from recovery.db.migrations import types

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# Expand: a nullable column and a new table: the previous release never
# reads them (nor honours the arming switch: disarm before upgrading).
change = "expand"


def upgrade() -> None:
    with op.batch_alter_table("notifications") as batch:
        batch.add_column(sa.Column("started_at", types.DATETIME))
    op.create_table(
        "arming",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("armed", sa.Boolean, nullable=False),
        sa.Column("changed_by", sa.String(255), nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("changed_at", types.DATETIME, nullable=False),
    )
