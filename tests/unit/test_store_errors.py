"""The store's choke point: a database error leaves the store as the
project's exception, over a real SQLite file."""

import contextlib
import datetime
import shutil
import sqlite3

import pytest
import sqlalchemy
from oslo_db import exception as db_exc

from recovery import exception
from recovery.db.claims import Holder
from recovery.db.store import open_store
from recovery.db.transaction import translate
from recovery.engine import runner
from recovery.notification import Kind
from recovery.notification import Status
from tests.unit.fakes import FakeClock
from tests.unit.fakes import MemoryNova
from tests.unit.fakes import make_env
from tests.unit.runs import take_at

NOW = datetime.datetime(2026, 11, 22, 10, 0, 0,
                        tzinfo=datetime.timezone.utc)
VM = {"instance_uuid": "6f1d7a3e-9a9c-4a55-8f0e-0a1c2b3d4e5f",
      "vir_domain_event": "STOPPED_FAILED", "event": "LIFECYCLE"}


@pytest.fixture
def path(tmp_path):
    (tmp_path / "db").mkdir()
    return tmp_path / "db" / "s.sqlite"


@pytest.fixture
def store(path):
    # Another writer's lock is waited for this long, not 30 s.
    store = open_store(f"sqlite:///{path}", busy_timeout=0.05)
    yield store
    store.close()


@contextlib.contextmanager
def locked(path):
    """Another process holds the write lock, as a long transaction of
    another engine or a 'recovery' command would."""
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def add(store, type="VM", kind=Kind.INSTANCE, payload=VM):
    return store.add(type=type, kind=kind, hostname="compute-1",
                     generated_time=NOW, payload=payload, origin="api",
                     status=Status.NEW, now=NOW)


def test_a_locked_database_is_unavailable_then_works_again(store, path):
    item = add(store)
    with locked(path):
        with pytest.raises(exception.StoreUnavailable,
                           match="database is locked") as caught:
            add(store)
        with pytest.raises(exception.StoreUnavailable):
            store.get(item.uuid)
        with pytest.raises(exception.StoreUnavailable):
            store.renew_leases({item.uuid: Holder("engine-a:1", 0, 60)})
    assert isinstance(caught.value.__cause__,
                      sqlalchemy.exc.OperationalError)
    assert "[database] busy_timeout" in str(caught.value)
    # Nothing half-done is left behind, and the store goes on.
    assert [n.uuid for n in store.list_notifications()] == [item.uuid]
    add(store)
    assert len(store.list_notifications()) == 2


def test_a_database_that_cannot_be_opened_is_unavailable(store, path):
    store.close()   # no pooled connection left open
    shutil.rmtree(path.parent)
    with pytest.raises(exception.StoreUnavailable,
                       match="unable to open database file"):
        store.arming()


def test_a_refused_statement_is_a_store_error_not_unavailable(store):
    """A step event of no notification breaks a foreign key: retrying
    the same statement cannot help."""
    with pytest.raises(exception.StoreError,
                       match="FOREIGN KEY constraint failed") as caught:
        store.add_step_event("no-such-notification", "lock", "RUNNING",
                             0.0, "locking", NOW)
    assert not isinstance(caught.value, exception.StoreUnavailable)


def test_a_store_error_mid_run_leaves_the_run_to_resume(store, path):
    """Not an outcome of the recovery: the attempt raises, records no
    status, and the run stays running for a resume."""
    notification = take_at(store, add(store), "engine-a:1", NOW)
    nova = MemoryNova()
    env = make_env(nova, FakeClock())
    with locked(path):
        with pytest.raises(exception.StoreUnavailable):
            runner.attempt(env, store, notification, fencing=None)
    assert nova.calls == []
    assert store.get(notification.uuid).status is Status.RUNNING


def test_an_accepted_notification_is_read_back_in_its_own_transaction(
        store):
    """Once the insert commits, nothing more can fail: the API never
    answers 503 "nothing was stored" for a stored notification."""
    transactions = []
    sqlalchemy.event.listen(store._engine, "begin",
                            lambda conn: transactions.append(conn))
    notification = add(store)
    assert len(transactions) == 1
    assert notification.status is Status.NEW
    assert store.get(notification.uuid) == notification


def test_a_lost_connection_is_told_in_the_driver_s_words_on_one_line():
    # As oslo.db raises it: its error around SQLAlchemy's, around the
    # driver's (psycopg's message spans lines); the statement and its
    # parameters (an instance's name among them) stay out.
    driver = OSError("consuming input failed: server closed the "
                     "connection unexpectedly\n\tThis probably means the "
                     "server terminated abnormally")
    raised = sqlalchemy.exc.OperationalError(
        "INSERT INTO events (subject) VALUES (%(subject)s)",
        {"subject": "vm-1"}, driver)
    error = translate(db_exc.DBConnectionError(raised))
    assert isinstance(error, exception.StoreUnavailable)
    assert str(error) == (
        "the database is unavailable: consuming input failed: server "
        "closed the connection unexpectedly This probably means the server "
        "terminated abnormally (unreachable, locked by another writer for "
        "longer than [database] busy_timeout, or out of connections); a "
        "later try may work")
