"""Restart priority: each instance's priority and the phase it is
recovered in, so that a resumed run keeps both; and the capacity
warning of its destination.

Journal entries written before this migration have none of the three
(NULL): a run resumed over them reads each instance's priority from its
metadata again.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

# Expand: nullable columns: a run over entries without them reads each
# instance's priority from its metadata again.
change = "expand"


def upgrade() -> None:
    op.add_column("instance_journal",
                  sa.Column("priority", sa.Integer, nullable=True))
    op.add_column("instance_journal",
                  sa.Column("priority_phase", sa.Integer, nullable=True))
    op.add_column("instance_journal",
                  sa.Column("capacity_warning", sa.Text, nullable=True))
