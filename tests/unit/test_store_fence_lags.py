"""Each fencing device's lag, in the store (recovery.db.fence_lags), on
each backend (SQLite, PostgreSQL, MariaDB): learned from each fencing,
one device apart from another, and shared by the engines of one
database, a first fencing learned by two at once included."""

import pytest
import sqlalchemy as sa

from recovery.db.tables import fence_lags
from recovery.pacing import Lag
from tests.unit.test_store import NOW
from tests.unit.test_store import later
from tests.unit.test_store import open_for_test

DEVICE = "redfish https://bmc-1:8000/redfish/v1/Systems/1"
OTHER_DEVICE = "ipmi 10.0.0.12"


@pytest.fixture
def store(db_url):
    opened = open_for_test(db_url)
    yield opened
    opened.close()


@pytest.fixture(params=["postgresql", "mysql"])
def server_url(request):
    """A server database: on SQLite, BEGIN IMMEDIATE serializes two
    engines' transactions, so neither can learn inside the other's."""
    return request.getfixturevalue(f"{request.param}_url")


def row(store, device):
    with store._engine.connect() as conn:
        return conn.execute(fence_lags.select().where(
            fence_lags.c.device == device)).one()


def test_a_device_never_fenced_has_no_lag(store):
    assert store.fence_lag(DEVICE) is None


def test_the_first_fencing_is_the_lag(store):
    learned = store.learn_fence_lag(DEVICE, "compute-1", 12.5)
    assert learned == Lag(longest=12.5, last=12.5, fencings=1)
    assert store.fence_lag(DEVICE) == learned


def test_a_faster_fencing_keeps_the_longest(store):
    store.learn_fence_lag(DEVICE, "compute-1", 12.5)
    learned = store.learn_fence_lag(DEVICE, "compute-1", 3.25)
    assert learned == Lag(longest=12.5, last=3.25, fencings=2)
    assert store.fence_lag(DEVICE) == learned


def test_a_slower_fencing_raises_the_longest(store):
    store.learn_fence_lag(DEVICE, "compute-1", 12.5)
    store.learn_fence_lag(DEVICE, "compute-1", 3.25)
    learned = store.learn_fence_lag(DEVICE, "compute-1", 40.1)
    assert learned == Lag(longest=40.1, last=40.1, fencings=3)
    assert store.fence_lag(DEVICE) == learned


def test_each_device_has_its_own_lag(store):
    store.learn_fence_lag(DEVICE, "compute-1", 12.5)
    store.learn_fence_lag(OTHER_DEVICE, "compute-2", 0.5)
    store.learn_fence_lag(OTHER_DEVICE, "compute-2", 1.5)
    assert store.fence_lag(DEVICE) == Lag(12.5, 12.5, 1)
    assert store.fence_lag(OTHER_DEVICE) == Lag(1.5, 1.5, 2)


def test_the_host_last_fenced_and_when_by_the_database_s_clock(store):
    store.learn_fence_lag(DEVICE, "compute-1", 12.5)
    first = row(store, DEVICE)
    assert (first.host, first.updated_at) == ("compute-1", NOW)
    store.lease_clock.now = later(300)
    store.learn_fence_lag(DEVICE, "compute-7", 3.25)
    second = row(store, DEVICE)
    assert (second.host, second.updated_at) == ("compute-7", later(300))


def test_another_engine_learns_on_what_the_first_learned(store, db_url):
    other = open_for_test(db_url)
    try:
        store.learn_fence_lag(DEVICE, "compute-1", 12.5)
        assert other.fence_lag(DEVICE) == Lag(12.5, 12.5, 1)
        assert other.learn_fence_lag(DEVICE, "compute-2", 3.25) == (
            Lag(12.5, 3.25, 2))
        assert store.fence_lag(DEVICE) == Lag(12.5, 3.25, 2)
    finally:
        other.close()


def test_a_first_fencing_learned_by_two_engines_at_once_counts_both(
        server_url):
    """The other engine inserts the device's row after this one found
    none to update, and before its own insert: that insert is a
    duplicate, and this fencing is added to the other's."""
    store, other = open_for_test(server_url), open_for_test(server_url)
    raced = []

    def race(conn, clauseelement, *args):
        if (not raced and isinstance(clauseelement, sa.sql.Insert)
                and clauseelement.table is fence_lags):
            raced.append(other.learn_fence_lag(DEVICE, "compute-2", 30.0))

    sa.event.listen(store._engine, "before_execute", race)
    try:
        learned = store.learn_fence_lag(DEVICE, "compute-1", 10.0)
        assert raced == [Lag(30.0, 30.0, 1)]
        assert learned == Lag(longest=30.0, last=10.0, fencings=2)
        assert other.fence_lag(DEVICE) == learned
        assert row(store, DEVICE).host == "compute-1"
    finally:
        sa.event.remove(store._engine, "before_execute", race)
        store.close()
        other.close()
