"""Leases on a shared database server, judged by its clock: an engine
whose clock is five minutes off neither takes over a live run nor keeps
one it lost."""

import datetime

import pytest
import sqlalchemy as sa

from recovery import exception
from recovery.db.connection import database_now
from recovery.db.store import open_store
from recovery.db.tables import notifications
from recovery.engine.lease import Lease
from recovery.engine.lease import LeaseKeeper
from recovery.notification import Kind
from recovery.notification import Status
from tests.unit.fakes import FakeClock

SECONDS = 30
FIVE_MINUTES = datetime.timedelta(minutes=5)


class SkewedClock(FakeClock):
    """An engine's clock, ``skew`` off the database server's."""

    def __init__(self, skew):
        super().__init__()
        self.skew = skew

    def now(self):
        return datetime.datetime.now(datetime.timezone.utc) + self.skew


@pytest.fixture(params=["postgresql", "mysql"])
def store(request):
    store = open_store(request.getfixturevalue(f"{request.param}_url"),
                       upgrade=True)
    yield store
    store.close()


def server_now(store):
    with store._engine.connect() as conn:
        return database_now(conn)


def run_out(store, uuid):
    """The lease runs out by the server's clock (moved, not waited for)."""
    with store._engine.begin() as conn:
        conn.execute(sa.update(notifications).where(
            notifications.c.uuid == uuid).values(
                lease_until=database_now(conn) - datetime.timedelta(
                    seconds=1)))


def test_an_engine_five_minutes_off_neither_takes_over_nor_keeps(store):
    ahead, behind = SkewedClock(FIVE_MINUTES), SkewedClock(-FIVE_MINUTES)
    item = store.add(type="COMPUTE_HOST", kind=Kind.HOST_FAILURE,
                     hostname="compute-1", generated_time=ahead.now(),
                     payload={"event": "STOPPED"}, origin="api",
                     status=Status.NEW, now=ahead.now())
    before = server_now(store)
    taken = store.take(store.next_runnable(), "ahead:1", SECONDS)
    lease = Lease(taken, "ahead:1", SECONDS, ahead, ahead.monotonic())
    # The lease is the server's time plus its length, whatever the
    # engine's clock says.
    expected = before + datetime.timedelta(seconds=SECONDS)
    assert abs(taken.lease_until - expected) < datetime.timedelta(seconds=5)
    # To the engine five minutes behind, the run is live: nothing to take.
    assert store.next_runnable() is None
    assert store.take(store.get(item.uuid), "behind:2", SECONDS) is None
    keeper = LeaseKeeper(store, ahead, SECONDS)
    keeper.track(lease)
    keeper.renew()
    lease.check()

    run_out(store, item.uuid)
    # Its own clock says the lease is young; the server's says it is over.
    keeper.renew()
    assert keeper.tracked() == []
    with pytest.raises(exception.LeaseLost):
        lease.check()
    other = store.take(store.next_runnable(), "behind:2", SECONDS)
    assert (other.uuid, other.owner) == (item.uuid, "behind:2")
    Lease(other, "behind:2", SECONDS, behind,
          behind.monotonic()).write(store.finish, item.uuid,
                                    Status.FINISHED, "done")
    assert store.get(item.uuid).status is Status.FINISHED
