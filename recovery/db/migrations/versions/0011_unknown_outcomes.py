"""Requests whose outcome is unknown: when each instance's last evacuate
was sent, and when one of its locks had an unknown outcome, so that a
resumed run waits out the same window before it sends another evacuate,
and looks for a late lock (issue 33).

Journal entries written before this migration have neither (NULL): a run
resumed over one that was evacuating waits the whole window from its
start, as for an evacuate sent just before.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

from recovery.db.migrations.types import DATETIME

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

# Expand: nullable columns: a run over entries without them waits the whole
# window, as for an evacuate just sent.
change = "expand"


def upgrade() -> None:
    op.add_column("instance_journal",
                  sa.Column("evacuate_sent_at", DATETIME, nullable=True))
    op.add_column("instance_journal",
                  sa.Column("lock_uncertain_at", DATETIME, nullable=True))
