"""The operator's decision log: one row per decision or state change
(received, held, claimed, fenced, an instance recovered or failed, the
run's end...), with who made it and why.

``notification_uuid`` is NULL for what comes before any notification
(the detector's suspects). Listed by time (``since``) and per
notification, in id order.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

from recovery.db.migrations import types

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# Expand: a new table: the previous release logs no decisions.
change = "expand"


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("notification_uuid", sa.String(36),
                  sa.ForeignKey("notifications.uuid"), nullable=True),
        sa.Column("created_at", types.DATETIME, nullable=False),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("subject", sa.String(300), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
    )
    op.create_index("ix_events_created_at", "events", ["created_at"])
    op.create_index("ix_events_notification", "events",
                    ["notification_uuid", "id"])
