"""Expand and contract: 'recovery db upgrade' applies the pending
migrations up to the first contract one (or all of them, for a store no
other engine shares); 'recovery db contract' applies the rest, once no
engine of an older release is alive. Which migration is which, and what
an engine may run on, is ``recovery.db.revisions``'.

Every run holds the upgrade lock and migrates in one transaction, and
moves the database's floor (the last contract migration applied) with
the contract migrations it applies.
"""

import contextlib
import dataclasses
import time
from collections.abc import Callable
from collections.abc import Iterator

import sqlalchemy as sa

from recovery import exception
from recovery.db import control
from recovery.db import revisions
from recovery.db.revisions import Migration
from recovery.db.revisions import next_contract
from recovery.db.revisions import pending
from recovery.db.tables import schema_floor

# Serializes 'recovery db upgrade' runs on a server database.
UPGRADE_LOCK = "recovery-db-upgrade"
UPGRADE_LOCK_WAIT = 60
_PG_UPGRADE_LOCK_KEY = 0x7265636F76657279  # "recovery"

# Picks the revision a run migrates to, from the chain and the current
# revision, in the run's transaction.
Target = Callable[[sa.engine.Connection, list[Migration], str | None], str]


@dataclasses.dataclass(frozen=True)
class Migrated:
    """What 'recovery db upgrade' or 'contract' did: the revisions before
    and after, and the contract migration it stopped before (None when it
    reached this version's head)."""

    before: str | None
    after: str
    stopped_before: str | None = None


class OlderEngines(exception.RecoveryError):
    """'recovery db contract' refused: engines of an older release are
    alive, and would be left on a schema they cannot run on."""


def upgrade(engine: sa.engine.Engine, *,
            expand_only: bool = False) -> Migrated:
    """Create the schema or upgrade it, one upgrade at a time: to this
    version's head, or ('recovery db upgrade' on a shared database:
    ``expand_only``) up to its first pending contract migration, which
    the engines still running may not run on."""
    if revisions.is_current(engine):
        return Migrated(revisions.HEAD_REVISION, revisions.HEAD_REVISION)

    def target(conn: sa.engine.Connection, chain: list[Migration],
               current: str | None) -> str:
        if expand_only:
            return revisions.upgrade_target(chain, current)
        return revisions.HEAD_REVISION

    return _migrate(engine, target)


def contract(engine: sa.engine.Engine, live_within: float) -> Migrated:
    """'recovery db contract': the upgrade's last step, which applies
    every pending migration, once no engine of an older release is alive
    (seen within ``live_within`` seconds, as the registry judges it).
    While one is, it refuses (OlderEngines), even with nothing pending: an
    operator finishes a rolling upgrade with it once every engine runs
    the new release, whatever the release's migrations are."""

    def target(conn: sa.engine.Connection, chain: list[Migration],
               current: str | None) -> str:
        older = control.older_engines(
            conn, live_within,
            {m.revision for m in chain} - {revisions.HEAD_REVISION})
        if older:
            raise OlderEngines(_older_message(older, live_within))
        return revisions.HEAD_REVISION

    return _migrate(engine, target)


def _older_message(older: list[control.EngineRecord],
                   live_within: float) -> str:
    named = "; ".join(
        f"{e.name} on {e.host}, last seen {e.last_seen:%Y-%m-%d %H:%M:%S} "
        f"UTC ({e.silent_for:.0f} s ago)" for e in older)
    return (f"{len(older)} engine(s) of an older release alive, which "
            f"could not run on the contracted schema: {named}. Upgrade "
            f"each to this release (one at a time) or stop it, then run "
            f"'recovery db contract' again. An engine that stopped without "
            f"a clean shutdown counts as alive for {live_within:g} s "
            f"([engine] lease_seconds) after it was last seen")


def _migrate(engine: sa.engine.Engine, target: Target) -> Migrated:
    """Upgrade to the revision ``target`` picks, under the upgrade lock,
    in one transaction: the floor moves with the contract migrations.
    It moves first: on MySQL and MariaDB each DDL statement commits on
    its own, and a run cut short after a contract migration must leave
    the floor past it, so that the older engines refuse the schema
    rather than run on it."""
    from alembic import command as alembic_command
    from alembic.runtime.migration import MigrationContext

    config = revisions.alembic_config()
    chain = revisions.migrations()
    with engine.begin() as conn, _upgrade_lock(conn):
        before = MigrationContext.configure(conn).get_current_revision()
        if before is not None and before not in [m.revision for m in chain]:
            raise exception.SchemaMismatch(
                f"the database schema is at revision {before}, newer than "
                f"this recovery's {revisions.HEAD_REVISION}: upgrade "
                f"recovery on this controller")
        after = target(conn, chain, before)
        if after != before:
            contracts = [m.revision for m in pending(chain, before)
                         if m.contracts
                         and m not in pending(chain, after)]
            # Before 0015 there is no floor yet: 0015 makes it, during
            # this run, and it is moved once that has run.
            moved = bool(contracts) and revisions.read_floor(conn) is not None
            if moved:
                _move_floor(conn, contracts[-1])
            config.attributes["connection"] = conn
            alembic_command.upgrade(config, after)
            if (contracts and not moved
                    and revisions.read_floor(conn) is not None):
                _move_floor(conn, contracts[-1])
    return Migrated(before, after, next_contract(chain, after))


def _move_floor(conn: sa.engine.Connection, revision: str) -> None:
    conn.execute(schema_floor.update().where(
        schema_floor.c.id == 1).values(revision=revision))


@contextlib.contextmanager
def _upgrade_lock(conn: sa.engine.Connection) -> Iterator[None]:
    """Two 'recovery db upgrade' runs never migrate at once. SQLite's
    BEGIN IMMEDIATE already serializes them; PostgreSQL's lock ends with
    the transaction; MySQL's is the session's, released here."""
    backend = conn.dialect.name
    if backend == "postgresql":
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(
            _PG_UPGRADE_LOCK_KEY)))
    if backend not in ("mysql", "mariadb"):
        yield
        return
    deadline = time.monotonic() + UPGRADE_LOCK_WAIT
    # Short waits: each stays within the connection's read timeout.
    while conn.execute(sa.select(sa.func.get_lock(UPGRADE_LOCK, 1))
                       ).scalar() != 1:
        if time.monotonic() > deadline:
            raise exception.StoreError(
                f"another 'recovery db upgrade' has held the upgrade lock "
                f"for {UPGRADE_LOCK_WAIT} s; let it finish, then run this "
                f"one again")
    try:
        yield
    finally:
        conn.execute(sa.select(sa.func.release_lock(UPGRADE_LOCK)))
