"""Masakari 22's database, as ``recovery db import-masakari`` reads it:
its tables (as far as the import reads them), and one read of them all.

Masakari's database is only read: the connection is read-only where the
backend allows it (PostgreSQL's default_transaction_read_only, MariaDB's
and MySQL's SET SESSION TRANSACTION READ ONLY, SQLite's query_only) and
the import sends it SELECTs alone, in one transaction: one snapshot even
while Masakari still writes.
"""

import dataclasses
import os
from typing import Any

import sqlalchemy as sa

from recovery import exception
from recovery.db import connection

#: Masakari 22's schema: the head of its alembic migrations.
REVISION = "13adff5efb9a"
#: Seconds to connect to Masakari's database server, and for one
#: statement (one table read) to answer.
CONNECT_TIMEOUT = 10
READ_TIMEOUT = 300

# Masakari 22's tables, as far as the import reads them
# (masakari/db/sqlalchemy/models.py and its migrations).
_masakari = sa.MetaData()


def _masakari_table(name: str, *columns: sa.Column) -> sa.Table:
    """With Masakari's id, timestamps and soft-delete mark."""
    return sa.Table(
        name, _masakari, sa.Column("id", sa.Integer, primary_key=True),
        *columns, sa.Column("created_at", sa.DateTime),
        sa.Column("updated_at", sa.DateTime),
        sa.Column("deleted", sa.Integer))


M_SEGMENTS = _masakari_table(
    "failover_segments", sa.Column("uuid", sa.String),
    sa.Column("name", sa.String), sa.Column("service_type", sa.String),
    sa.Column("enabled", sa.Boolean), sa.Column("description", sa.Text),
    sa.Column("recovery_method", sa.String))
M_HOSTS = _masakari_table(
    "hosts", sa.Column("uuid", sa.String), sa.Column("name", sa.String),
    sa.Column("reserved", sa.Boolean), sa.Column("type", sa.String),
    sa.Column("control_attributes", sa.Text),
    sa.Column("on_maintenance", sa.Boolean),
    sa.Column("failover_segment_id", sa.String))
M_NOTIFICATIONS = _masakari_table(
    "notifications", sa.Column("notification_uuid", sa.String),
    sa.Column("generated_time", sa.DateTime), sa.Column("type", sa.String),
    sa.Column("payload", sa.Text), sa.Column("status", sa.String),
    sa.Column("source_host_uuid", sa.String),
    sa.Column("failover_segment_uuid", sa.String),
    sa.Column("message", sa.Text))
M_VMOVES = _masakari_table(
    "vmoves", sa.Column("uuid", sa.String),
    sa.Column("notification_uuid", sa.String),
    sa.Column("instance_uuid", sa.String),
    sa.Column("instance_name", sa.String),
    sa.Column("source_host", sa.String), sa.Column("dest_host", sa.String),
    sa.Column("start_time", sa.DateTime), sa.Column("end_time", sa.DateTime),
    sa.Column("type", sa.String), sa.Column("status", sa.String),
    sa.Column("message", sa.Text))
M_VERSION = sa.Table("masakari_alembic_version", _masakari,
                     sa.Column("version_num", sa.String))


@dataclasses.dataclass(frozen=True)
class Source:
    """Masakari's rows, every one (soft-deleted too), by id."""

    segments: list[Any]
    hosts: list[Any]
    notifications: list[Any]
    vmoves: list[Any]


def source_url(url: str) -> sa.engine.URL:
    """The URL as SQLAlchemy and oslo.db write it; a backend without a
    driver gets recovery's. Masakari runs on the backends of recovery's
    own store (SQLite for a database built in a test)."""
    return connection.parse(
        url, "--from", "--from: Masakari's database cannot be {backend}; "
        "give a mysql://, mysql+pymysql://, postgresql:// or "
        "postgresql+psycopg:// URL")


def open_source(url: str) -> sa.engine.Engine:
    """An engine on Masakari's database whose every connection is
    read-only, and whose connects and reads end in time."""
    parsed = source_url(url)
    backend = parsed.get_backend_name()
    # SQLite would create a missing file: a typo must not leave one.
    if backend == "sqlite" and parsed.database not in (None, "", ":memory:") \
            and not os.path.isfile(parsed.database):
        raise exception.ConfigError(
            f"--from: there is no SQLite database at {parsed.database}")
    connect_args: dict[str, Any] = {}
    if backend == "postgresql":
        connect_args = {
            "connect_timeout": CONNECT_TIMEOUT,
            "options": f"-c default_transaction_read_only=on "
                       f"-c statement_timeout={READ_TIMEOUT * 1000}"}
    elif backend in ("mysql", "mariadb"):
        connect_args = {"connect_timeout": CONNECT_TIMEOUT,
                        "read_timeout": READ_TIMEOUT,
                        "write_timeout": READ_TIMEOUT}
    try:
        engine = sa.create_engine(parsed, poolclass=sa.pool.NullPool,
                                  connect_args=connect_args)
    except (ImportError, sa.exc.NoSuchModuleError) as exc:
        raise exception.ConfigError(
            f"--from: the driver {parsed.drivername} is not installed "
            f"({exc}); use mysql+pymysql:// or postgresql+psycopg://"
        ) from exc
    # PostgreSQL's is in the connection's options above.
    statement = {"mysql": "SET SESSION TRANSACTION READ ONLY",
                 "mariadb": "SET SESSION TRANSACTION READ ONLY",
                 "sqlite": "PRAGMA query_only = ON"}.get(backend)
    if statement is not None:
        @sa.event.listens_for(engine, "connect")
        def _read_only(dbapi_connection: Any, record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute(statement)
            cursor.close()
    return engine


def read(engine: sa.engine.Engine) -> Source:
    """Every row of Masakari's four tables, in one read-only transaction
    (one snapshot: repeatable read on a server)."""
    shown = engine.url.render_as_string(hide_password=True)
    try:
        with engine.connect() as conn:
            if engine.dialect.name != "sqlite":
                conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():
                _check_revision(conn, shown)
                return Source(*(
                    conn.execute(sa.select(table).order_by(table.c.id)).all()
                    for table in (M_SEGMENTS, M_HOSTS, M_NOTIFICATIONS,
                                  M_VMOVES)))
    except sa.exc.OperationalError as exc:
        raise exception.StoreUnavailable(
            f"Masakari's database {shown} cannot be read: "
            f"{getattr(exc, 'orig', None) or exc}") from exc
    except sa.exc.SQLAlchemyError as exc:
        raise exception.StoreError(
            f"Masakari's database {shown} refused a read: "
            f"{getattr(exc, 'orig', None) or exc}") from exc


def _check_revision(conn: sa.Connection, shown: str) -> None:
    if not sa.inspect(conn).has_table(M_VERSION.name):
        raise exception.ConfigError(
            f"{shown} is not a Masakari 22 database: it has no "
            f"{M_VERSION.name} table ('masakari-manage db sync' of Masakari "
            f"22 makes it)")
    revision = conn.execute(sa.select(M_VERSION.c.version_num)).scalar()
    if revision != REVISION:
        raise exception.ConfigError(
            f"{shown} is at Masakari schema revision {revision}, not "
            f"Masakari 22's {REVISION}: upgrade it with Masakari 22's "
            f"'masakari-manage db sync' first")
