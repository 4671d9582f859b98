"""Each journal entry's project: the instance's owner, as Nova named it
(issue 43). The API shows an instance's owner its vmoves, and the
notifications they belong to, when the policy's
``recovery_api:owner:read`` lets them.

Entries written before it (and by an engine of the previous release on
the expanded schema) have none: no owner sees them.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

# Expand: a nullable column and an index on it, which the previous
# release neither reads nor writes.
change = "expand"


def upgrade() -> None:
    op.add_column("instance_journal", sa.Column("project_id", sa.String(64),
                                                nullable=True))
    op.create_index("ix_instance_journal_project_id", "instance_journal",
                    ["project_id"])
