"""Notifications, step events and the per-instance journal.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

from recovery.db.migrations import types

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# Expand: the first schema: no engine ran before it.
change = "expand"


def upgrade() -> None:
    op.create_table(
        "notifications",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("uuid", sa.String(36), nullable=False, unique=True),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("hostname", sa.String(255), nullable=False),
        sa.Column("source_host_uuid", sa.String(36)),
        sa.Column("generated_time", types.DATETIME, nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("origin", sa.String(8), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("message", sa.Text),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("next_attempt_at", types.DATETIME),
        sa.Column("owner", sa.String(255)),
        sa.Column("lease_until", types.DATETIME),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("created_at", types.DATETIME, nullable=False),
        sa.Column("updated_at", types.DATETIME, nullable=False),
    )
    op.create_index("ix_notifications_status", "notifications", ["status"])
    op.create_index("ix_notifications_hostname_status", "notifications",
                    ["hostname", "status"])
    op.create_table(
        "step_events",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("notification_uuid", sa.String(36),
                  sa.ForeignKey("notifications.uuid"), nullable=False),
        sa.Column("step", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("progress", sa.Float, nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("created_at", types.DATETIME, nullable=False),
    )
    op.create_index("ix_step_events_notification", "step_events",
                    ["notification_uuid"])
    op.create_table(
        "instance_journal",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("notification_uuid", sa.String(36),
                  sa.ForeignKey("notifications.uuid"), nullable=False),
        sa.Column("instance_uuid", sa.String(36), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("source_host", sa.String(255), nullable=False),
        sa.Column("dest_host", sa.String(255)),
        sa.Column("original_state", sa.String(16), nullable=False),
        sa.Column("final_state", sa.String(16)),
        sa.Column("phase", sa.String(16), nullable=False),
        sa.Column("outcome", sa.String(16)),
        sa.Column("reason", sa.Text),
        sa.Column("locked_by_us", sa.Boolean, nullable=False),
        sa.Column("migration_floor", sa.Integer),
        sa.Column("started_at", types.DATETIME),
        sa.Column("finished_at", types.DATETIME),
        sa.Column("updated_at", types.DATETIME, nullable=False),
        sa.UniqueConstraint("notification_uuid", "instance_uuid",
                            name="uq_journal_notification_instance"),
    )
