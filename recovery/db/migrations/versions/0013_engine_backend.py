"""Each engine's concurrency backend, in the registry, for 'recovery
status' (issue 27). Engines that registered before it show none until
they report themselves again.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

# Expand: a nullable column the previous release never writes.
change = "expand"


def upgrade() -> None:
    op.add_column("engines", sa.Column("backend", sa.String(16),
                                       nullable=True))
