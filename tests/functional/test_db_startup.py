"""recovery-engine started while its database does not answer, on
PostgreSQL and on MariaDB: a real engine process reaches a real server
through a TCP proxy that refuses connections at first.

It stays up and waits, without end by default, with one log line per
attempt, telling systemd it is still starting (EXTEND_TIMEOUT_USEC, which
covers each next attempt). Its API listens meanwhile and answers 503, to
a notification (which is not stored) and to /healthcheck. Once the
database answers it serves: READY, /healthcheck 200, a host recovered.
With [database] max_retries set and the database never answering, it
gives up with one line and exit status 75; a stop signal ends the wait
with 0. No traceback either way.
"""

import re
import signal
import time

import pytest
import sqlalchemy as sa

from recovery.db.store import open_store
from tests.fakenova import FakeNova
from tests.functional.engine_process import EngineProcess
from tests.functional.engine_process import wait_until
from tests.tcpproxy import TcpProxy

HOST = "compute-1"
RETRY_INTERVAL = 1
# Failed attempts seen before the database comes back.
OUTAGE_ATTEMPTS = 3
ATTEMPT = re.compile(r"WARNING recovery\.engine \[-\] Waiting for the "
                     r"database, attempt (\d+)(?: of (\d+))?: the database "
                     r"\S+ does not answer: (.*)\. Next attempt in 1 s; "
                     r"the API answers 503 until then")
LISTENING = re.compile(r"Listening on 127\.0\.0\.1:(\d+) \(auth: noauth\); "
                       r"opening the store")
# The driver's own words for a refused connection.
REFUSED = {"postgresql": 'connection to server at "127.0.0.1", port '
                         '{port} failed: Connection refused',
           "mysql": "Can't connect to MySQL server on '127.0.0.1'"}


@pytest.fixture(params=["postgresql", "mysql"])
def backend(request):
    return request.param


@pytest.fixture
def database(request, backend):
    """A fresh database with the schema, as 'recovery db upgrade' leaves
    it."""
    url = request.getfixturevalue(f"{backend}_url")
    open_store(url, upgrade=True).close()
    return url


@pytest.fixture
def proxy(database):
    """A proxy to the database, cut: connections are refused."""
    url = sa.engine.make_url(database)
    with TcpProxy(url.host, url.port) as proxy:
        proxy.cut()
        yield proxy


@pytest.fixture
def nova():
    with FakeNova(evacuation_latency=0.05) as fake:
        for host in (HOST, "compute-2", "compute-3"):
            fake.add_compute(host)
        yield fake


def engine_behind(proxy, database, nova, workdir, retries=None):
    """An engine whose database is behind ``proxy``; ``retries``: its
    [database] max_retries (None: the default, no limit)."""
    url = sa.engine.make_url(database).set(port=proxy.port)
    limit = "" if retries is None else f"max_retries = {retries}\n"
    return EngineProcess(
        workdir, nova.endpoint,
        database=url.render_as_string(hide_password=False),
        extra=f"\n[database]\n{limit}retry_interval = {RETRY_INTERVAL}\n")


def logged(engine):
    return engine.log.read_text() if engine.log.exists() else ""


def no_traceback(engine):
    for text in (logged(engine), engine.stderr()):
        assert "Traceback" not in text, text


def listening(engine):
    """The API's port, once the engine logs that it listens."""
    def port():
        assert engine.proc.poll() is None, engine.stderr()
        found = LISTENING.search(logged(engine))
        return found and int(found.group(1))
    engine.port = wait_until(port, 10, "the API listening")
    return engine.port


def health(engine):
    """/healthcheck's status and body, as Kolla's probe sees them."""
    status, body = engine.request("GET", "/healthcheck")
    return status, body


def test_an_engine_started_with_its_database_down_serves_once_it_is_back(
        backend, database, proxy, nova, tmp_path):
    engine = engine_behind(proxy, database, nova, tmp_path)
    try:
        started = time.monotonic()
        engine.start(ready_timeout=None)
        listening(engine)
        # The outage: the engine stays up, its API answers 503, and each
        # message to systemd is stamped when it arrives.
        received = []

        def attempts_made():
            seen = len(engine.messages)
            engine.drain()
            received.extend((time.monotonic(), m)
                            for m in engine.messages[seen:])
            assert engine.proc.poll() is None, engine.stderr()
            return len(ATTEMPT.findall(logged(engine))) >= OUTAGE_ATTEMPTS

        wait_until(attempts_made, 20, f"{OUTAGE_ATTEMPTS} failed attempts")
        status, body = engine.request("POST", "/v1/notifications", {
            "notification": {"type": "COMPUTE_HOST", "hostname": HOST,
                             "generated_time": "2026-11-22T10:00:00",
                             "payload": {"event": "STOPPED",
                                         "host_status": "NORMAL",
                                         "cluster_status": "OFFLINE"}}})
        assert status == 503, body
        assert "nothing was stored" in body["serviceUnavailable"]["message"]
        assert health(engine) == (503, "database: not answering")
        attempts_made()
        assert engine.proc.poll() is None
        assert not any(m.get("READY") for _, m in received)
        # Nothing was stored (read past the proxy).
        store = open_store(database)
        try:
            assert store.list_notifications(filters={}) == []
        finally:
            store.close()
        restored = time.monotonic()
        proxy.restore()
        engine.wait_ready(timeout=10)
        ready = time.monotonic()
        received.append((ready, {"READY": "1"}))
        assert health(engine) == (200, "database: OK")

        # It serves: a notification is accepted and the host recovered.
        uuids = [nova.add_server(f"vm{n}", HOST) for n in range(3)]
        nova.fail_host(HOST)
        done = engine.wait_status(engine.post_host_down(HOST), "finished",
                                  "failed")
        assert done["status"] == "finished", done["message"]
        assert sorted(c["uuid"] for c in nova.evacuate_calls) == sorted(
            uuids)
    finally:
        engine.close()

    no_traceback(engine)
    attempts = [m.groups() for m in ATTEMPT.finditer(logged(engine))]
    # One line per attempt, numbered, without end, each saying what the
    # driver said.
    assert [int(n) for n, _, _ in attempts] == list(
        range(1, len(attempts) + 1))
    assert len(attempts) >= OUTAGE_ATTEMPTS
    assert {total for _, total, _ in attempts} == {None}
    refused = REFUSED[backend].format(port=proxy.port)
    assert all(refused in detail for _, _, detail in attempts), attempts
    # systemd heard of each attempt, and each extension of its start
    # timeout lasted until the next message.
    extensions = [(at, m) for at, m in received
                  if "EXTEND_TIMEOUT_USEC" in m]
    assert len(extensions) == len(attempts)
    nexts = [at for at, _ in extensions[1:]] + [ready]
    for (at, message), after in zip(extensions, nexts, strict=True):
        assert after - at < int(message["EXTEND_TIMEOUT_USEC"]) / 1e6
        assert message["STATUS"].startswith("waiting for the database")
    print(f"{backend}: database back {restored - started:.1f} s after the "
          f"start, READY {ready - restored:.1f} s later; "
          f"{len(attempts)} failed attempts; start timeout extended by "
          f"{int(extensions[0][1]['EXTEND_TIMEOUT_USEC']) / 1e6:g} s "
          f"each time")


def test_an_engine_whose_database_never_answers_exits_75_in_one_line(
        backend, database, proxy, nova, tmp_path):
    engine = engine_behind(proxy, database, nova, tmp_path, retries=2)
    try:
        started = time.monotonic()
        engine.start(ready_timeout=None)
        status = engine.wait_exit(timeout=30)
        took = time.monotonic() - started
    finally:
        engine.close()
    assert status == 75
    no_traceback(engine)
    text = logged(engine)
    assert len(ATTEMPT.findall(text)) == 2
    [error] = [line for line in text.splitlines() if " ERROR " in line]
    assert re.search(r"; gave up after 3 attempts in \d+ s \(\[database\] "
                     r"max_retries = 2, retry_interval = 1\)$", error), error
    assert REFUSED[backend].format(port=proxy.port) in error
    assert engine.stderr().count("\n") == 1, engine.stderr()
    print(f"{backend}: gave up after {took:.1f} s, exit status {status}")


def test_a_stop_while_waiting_for_the_database_exits_zero_at_once(
        backend, database, proxy, nova, tmp_path):
    """SIGTERM before the engine runs ends the start cleanly: without its
    own handler there, an engine that is a container's PID 1 would not
    hear it, and a plain process would die of it (status -15)."""
    engine = engine_behind(proxy, database, nova, tmp_path)
    try:
        engine.start(ready_timeout=None)
        wait_until(lambda: ATTEMPT.search(logged(engine)), 30,
                   "the first attempt")
        engine.signal(signal.SIGTERM)
        status = engine.wait_exit(timeout=10)
    finally:
        engine.close()
    assert status == 0, engine.stderr()
    no_traceback(engine)
    assert "Stop signal while starting: nothing runs yet; stopped" in (
        logged(engine))


def test_a_database_that_refuses_the_login_is_not_waited_for(
        backend, database, nova, tmp_path):
    """A wrong user is the configuration: no retry mends it."""
    url = sa.engine.make_url(database).set(username="nobody")
    engine = EngineProcess(
        tmp_path, nova.endpoint,
        database=url.render_as_string(hide_password=False),
        extra="\n[database]\nmax_retries = 5\nretry_interval = 2\n")
    try:
        engine.start(ready_timeout=None)
        status = engine.wait_exit(timeout=30)
    finally:
        engine.close()
    assert status == 2
    no_traceback(engine)
    assert ATTEMPT.findall(logged(engine)) == []
    assert "Check [database] connection" in engine.stderr()


def test_the_schema_is_checked_once_the_database_answers(
        request, backend, nova, tmp_path):
    """What the start checks on an open store, it checks when the
    database comes back: a database without the schema stops the engine
    with the command to run, as at a start with the database up."""
    empty = request.getfixturevalue(f"{backend}_url")
    url = sa.engine.make_url(empty)
    with TcpProxy(url.host, url.port) as proxy:
        proxy.cut()
        engine = engine_behind(proxy, empty, nova, tmp_path)
        try:
            engine.start(ready_timeout=None)
            listening(engine)
            assert health(engine)[0] == 503
            proxy.restore()
            status = engine.wait_exit(timeout=10)
        finally:
            engine.close()
    assert status == 2
    no_traceback(engine)
    assert "run 'recovery db upgrade' once" in engine.stderr()
