"""Several engines on one database: the engine registry, and the lock row
that serializes claims.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

from recovery.db.migrations import types

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# Contract: the claims lock row serializes claims from here on: an engine of
# the previous release claims without it, so it cannot share the
# database with engines that take it.
change = "contract"


def upgrade() -> None:
    op.create_table(
        "engines",
        sa.Column("name", sa.String(255), primary_key=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("started_at", types.DATETIME, nullable=False),
        sa.Column("last_seen", types.DATETIME, nullable=False),
    )
    locks = op.create_table(
        "locks",
        sa.Column("name", sa.String(64), primary_key=True),
    )
    op.bulk_insert(locks, [{"name": "claims"}])
