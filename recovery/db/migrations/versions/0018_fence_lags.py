"""The lag of each fencing device, learned from its past fencings (issue
42): a BMC that starts its power-off delay anew on each request it
receives is not sent a second one before its lag has passed
(``recovery.pacing``). Every engine sharing the database, and every
later run, paces a device the same way.

A device fenced before it (or by an engine of the previous release on
the expanded schema) has no lag learned: it is paced as before, each
request with an equal share of the fencing's timeout.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

from recovery.db.migrations.types import DATETIME

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

# Expand: a new table, which the previous release neither reads nor
# writes.
change = "expand"


def upgrade() -> None:
    op.create_table(
        "fence_lags",
        sa.Column("device", sa.String(255), primary_key=True),
        sa.Column("host", sa.String(255), nullable=False),
        # Double precision: MySQL's plain FLOAT is single.
        sa.Column("longest", sa.Float(precision=53), nullable=False),
        sa.Column("last", sa.Float(precision=53), nullable=False),
        sa.Column("fencings", sa.Integer, nullable=False),
        sa.Column("updated_at", DATETIME, nullable=False),
    )
