"""Failover segments and their hosts; the method and target of each
instance's recovery.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

from recovery.db.migrations import types

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

# Expand: new tables and a nullable column.
change = "expand"


def upgrade() -> None:
    op.create_table(
        "segments",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("uuid", sa.String(36), nullable=False, unique=True),
        sa.Column("name", sa.String(255), nullable=False, unique=True),
        sa.Column("description", sa.Text),
        sa.Column("recovery_method", sa.String(16), nullable=False),
        sa.Column("service_type", sa.String(255), nullable=False),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("created_at", types.DATETIME, nullable=False),
        sa.Column("updated_at", types.DATETIME, nullable=False),
    )
    op.create_table(
        "hosts",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("uuid", sa.String(36), nullable=False, unique=True),
        sa.Column("name", sa.String(255), nullable=False, unique=True),
        sa.Column("segment_uuid", sa.String(36),
                  sa.ForeignKey("segments.uuid"), nullable=False),
        sa.Column("type", sa.String(255), nullable=False),
        sa.Column("control_attributes", sa.Text, nullable=False),
        sa.Column("reserved", sa.Boolean, nullable=False),
        sa.Column("on_maintenance", sa.Boolean, nullable=False),
        sa.Column("claimed_by", sa.String(36)),
        sa.Column("created_at", types.DATETIME, nullable=False),
        sa.Column("updated_at", types.DATETIME, nullable=False),
    )
    op.create_index("ix_hosts_segment", "hosts", ["segment_uuid"])
    with op.batch_alter_table("instance_journal") as batch:
        batch.add_column(sa.Column("method", sa.String(16)))
