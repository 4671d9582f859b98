"""The schema's revisions: this version's chain of migrations, what each
declares, and whether an engine of this version may run on a database's
schema (``check_schema``). Migrating is ``recovery.db.migrate``'s.

A store already at this version's head is opened without importing
alembic (some 0.12 s of every command's start); alembic is imported only
to migrate, or to say how a schema differs.

Rolling upgrades: engines are upgraded one at a time, so that one always
serves: engines of two releases share the database meanwhile. Each
migration declares (its module's ``change``) whether the previous
release's engines can run on the schema it leaves: EXPAND (additive: they
can) or CONTRACT (they cannot). 'recovery db upgrade' applies the pending
migrations up to the first contract one; 'recovery db contract' applies
the rest, once no engine of an older release is alive (the registry's
schema_revision, which engines before 0015 never write).

An engine needs its schema less the contract migrations that end it: it
runs before they are applied (beside the previous release) and after. On
a newer schema it cannot know what the migrations past its own were, so
the database says: schema_floor holds the last contract migration
applied. An engine that knows that revision was written for a schema with
it, and runs whatever expand migrations came after; one that does not
predates it, and refuses to start.
"""

import dataclasses
import functools
import os
from typing import TYPE_CHECKING

import sqlalchemy as sa

from recovery import exception
from recovery.db.tables import schema_floor

if TYPE_CHECKING:
    from alembic.config import Config as AlembicConfig

# This version's schema: the last migration in migrations/versions (a
# unit test holds them equal).
HEAD_REVISION = "0018"
_VERSION_TABLE = "alembic_version"

EXPAND, CONTRACT = "expand", "contract"
# The migration that made the engine registry: before it, no two engines
# shared a database.
_SHARED_SINCE = "0006"


@dataclasses.dataclass(frozen=True)
class Migration:
    """One migration, and what it declares: EXPAND or CONTRACT."""

    revision: str
    change: str

    @property
    def contracts(self) -> bool:
        return self.change == CONTRACT


@functools.cache
def known_revisions() -> frozenset[str]:
    """The revisions of this version's migrations."""
    return frozenset(m.revision for m in migrations())


def floor_refusal(floor: str | None) -> str | None:
    """Why this version's engines may no longer run on a database whose
    floor (the last contract migration applied) is ``floor``: one they
    do not know, a newer release's; None while they may."""
    if floor is None or floor in known_revisions():
        return None
    return (f"the database was contracted past this release: its last "
            f"contract migration is {floor}, newer than this recovery's "
            f"{HEAD_REVISION}, and this engine cannot run on it: upgrade "
            f"recovery on this controller")


def migrations() -> list[Migration]:
    """This version's migrations, oldest first."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(alembic_config())
    return [Migration(script.revision, script.module.change)
            for script in reversed(list(scripts.walk_revisions()))]


def pending(chain: list[Migration], current: str | None
            ) -> list[Migration]:
    """The migrations of ``chain`` after ``current`` (a revision in it,
    or None for an empty database)."""
    if current is None:
        return chain
    return chain[[m.revision for m in chain].index(current) + 1:]


def needed(chain: list[Migration]) -> str:
    """The oldest schema the engines of ``chain``'s release run on: its
    head, less the contract migrations that end it."""
    kept = len(chain)
    while kept > 1 and chain[kept - 1].contracts:
        kept -= 1
    return chain[kept - 1].revision


def upgrade_target(chain: list[Migration], current: str | None) -> str:
    """Where 'recovery db upgrade' takes a schema at ``current``: through
    the pending migrations up to the first contract one. An empty
    database gets them all, and so does one without the registry yet: no
    engine runs on it (a shared database that old is one whose first
    upgrade was cut short)."""
    ahead = pending(chain, current)
    if current is None or any(m.revision == _SHARED_SINCE for m in ahead):
        return chain[-1].revision
    reached = current
    for migration in ahead:
        if migration.contracts:
            break
        reached = migration.revision
    return reached


def next_contract(chain: list[Migration], current: str) -> str | None:
    """The first contract migration pending at ``current``, if any."""
    return next((m.revision for m in pending(chain, current)
                 if m.contracts), None)


def start_refusal(chain: list[Migration], current: str | None,
                  floor: str | None) -> str | None:
    """Why an engine of ``chain``'s release cannot run on a schema at
    ``current`` whose floor (the last contract migration applied) is
    ``floor``, saying what to run; None when it can."""
    revisions = [m.revision for m in chain]
    if current is None:
        return ("the database has no recovery schema yet: run 'recovery "
                "db upgrade' once, from one controller")
    if current not in revisions:
        if floor in revisions:
            # Newer by expand migrations only.
            return None
        past = (f"past contract migration {floor}, which it cannot run on"
                if floor else "with no floor to say what can run on it")
        return (f"the database schema is at revision {current}, newer "
                f"than this recovery's {revisions[-1]} and {past}: "
                f"upgrade recovery on this controller")
    need = needed(chain)
    if revisions.index(current) >= revisions.index(need):
        return None
    reach = upgrade_target(chain, current)
    if revisions.index(reach) >= revisions.index(need):
        return (f"the database schema is at revision {current}, older "
                f"than the {need} this recovery needs: run 'recovery db "
                f"upgrade' once, from one controller")
    return (f"the database schema is at revision {current}, older than "
            f"the {need} this recovery needs, and reaching it takes "
            f"contract migration {next_contract(chain, current)}, which "
            f"the engines of older releases cannot run on: stop them, "
            f"then run 'recovery db contract' once, from one controller "
            f"upgraded to this release")


def alembic_config() -> "AlembicConfig":
    from alembic.config import Config as AlembicConfig

    config = AlembicConfig()
    config.set_main_option(
        "script_location",
        os.path.join(os.path.dirname(__file__), "migrations"))
    return config


def current_revision(engine: sa.engine.Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def is_current(engine: sa.engine.Engine) -> bool:
    """The schema is this version's: read as alembic stores it (one row
    in its version table), without alembic."""
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table(_VERSION_TABLE):
            return False
        stored = conn.execute(sa.select(
            sa.column("version_num")).select_from(sa.table(_VERSION_TABLE))
        ).scalars().all()
    return stored == [HEAD_REVISION]


def read_floor(conn: sa.engine.Connection) -> str | None:
    """The database's floor; None before 0015 made it."""
    if not sa.inspect(conn).has_table(schema_floor.name):
        return None
    return conn.execute(sa.select(schema_floor.c.revision).where(
        schema_floor.c.id == 1)).scalar()


def check_schema(engine: sa.engine.Engine) -> None:
    """Refuse a shared database that this version's engines cannot run
    on (``start_refusal``): an engine never migrates a database other
    engines use."""
    if is_current(engine):
        return
    with engine.connect() as conn:
        floor = read_floor(conn)
    refusal = start_refusal(migrations(), current_revision(engine), floor)
    if refusal is not None:
        raise exception.SchemaMismatch(refusal)
