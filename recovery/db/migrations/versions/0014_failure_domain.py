"""The failure domain a host recovery started as part of, so that the
per-window cap counts a domain down as a whole once (issue 29). Rows
from before it have none: each counts alone, as it did.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

# Expand: a nullable column: a recovery without a failure domain counts alone
# in the per-window cap, as it did.
change = "expand"


def upgrade() -> None:
    op.add_column("notifications", sa.Column("failure_domain",
                                             sa.String(255), nullable=True))
