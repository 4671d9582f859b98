"""Each notification's kind in its own column, decided at intake, so that
nothing reads a payload again to find out what a notification is.

The backfill decides the kind of the rows already stored as the code did
until now: VM is an instance failure, PROCESS a process failure, and
COMPUTE_HOST a host failure unless its payload's event is STARTED (a host
return). The rules are written out here, not imported: a migration must
do the same thing whatever the code becomes later.

The column stays nullable: on SQLite, NOT NULL on an added column means
rebuilding the table, and dropping the old one fails while the step
events and the journal refer to it (the store turns foreign keys on, and
they cannot be turned off inside the migration's transaction). The store
writes the kind of every notification it adds.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

import json

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# Contract: the previous release stores notifications without a kind, which
# this one cannot read (the column is always written from here on).
change = "contract"

_BY_TYPE = {"VM": "instance", "PROCESS": "process",
            "COMPUTE_HOST": "host_failure"}
# Rows per UPDATE of the host returns: far below any database's limit on
# the parameters of one statement.
_CHUNK = 500

notifications = sa.table(
    "notifications", sa.column("id", sa.Integer),
    sa.column("type", sa.String), sa.column("payload", sa.Text),
    sa.column("kind", sa.String))


def upgrade() -> None:
    with op.batch_alter_table("notifications") as batch:
        batch.add_column(sa.Column("kind", sa.String(16)))
    for type_, kind in _BY_TYPE.items():
        op.execute(notifications.update().where(
            notifications.c.type == type_).values(kind=kind))
    _backfill_host_returns(op.get_bind())


def _backfill_host_returns(conn: sa.engine.Connection) -> None:
    """The event is inside the JSON payload, which no portable SQL reads:
    read it here, then update by id."""
    rows = conn.execute(sa.select(
        notifications.c.id, notifications.c.payload).where(
            notifications.c.type == "COMPUTE_HOST"))
    returns = [r.id for r in rows
               if json.loads(r.payload).get("event") == "STARTED"]
    for start in range(0, len(returns), _CHUNK):
        conn.execute(notifications.update().where(
            notifications.c.id.in_(returns[start:start + _CHUNK])).values(
                kind="host_return"))
