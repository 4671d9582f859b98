"""How many instances a step says it starts on, stored as data (issue
40): ``recover-instances`` announces its count as it starts, and the
views of a run (``recovery notifications watch``) read it from here, no
longer out of the step's message.

Rows written before it (a run in progress across the upgrade, or an
engine of the previous release writing on the expanded schema) have
none: a view then shows the instances as each is told of, without the
ones not started yet, as it does for a step that announces no count.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

# Expand: a nullable column, which the previous release neither reads nor
# writes.
change = "expand"


def upgrade() -> None:
    op.add_column("step_events", sa.Column("instances", sa.Integer,
                                           nullable=True))
