"""Rolling upgrades (issue 30): each engine's schema revision in the
registry, and the oldest engine schema that can run on the database.

``engines.schema_revision`` is the schema an engine was written for
(its HEAD_REVISION), written at every report; engines of releases before
this one never write it, so NULL means older. 'recovery db contract'
reads it to refuse while an engine of an older release is alive.

``schema_floor`` holds one row: the last contract migration applied.
An engine that knows that revision was written for a schema with it, and
runs on the database whatever expand migrations came after it; one that
does not know it predates it, and refuses to start. Each later contract
migration moves it (``recovery.db.migrate``, as it applies one). It
starts at 0006, the last contract migration before this one.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

# Expand: a nullable column and a new table, neither of which the
# previous release reads.
change = "expand"


def upgrade() -> None:
    op.add_column("engines", sa.Column("schema_revision", sa.String(32),
                                       nullable=True))
    floor = op.create_table(
        "schema_floor",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("revision", sa.String(32), nullable=False),
    )
    op.bulk_insert(floor, [{"id": 1, "revision": "0006"}])
