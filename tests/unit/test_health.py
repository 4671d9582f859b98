"""``/healthcheck`` reports the database unhealthy when it cannot even
be opened, rather than answering 200 without asking it; on SQLite it
reads without the write lock."""

import sqlite3

import webob

from recovery.api import health
from recovery.db.store import open_store


def test_a_database_that_cannot_be_opened_is_not_healthy(conf):
    conf.set_override("connection", "oracle://u:s3cret@db/x", "database")
    routed = health.route(lambda environ, start: [], conf)
    response = webob.Request.blank(health.PATH).get_response(routed)
    assert response.status_int == 503
    assert response.text == "database: cannot be opened"
    assert "s3cret" not in response.text


def test_a_probe_does_not_take_sqlite_s_write_lock(conf, tmp_path):
    """While a writer holds SQLite's write lock, the probe still reads:
    it neither waits behind it (then fails, 'database is locked') nor,
    the other way round, holds up recovery's writes."""
    url = f"sqlite:///{tmp_path}/s.sqlite"
    open_store(url).close()
    conf.set_override("connection", url, "database")
    routed = health.route(lambda environ, start: [], conf)
    writer = sqlite3.connect(tmp_path / "s.sqlite", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        response = webob.Request.blank(health.PATH).get_response(routed)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert (response.status_int, response.text) == (200, "database: OK")
