"""Each engine's view of the hosts its liveness probes find silent, for
the detector's fast path: a host fails fast only when a majority of the
live engines see it silent (issue 26).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

from recovery.db.migrations.types import DATETIME

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

# Expand: a new table. The previous release's engines write no views: a
# live one never agrees, so while they run the fast path may need the
# slow one.
change = "expand"


def upgrade() -> None:
    op.create_table(
        "probe_views",
        sa.Column("host", sa.String(255), primary_key=True),
        sa.Column("engine", sa.String(255), primary_key=True),
        sa.Column("silent_since", DATETIME, nullable=False),
        sa.Column("seen_at", DATETIME, nullable=False),
    )
