"""``/healthcheck`` on the engine's embedded API: oslo.middleware's
healthcheck with the database as a backend, open to a caller without a
token (as Kolla's ``curl .../healthcheck``), showing no more than
oslo.middleware shows such a caller: a status and a short reason, never
the database's address or password."""

import urllib.request

import pytest
import sqlalchemy as sa

from recovery.db.store import open_store
from tests.functional.engine_process import EngineProcess
from tests.tcpproxy import TcpProxy

TOKEN = "a-static-token-of-32-characters!"
PASSWORD = "s3cret-password"


def with_token(engine, tmp_path):
    """The engine's API behind a static token."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    engine.config.write_text(engine.config.read_text().replace(
        "auth_strategy = noauth",
        f"auth_strategy = token\ntoken_file = {token_file}"))


def probe(engine, accept=None, method="GET"):
    """What a caller without a token gets: status, Content-Type, body."""
    headers = {"Accept": accept} if accept else {}
    req = urllib.request.Request(
        f"http://127.0.0.1:{engine.port}/healthcheck", method=method,
        headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return (resp.status, resp.headers["Content-Type"],
                    resp.read().decode())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def test_an_engine_on_sqlite_is_healthy_without_a_token(nova, tmp_path):
    engine = EngineProcess(tmp_path, nova.endpoint)
    with_token(engine, tmp_path)
    try:
        engine.start()
        assert probe(engine) == (200, "text/plain; charset=UTF-8",
                                 "database: OK")
        assert probe(engine, method="HEAD")[0] == 204
        # The rest of the API still needs the token.
        assert engine.request("GET", "/v1/notifications")[0] == 401
    finally:
        engine.close()


@pytest.fixture
def database(postgresql_url):
    """A PostgreSQL database with the schema, reached with a password
    (the test server trusts any)."""
    open_store(postgresql_url, upgrade=True).close()
    return sa.engine.make_url(postgresql_url).set(password=PASSWORD)


def test_a_database_gone_is_reported_without_its_address(
        database, nova, tmp_path):
    with TcpProxy(database.host, database.port) as proxy:
        behind = database.set(port=proxy.port)
        engine = EngineProcess(
            tmp_path, nova.endpoint,
            database=behind.render_as_string(hide_password=False))
        with_token(engine, tmp_path)
        try:
            engine.start()
            assert probe(engine)[0] == 200
            proxy.cut()
            answers = [probe(engine, accept) for accept in (
                "text/plain", "application/json", "text/html")]
            assert [status for status, _, _ in answers] == [503] * 3
            assert answers[0][2] == "database: not answering"
            for _, _, body in answers:
                assert PASSWORD not in body
                assert str(proxy.port) not in body
                assert "127.0.0.1" not in body
            proxy.restore()
            assert probe(engine)[0] == 200
        finally:
            engine.close()
    assert PASSWORD not in engine.log.read_text()
