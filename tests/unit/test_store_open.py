"""Opening the store at the engine's start: which errors are worth another
attempt, and the schedule of attempts (a fake clock; the errors are the
drivers' own, from a port where nothing listens and from the real
servers of tests/databases.py)."""

import os
import socket

import pytest
import sqlalchemy as sa
from oslo_config import cfg

from recovery import conf as recovery_conf
from recovery import exception
from recovery.db import connection
from recovery.db.store import open_conf_store
from recovery.db.store import open_store
from recovery.engine import server
from recovery.engine.systemd import Notifier
from tests.databases import MYSQL
from tests.databases import POSTGRESQL
from tests.unit.fakes import FakeClock


@pytest.fixture(scope="module")
def closed_port():
    """A port of this machine where nothing listens: a connection is
    refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def refused_url(backend: str, port: int) -> str:
    return {"postgresql": f"postgresql+psycopg://postgres@127.0.0.1:{port}"
                          f"/recovery",
            "mysql": f"mysql+pymysql://root@127.0.0.1:{port}/recovery",
            }[backend]


def make_conf(connection_url: str, **database: object) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf([], project="recovery", default_config_files=[])
    conf.set_override("connection", connection_url, "database")
    for name, value in database.items():
        conf.set_override(name, value, "database")
    return conf


@pytest.mark.parametrize("backend", ["postgresql", "mysql"])
def test_a_refused_connection_is_worth_another_attempt(backend,
                                                       closed_port):
    with pytest.raises(exception.StoreUnavailable) as raised:
        open_store(refused_url(backend, closed_port))
    message = str(raised.value)
    assert message.startswith(
        f"the database {refused_url(backend, closed_port)} does not "
        f"answer: ")
    assert "\n" not in message
    assert ("Connection refused" if backend == "postgresql"
            else "Can't connect to MySQL server") in message


@pytest.mark.parametrize("server_fixture,database", [
    ("postgresql_server", POSTGRESQL), ("mysql_server", MYSQL)])
def test_a_refused_login_is_the_configuration(request, server_fixture,
                                              database):
    request.getfixturevalue(server_fixture)
    url = database.url.set(username="nobody", database="recovery")
    with pytest.raises(exception.ConfigError) as raised:
        open_store(url.render_as_string(hide_password=False))
    assert not isinstance(raised.value, exception.StoreUnavailable)
    assert "Check [database] connection" in str(raised.value)
    assert "\n" not in str(raised.value)


def test_what_a_server_says_when_it_is_not_ready_yet():
    """psycopg 3 gives no SQLSTATE for a failed connection: its words
    decide. The texts are PostgreSQL's own."""
    import psycopg

    def pg(text):
        return psycopg.OperationalError(
            f'connection failed: connection to server at "10.0.0.5", port '
            f'5432 failed: {text}')

    assert connection.unreachable(pg("Connection refused"))
    assert connection.unreachable(pg("timeout expired"))
    assert connection.unreachable(
        pg("FATAL:  the database system is starting up"))
    assert connection.unreachable(
        pg("FATAL:  sorry, too many clients already"))
    assert not connection.unreachable(
        pg('FATAL:  password authentication failed for user "recovery"'))
    assert not connection.unreachable(
        pg('FATAL:  database "recovery" does not exist'))
    assert not connection.unreachable(ValueError("Connection refused"))


def test_a_command_does_not_wait(closed_port):
    clock = FakeClock()
    conf = make_conf(refused_url("postgresql", closed_port), max_retries=5)
    with pytest.raises(exception.StoreUnavailable):
        open_conf_store(conf, clock=clock)
    assert clock.sleeps == []


def test_the_start_tries_max_retries_more_times_then_gives_up(
        closed_port):
    clock = FakeClock()
    conf = make_conf(refused_url("mysql", closed_port), max_retries=3,
                     retry_interval=10)
    reported = []
    with pytest.raises(exception.StoreUnavailable) as raised:
        open_conf_store(conf, on_unreachable=reported.append, clock=clock)
    assert [(r.attempt, r.attempts, r.delay) for r in reported] == [
        (1, 4, 10), (2, 4, 10), (3, 4, 10)]
    assert clock.sleeps == [10, 10, 10]
    assert str(raised.value).endswith(
        "; gave up after 4 attempts in 30 s ([database] max_retries = 3, "
        "retry_interval = 10)")


def test_no_limit_keeps_trying(closed_port):
    clock = FakeClock()
    conf = make_conf(refused_url("postgresql", closed_port),
                     max_retries=-1, retry_interval=1)
    reported = []

    class Enough(Exception):
        pass

    def report(failed):
        reported.append(failed)
        if failed.attempt == 20:
            raise Enough

    with pytest.raises(Enough):
        open_conf_store(conf, on_unreachable=report, clock=clock)
    assert {r.attempts for r in reported} == {None}
    assert len(clock.sleeps) == 19


def test_each_failed_attempt_extends_systemds_start_timeout(closed_port):
    """One STATUS with EXTEND_TIMEOUT_USEC per attempt: the wait before
    the next attempt, plus what that attempt may take."""
    name = f"recovery-extend-{os.getpid()}"
    conf = make_conf(refused_url("postgresql", closed_port), max_retries=2,
                     retry_interval=10, statement_timeout=5)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as systemd:
        systemd.bind("\0" + name)
        report = server.waiting_for_database(
            conf, Notifier({"NOTIFY_SOCKET": "@" + name}))
        with pytest.raises(exception.StoreUnavailable):
            open_conf_store(conf, on_unreachable=report, clock=FakeClock())
        systemd.setblocking(False)
        messages = [systemd.recv(4096).decode() for _ in range(2)]
    assert messages == [
        f"EXTEND_TIMEOUT_USEC=60000000\nSTATUS=waiting for the database: "
        f"attempt {n} of 3 failed, next in 10 s" for n in (1, 2)]


def test_the_url_in_the_message_has_no_password(closed_port):
    url = sa.engine.make_url(refused_url("postgresql", closed_port)).set(
        password="s3cret")
    with pytest.raises(exception.StoreUnavailable) as raised:
        open_store(url.render_as_string(hide_password=False))
    assert "s3cret" not in str(raised.value)


@pytest.mark.parametrize("engine_start", [False, True])
def test_a_port_that_is_not_a_number_is_the_configuration(engine_start):
    """``mysql://u@db:port/x`` is refused in one line that names the
    option, as any other connection string that is not a URL, for a
    command and for the engine's start alike: neither waits for it, and
    neither shows the ValueError's traceback."""
    clock = FakeClock()
    conf = make_conf("mysql://u@db:port/x", max_retries=5)
    with pytest.raises(exception.ConfigError) as raised:
        open_conf_store(conf, clock=clock, on_unreachable=(
            (lambda unreachable: None) if engine_start else None))
    message = str(raised.value)
    assert message.startswith(
        "[database] connection is not a database URL: ")
    assert "'port'" in message and "\n" not in message
    assert clock.sleeps == []
