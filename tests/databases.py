"""Real database servers for the tests: each test gets a database of its
own on a PostgreSQL or MariaDB/MySQL server, created for it and dropped
after it.

The servers default to the development and CI machines' (PostgreSQL at
127.0.0.1:5432, user postgres, trust auth; MariaDB at 127.0.0.1:3306, user
root, no password); RECOVERY_TEST_POSTGRESQL_URL and RECOVERY_TEST_MYSQL_URL
name others. The URL names a server, not a database. When a server cannot
be reached its tests are skipped, with one line that says how to enable
them; under CI (CI=true) they fail instead, so the tier is never lost
without a sign.
"""

import dataclasses
import os
import uuid

import pytest
import sqlalchemy as sa

# A server that does not answer within this many seconds is not there.
CONNECT_TIMEOUT = 3


@dataclasses.dataclass(frozen=True)
class Server:
    """One database server, and how its tests find it."""

    name: str
    env: str
    default: str

    @property
    def url(self) -> sa.engine.URL:
        return sa.engine.make_url(os.environ.get(self.env) or self.default)

    def database_url(self, database: str) -> str:
        url = self.url.set(database=database)
        if self.name == "mysql":
            url = url.update_query_dict({"charset": "utf8mb4"})
        return url.render_as_string(hide_password=False)

    def admin(self) -> sa.engine.Engine:
        """An engine on the server's own database, outside transactions:
        CREATE and DROP DATABASE refuse to run inside one."""
        database = "postgres" if self.name == "postgresql" else None
        return sa.create_engine(
            self.url.set(database=database), isolation_level="AUTOCOMMIT",
            poolclass=sa.pool.NullPool,
            connect_args={"connect_timeout": CONNECT_TIMEOUT})

    def create(self, admin: sa.engine.Engine) -> str:
        """A new, empty database with a name no other test uses."""
        name = f"recovery_test_{uuid.uuid4().hex[:12]}"
        charset = "" if self.name == "postgresql" else (
            " CHARACTER SET utf8mb4")
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {name}{charset}")
        return name

    def drop(self, admin: sa.engine.Engine, name: str) -> None:
        """Drop ``name``, ending the sessions still on it first: a killed
        or frozen engine's would hold the DROP back."""
        with admin.connect() as conn:
            if self.name == "postgresql":
                conn.execute(sa.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = :name AND pid <> pg_backend_pid()"),
                    {"name": name})
            else:
                kill_mysql_sessions(conn, name)
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")


def kill_mysql_sessions(conn: sa.engine.Connection, name: str) -> None:
    """End every session on database ``name`` but this one."""
    sessions = conn.execute(sa.text(
        "SELECT id FROM information_schema.processlist "
        "WHERE db = :name AND id <> CONNECTION_ID()"), {"name": name})
    for (session,) in sessions.all():
        try:
            conn.exec_driver_sql(f"KILL {int(session)}")
        except sa.exc.DBAPIError:
            pass  # it ended meanwhile


POSTGRESQL = Server("postgresql", "RECOVERY_TEST_POSTGRESQL_URL",
                    "postgresql+psycopg://postgres@127.0.0.1:5432/")
MYSQL = Server("mysql", "RECOVERY_TEST_MYSQL_URL",
               "mysql+pymysql://root@127.0.0.1:3306/")


def _reach(server: Server) -> sa.engine.Engine:
    """The server's admin engine; skip (fail under CI) if it is not
    there."""
    try:
        admin = server.admin()
        with admin.connect():
            return admin
    except ImportError as exc:
        message = (f"{server.name} tier: {exc}; install the test extra "
                   f"(pip install -e '.[test]') to run it")
    except sa.exc.SQLAlchemyError as exc:
        first_line = (str(exc).strip().splitlines() or [repr(exc)])[0]
        message = (f"{server.name} tier: no server at "
                   f"{server.url.render_as_string()} ({first_line}); "
                   f"start one there or set {server.env} to a server's "
                   f"URL to run it")
    # Outside the handler: the line alone, without the driver's traceback.
    _skip_or_fail(message)


def _skip_or_fail(message: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def postgresql_server():
    admin = _reach(POSTGRESQL)
    yield admin
    admin.dispose()


@pytest.fixture(scope="session")
def mysql_server():
    admin = _reach(MYSQL)
    yield admin
    admin.dispose()


def _database(server: Server, admin: sa.engine.Engine):
    name = server.create(admin)
    yield server.database_url(name)
    server.drop(admin, name)


@pytest.fixture
def postgresql_url(postgresql_server):
    """The URL of a new PostgreSQL database, dropped after the test."""
    yield from _database(POSTGRESQL, postgresql_server)


@pytest.fixture
def mysql_url(mysql_server):
    """The URL of a new MariaDB/MySQL database, dropped after the
    test."""
    yield from _database(MYSQL, mysql_server)


@pytest.fixture(params=["sqlite", "postgresql", "mysql"])
def db_url(request, tmp_path):
    """The store's URL on each backend in turn: one suite, every
    backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/store.sqlite"
    return request.getfixturevalue(f"{request.param}_url")
