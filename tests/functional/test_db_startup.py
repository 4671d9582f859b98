"""recovery-engine started while its database does not answer, on
PostgreSQL and on MariaDB: a real engine process reaches a real server
through a TCP proxy that refuses connections at first.

It waits with one log line per attempt, tells systemd it is still
starting (EXTEND_TIMEOUT_USEC, which covers each next attempt), and
serves once the database answers: READY, then a host recovered. When the
database never answers it gives up with one line and exit status 75. No
traceback either way.
"""

import re
import time

import pytest
import sqlalchemy as sa

from recovery.db.store import open_store
from tests.fakenova import FakeNova
from tests.functional.engine_process import EngineProcess
from tests.tcpproxy import TcpProxy

HOST = "compute-1"
OUTAGE = 30.0
RETRY_INTERVAL = 2
ATTEMPT = re.compile(r"WARNING recovery\.engine \[-\] Waiting for the "
                     r"database, attempt (\d+) of (\d+): the database "
                     r"\S+ does not answer: (.*)\. Next attempt in 2 s")
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


def engine_behind(proxy, database, nova, workdir, retries):
    url = sa.engine.make_url(database).set(port=proxy.port)
    return EngineProcess(
        workdir, nova.endpoint,
        database=url.render_as_string(hide_password=False),
        extra=f"\n[database]\nmax_retries = {retries}\n"
              f"retry_interval = {RETRY_INTERVAL}\n")


def logged(engine):
    return engine.log.read_text() if engine.log.exists() else ""


def no_traceback(engine):
    for text in (logged(engine), engine.stderr()):
        assert "Traceback" not in text, text


def test_an_engine_started_with_its_database_down_serves_once_it_is_back(
        backend, database, proxy, nova, tmp_path):
    engine = engine_behind(proxy, database, nova, tmp_path, retries=60)
    try:
        started = time.monotonic()
        engine.start(ready_timeout=None)
        # The outage: nothing answers for OUTAGE seconds. Each message to
        # systemd is stamped when it arrives.
        received = []
        while time.monotonic() < started + OUTAGE:
            seen = len(engine.messages)
            engine.drain()
            received += [(time.monotonic(), m)
                         for m in engine.messages[seen:]]
            assert engine.proc.poll() is None, engine.stderr()
            time.sleep(0.05)
        assert not any(m.get("READY") for _, m in received)
        restored = time.monotonic()
        proxy.restore()
        engine.wait_ready(timeout=30)
        ready = time.monotonic()
        received.append((ready, {"READY": "1"}))

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
    # One line per attempt, numbered, each saying what the driver said.
    assert [int(n) for n, _, _ in attempts] == list(
        range(1, len(attempts) + 1))
    assert len(attempts) >= OUTAGE / (RETRY_INTERVAL + 1)
    assert {total for _, total, _ in attempts} == {"61"}
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
                     r"max_retries = 2, retry_interval = 2\)$", error), error
    assert REFUSED[backend].format(port=proxy.port) in error
    assert engine.stderr().count("\n") == 1, engine.stderr()
    print(f"{backend}: gave up after {took:.1f} s, exit status {status}")


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
