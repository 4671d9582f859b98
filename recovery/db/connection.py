"""The database behind the store: SQLite for one engine, PostgreSQL or
MariaDB/MySQL for several engines that share it.

Server databases are opened through oslo.db, as every OpenStack service
opens its ``[database]``: its option names, MySQL's sql_mode, connection
recycling and pre-ping, and its translation of each driver's deadlock and
lost-connection errors. SQLite keeps its own set-up (WAL, durable commits,
writers serialized by ``BEGIN IMMEDIATE``), which oslo.db's own SQLite
handling would replace with a deferred ``BEGIN``.

Every wait on the server is bounded: the connect, each statement and
each lock wait. PostgreSQL and MariaDB also end a transaction that a
frozen client left idle, releasing its row locks, which would otherwise
stall every other engine; MySQL 8 has no such timeout, and there a frozen
client's locks last until its connection drops.
"""

import contextlib
import dataclasses
import datetime
import functools
import importlib.util
import os
import time
from collections.abc import Callable
from collections.abc import Iterator
from typing import TYPE_CHECKING
from typing import Any

import sqlalchemy as sa
from oslo_config import cfg

from recovery import exception
from recovery.db.tables import schema_floor

if TYPE_CHECKING:
    from alembic.config import Config as AlembicConfig

    from recovery.db.control import EngineRecord

# The drivers recovery supports, by backend: (driver, module to import,
# what to install).
DRIVERS = {
    "sqlite": ("pysqlite", "sqlite3", "Python's sqlite3"),
    "postgresql": ("psycopg", "psycopg", "pip install 'recovery[postgresql]'"
                                         " (psycopg 3)"),
    "mysql": ("pymysql", "pymysql", "pip install 'recovery[mysql]'"
                                    " (PyMySQL)"),
    "mariadb": ("pymysql", "pymysql", "pip install 'recovery[mysql]'"
                                      " (PyMySQL)"),
}

# Serializes 'recovery db upgrade' runs on a server database.
UPGRADE_LOCK = "recovery-db-upgrade"
UPGRADE_LOCK_WAIT = 60
_PG_UPGRADE_LOCK_KEY = 0x7265636F76657279  # "recovery"


@dataclasses.dataclass(frozen=True)
class Options:
    """The ``[database]`` options that shape a connection."""

    connection: str
    busy_timeout: float
    statement_timeout: float
    mysql_sql_mode: str | None
    mysql_wsrep_sync_wait: int | None
    connection_recycle_time: int
    max_pool_size: int | None
    max_overflow: int | None
    pool_timeout: int | None
    max_retries: int
    retry_interval: int

    @classmethod
    def from_conf(cls, group: Any, **overrides: Any) -> "Options":
        fields = {f.name: getattr(group, f.name)
                  for f in dataclasses.fields(cls)}
        return cls(**{**fields, **overrides})

    @classmethod
    def defaults(cls, connection: str) -> "Options":
        """The options' defaults, for ``connection``."""
        from recovery.conf import database

        conf = cfg.ConfigOpts()
        database.register_opts(conf)
        conf([], default_config_files=[], default_config_dirs=[])
        return cls.from_conf(conf.database, connection=connection)


def parse_url(connection: str) -> sa.engine.URL:
    """The URL, with a supported driver whose package is installed.

    ``postgresql://`` means psycopg 3 and ``mysql://`` PyMySQL; any other
    driver, or a driver that is not installed, is a ConfigError in one
    line that says what to do.
    """
    try:
        url = sa.engine.make_url(connection)
    except sa.exc.ArgumentError as exc:
        raise exception.ConfigError(
            f"[database] connection is not a database URL: {exc}") from exc
    backend = url.get_backend_name()
    if backend not in DRIVERS:
        raise exception.ConfigError(
            f"[database] connection: unsupported database '{backend}'; use "
            f"sqlite://, postgresql+psycopg:// or mysql+pymysql://")
    driver, module, install = DRIVERS[backend]
    if "+" not in url.drivername:
        url = url.set(drivername=f"{backend}+{driver}")
    if url.get_driver_name() != driver:
        raise exception.ConfigError(
            f"[database] connection: the driver "
            f"'{url.get_driver_name()}' is not supported for {backend}; "
            f"use {backend}+{driver}://")
    if importlib.util.find_spec(module) is None:
        raise exception.ConfigError(
            f"[database] connection names {backend}, but its driver "
            f"{driver} is not installed: {install}")
    return url


def is_shared(url: sa.engine.URL) -> bool:
    """A server database, which several engines may share."""
    return url.get_backend_name() != "sqlite"


def create_engine(options: Options) -> sa.engine.Engine:
    url = parse_url(options.connection)
    try:
        if not is_shared(url):
            return _sqlite_engine(url, options)
        return _server_engine(url, options)
    except sa.exc.SQLAlchemyError as exc:
        raise cannot_open(url, exc) from exc


def cannot_open(url: sa.engine.URL, exc: Exception) -> exception.ConfigError:
    """The error for a store that cannot be opened (its password hidden)."""
    return exception.ConfigError(
        f"cannot open the store {_where(url)}: {driver_message(exc)}. "
        f"Check [database] connection")


# -- a server that does not answer -------------------------------------
# PyMySQL's errors that say "not now": the server cannot be reached (2002,
# 2003: refused, no route, unknown host), the connection broke (2006,
# 2013), too many connections (1040), a Galera node not ready (1047), or
# the server is shutting down (1053). Access denied (1045, 1698) or an
# unknown database (1049) is the configuration: no retry mends it.
_MYSQL_UNREACHABLE = frozenset({1040, 1047, 1053, 2002, 2003, 2006, 2013})
# What a PostgreSQL server says, in a FATAL, when it is there but does
# not take connections yet: starting, stopping, recovering, full. Any
# other FATAL (password, role, database, pg_hba.conf) is the
# configuration's.
_PG_NOT_NOW = ("the database system is", "too many clients",
               "connection slots are reserved")


def _driver_error(exc: BaseException) -> BaseException:
    """The driver's own exception under SQLAlchemy's and oslo.db's."""
    inner = getattr(exc, "inner_exception", None) or exc
    return getattr(inner, "orig", None) or inner


def unreachable(exc: BaseException) -> bool:
    """Whether connecting failed because the server is not there, or not
    taking connections yet: a later attempt may work.

    Decided here rather than by oslo.db, whose patterns know libpq's old
    "could not connect to server" but not psycopg 3's "connection to
    server at ... failed: Connection refused". psycopg 3 gives no SQLSTATE
    for a failed connection, so its words decide: a failure without the
    server's FATAL (refused, timed out, reset, a name that does not
    resolve) or with a FATAL that says "not now"."""
    error = _driver_error(exc)
    if type(error).__module__.startswith("pymysql"):
        return bool(error.args) and error.args[0] in _MYSQL_UNREACHABLE
    # psycopg's OperationalError, or a subclass (ConnectionTimeout).
    if not any(cls.__name__ == "OperationalError"
               and cls.__module__.startswith("psycopg")
               for cls in type(error).__mro__):
        return False
    text = str(error)
    return "FATAL:" not in text or any(words in text
                                       for words in _PG_NOT_NOW)


def driver_message(exc: BaseException) -> str:
    """The driver's words, on one line: ``Connection refused`` rather
    than SQLAlchemy's dump of the statement and its documentation link."""
    error = _driver_error(exc)
    if (type(error).__module__.startswith("pymysql")
            and len(error.args) == 2):
        code, text = error.args
        return f"{text} ({code})"
    lines = str(error).strip().splitlines()
    return lines[0].strip() if lines else repr(error)


def unreachable_error(url: sa.engine.URL,
                      exc: BaseException) -> exception.StoreUnavailable:
    """The error for a server database that does not answer."""
    return exception.StoreUnavailable(
        f"the database {_where(url)} does not answer: "
        f"{driver_message(exc)}")


def _where(url: sa.engine.URL) -> str:
    """The server and database, without the bounds added to the query
    and without the password."""
    return url.set(query={}).render_as_string()


# The execution option of a connection that only reads: on SQLite its
# transactions begin without the write lock. Other backends ignore it.
READ_ONLY = "recovery_read_only"


def _sqlite_engine(url: sa.engine.URL,
                   options: Options) -> sa.engine.Engine:
    engine = sa.create_engine(url, connect_args={
        "timeout": options.busy_timeout, "check_same_thread": False})

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, record: Any) -> None:
        # Let the "begin" event below issue BEGIN itself.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        # WAL with FULL: a commit is on disk when it returns.
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        # Every transaction takes the write lock first: "check, then
        # write" is atomic across processes. One that only reads, and
        # says so (READ_ONLY), neither waits for nor holds it.
        read_only = conn.get_execution_options().get(READ_ONLY)
        conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

    return engine


def _server_engine(url: sa.engine.URL,
                   options: Options) -> sa.engine.Engine:
    from oslo_db.sqlalchemy import engines

    timeout = max(1, round(options.statement_timeout))
    if url.get_backend_name() == "postgresql":
        millis = timeout * 1000
        bounds = {
            "connect_timeout": str(timeout),
            # A frozen client's open transaction holds its row locks:
            # the server ends it, so other engines can take over.
            "options": f"-c statement_timeout={millis} "
                       f"-c lock_timeout={millis} "
                       f"-c idle_in_transaction_session_timeout={millis}",
            "tcp_user_timeout": str(millis)}
    else:
        bounds = {"charset": "utf8mb4", "connect_timeout": str(timeout),
                  "read_timeout": str(timeout * 3),
                  "write_timeout": str(timeout * 3)}
    # What the operator's URL says wins.
    url = url.update_query_dict(
        {k: v for k, v in bounds.items() if k not in url.query})
    engine = engines.create_engine(
        url, mysql_sql_mode=options.mysql_sql_mode,
        mysql_wsrep_sync_wait=options.mysql_wsrep_sync_wait,
        connection_recycle_time=options.connection_recycle_time,
        max_pool_size=options.max_pool_size,
        max_overflow=options.max_overflow,
        pool_timeout=options.pool_timeout,
        # No connection here: the store's first statement is the first
        # attempt, and open_conf_store retries it ([database]
        # max_retries), where oslo.db would not know psycopg 3's errors.
        max_retries=0)
    if url.get_backend_name() != "postgresql":
        _bound_mysql_waits(engine, timeout)
    return engine


def _bound_mysql_waits(engine: sa.engine.Engine, timeout: int) -> None:
    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, record: Any) -> None:
        cursor = dbapi_connection.cursor()
        # No gap locks: two runs' journal upserts never deadlock.
        cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL "
                       "READ COMMITTED")
        cursor.execute("SET SESSION innodb_lock_wait_timeout = %s",
                       [timeout])
        cursor.execute("SELECT VERSION()")
        if "mariadb" in cursor.fetchone()[0].lower():
            # MariaDB ends a transaction its client left idle (frozen).
            cursor.execute("SET SESSION idle_transaction_timeout = %s",
                           [timeout])
        cursor.close()


def database_now(conn: sa.engine.Connection) -> datetime.datetime:
    """The database server's time (UTC): the one clock that every engine
    sharing the database reads, whatever its own clock says. An SQLite
    file's server is this machine."""
    backend = conn.dialect.name
    if backend == "postgresql":
        value = conn.execute(sa.text("SELECT CURRENT_TIMESTAMP")).scalar()
        return value.astimezone(datetime.timezone.utc)
    if backend in ("mysql", "mariadb"):
        value = conn.execute(sa.text("SELECT UTC_TIMESTAMP(6)")).scalar()
        return value.replace(tzinfo=datetime.timezone.utc)
    return datetime.datetime.now(datetime.timezone.utc)


# -- the schema --------------------------------------------------------
# This version's schema: the last migration in migrations/versions (a
# unit test holds them equal). A store already at it is opened without
# importing alembic (some 0.12 s of every command's start); alembic is
# imported only to migrate, or to say how a schema differs.
HEAD_REVISION = "0015"
_VERSION_TABLE = "alembic_version"

# -- rolling upgrades ----------------------------------------------------
# Engines are upgraded one at a time, so that one always serves: engines
# of two releases share the database meanwhile. Each migration declares
# (its module's ``change``) whether the previous release's engines can
# run on the schema it leaves: EXPAND (additive: they can) or CONTRACT
# (they cannot). 'recovery db upgrade' applies the pending migrations up
# to the first contract one; 'recovery db contract' applies the rest,
# once no engine of an older release is alive (the registry's
# schema_revision, which engines before 0015 never write).
#
# An engine needs its schema less the contract migrations that end it: it
# runs before they are applied (beside the previous release) and after.
# On a newer schema it cannot know what the migrations past its own were,
# so the database says: schema_floor holds the last contract migration
# applied. An engine that knows that revision was written for a schema
# with it, and runs whatever expand migrations came after; one that does
# not predates it, and refuses to start.
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

    scripts = ScriptDirectory.from_config(_alembic_config())
    return [Migration(script.revision, script.module.change)
            for script in reversed(list(scripts.walk_revisions()))]


def _pending(chain: list[Migration], current: str | None
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
    pending = _pending(chain, current)
    if current is None or any(m.revision == _SHARED_SINCE
                              for m in pending):
        return chain[-1].revision
    reached = current
    for migration in pending:
        if migration.contracts:
            break
        reached = migration.revision
    return reached


def next_contract(chain: list[Migration], current: str) -> str | None:
    """The first contract migration pending at ``current``, if any."""
    return next((m.revision for m in _pending(chain, current)
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


def _alembic_config() -> "AlembicConfig":
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


def _is_current(engine: sa.engine.Engine) -> bool:
    """The schema is this version's: read as alembic stores it (one row
    in its version table), without alembic."""
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table(_VERSION_TABLE):
            return False
        stored = conn.execute(sa.select(
            sa.column("version_num")).select_from(sa.table(_VERSION_TABLE))
        ).scalars().all()
    return stored == [HEAD_REVISION]


def _floor(conn: sa.engine.Connection) -> str | None:
    """The database's floor; None before 0015 made it."""
    if not sa.inspect(conn).has_table(schema_floor.name):
        return None
    return conn.execute(sa.select(schema_floor.c.revision).where(
        schema_floor.c.id == 1)).scalar()


def upgrade(engine: sa.engine.Engine, *,
            expand_only: bool = False) -> Migrated:
    """Create the schema or upgrade it, one upgrade at a time: to this
    version's head, or ('recovery db upgrade' on a shared database:
    ``expand_only``) up to its first pending contract migration, which
    the engines still running may not run on."""
    if _is_current(engine):
        return Migrated(HEAD_REVISION, HEAD_REVISION)

    def target(conn: sa.engine.Connection, chain: list[Migration],
               current: str | None) -> str:
        if expand_only:
            return upgrade_target(chain, current)
        return HEAD_REVISION

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
        # Imported here: control's store methods import this module.
        from recovery.db import control

        older = control.older_engines(
            conn, live_within,
            {m.revision for m in chain} - {HEAD_REVISION})
        if older:
            raise OlderEngines(_older_message(older, live_within))
        return HEAD_REVISION

    return _migrate(engine, target)


def _older_message(older: list["EngineRecord"],
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


def _migrate(engine: sa.engine.Engine, target: Callable[
        [sa.engine.Connection, list[Migration], str | None], str]
             ) -> Migrated:
    """Upgrade to the revision ``target`` picks, under the upgrade lock,
    in one transaction: the floor moves with the contract migrations.
    It moves first: on MySQL and MariaDB each DDL statement commits on
    its own, and a run cut short after a contract migration must leave
    the floor past it, so that the older engines refuse the schema
    rather than run on it."""
    from alembic import command as alembic_command
    from alembic.runtime.migration import MigrationContext

    config = _alembic_config()
    chain = migrations()
    with engine.begin() as conn, _upgrade_lock(conn):
        before = MigrationContext.configure(conn).get_current_revision()
        if before is not None and before not in [m.revision for m in chain]:
            raise exception.SchemaMismatch(
                f"the database schema is at revision {before}, newer than "
                f"this recovery's {HEAD_REVISION}: upgrade recovery on "
                f"this controller")
        after = target(conn, chain, before)
        if after != before:
            contracts = [m.revision for m in _pending(chain, before)
                         if m.contracts
                         and m not in _pending(chain, after)]
            # Before 0015 there is no floor yet: 0015 makes it, during
            # this run, and it is moved once that has run.
            moved = bool(contracts) and _floor(conn) is not None
            if moved:
                _move_floor(conn, contracts[-1])
            config.attributes["connection"] = conn
            alembic_command.upgrade(config, after)
            if contracts and not moved and _floor(conn) is not None:
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


def check_schema(engine: sa.engine.Engine) -> None:
    """Refuse a shared database that this version's engines cannot run
    on (``start_refusal``): an engine never migrates a database other
    engines use."""
    if _is_current(engine):
        return
    with engine.connect() as conn:
        floor = _floor(conn)
    refusal = start_refusal(migrations(), current_revision(engine), floor)
    if refusal is not None:
        raise exception.SchemaMismatch(refusal)
