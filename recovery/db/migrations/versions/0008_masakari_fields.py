"""Fields Masakari's API shows that the store did not keep: when each
instance's journal entry was first written (a vmove's created_at), and
a notification's failover segment (failover_segment_uuid).

Journal entries written before this migration get their last update's
time, the closest the store knows; older notifications have no segment.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

from recovery.db.migrations.types import DATETIME

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

# Expand: nullable columns: entries the previous release writes show no
# created_at, notifications no segment.
change = "expand"


def upgrade() -> None:
    op.add_column("instance_journal",
                  sa.Column("created_at", DATETIME, nullable=True))
    op.execute("UPDATE instance_journal SET created_at = updated_at")
    op.add_column("notifications", sa.Column(
        "failover_segment_uuid", sa.String(36), nullable=True))
