"""The detector's one-notification rule: each host failure it sees is
named by the host and the service's last heartbeat, and a unique index
lets one engine store it, however many engines see it at once.

NULL for every notification the detector did not make: NULLs never
collide in a unique index, on SQLite, PostgreSQL and MariaDB/MySQL alike.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

# Expand: a nullable column and its unique index; the previous release never
# writes it (NULLs never collide).
change = "expand"


def upgrade() -> None:
    op.add_column("notifications",
                  sa.Column("detection", sa.String(300), nullable=True))
    op.create_index("ux_notifications_detection", "notifications",
                    ["detection"], unique=True)
