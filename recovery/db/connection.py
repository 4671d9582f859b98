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

The URL is parsed here, for the store and for 'recovery db import-masakari'
alike; a driver's errors are told apart (not now, or never) and said in
one line. The schema on the database is ``revisions``' and ``migrate``'s.
"""

import dataclasses
import datetime
import importlib.util
from typing import Any

import sqlalchemy as sa
from oslo_config import cfg

from recovery import exception

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


def parse(connection: str, option: str, refusal: str) -> sa.engine.URL:
    """``connection`` as a URL of a backend the store runs on, with a
    driver: one without gets recovery's (``mysql://`` means PyMySQL and
    ``postgresql://`` psycopg 3), as oslo.db reads them. Any other
    backend is refused with ``refusal`` (of ``{backend}``), and what is
    not a URL (a port that is not a number too) with a ConfigError in
    one line that names ``option``."""
    try:
        url = sa.engine.make_url(connection)
    except (sa.exc.ArgumentError, ValueError) as exc:
        # ValueError: a port that is not a number.
        raise exception.ConfigError(
            f"{option} is not a database URL: {exc}") from exc
    backend = url.get_backend_name()
    if backend not in DRIVERS:
        raise exception.ConfigError(refusal.format(backend=backend))
    if "+" not in url.drivername:
        url = url.set(drivername=f"{backend}+{DRIVERS[backend][0]}")
    return url


def parse_url(connection: str) -> sa.engine.URL:
    """The store's URL, with a supported driver whose package is
    installed: any other driver, or a driver that is not installed, is a
    ConfigError in one line that says what to do."""
    url = parse(connection, "[database] connection",
                "[database] connection: unsupported database '{backend}'; "
                "use sqlite://, postgresql+psycopg:// or mysql+pymysql://")
    backend = url.get_backend_name()
    driver, module, install = DRIVERS[backend]
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
