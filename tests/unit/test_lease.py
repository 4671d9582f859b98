"""A run's lease as its holder sees it: the local deadline that stops a
process that froze, the fencing token every journal write proves, and the
keeper that renews leases without ever reviving a lost one."""

import datetime
import logging

import pytest

from recovery import exception
from recovery.db.claims import Window
from recovery.db.tables import notifications
from recovery.engine.lease import Lease
from recovery.engine.lease import LeaseKeeper
from recovery.engine.runner import StoreRecorder
from recovery.notification import Kind
from recovery.notification import Status
from recovery.results import InstanceResult
from recovery.results import Phase

SECONDS = 60



def take(store, clock, owner):
    item = store.next_runnable()
    sent_at = clock.monotonic()
    taken = store.take(item, owner, SECONDS)
    return Lease(taken, owner, SECONDS, clock, taken_at=sent_at)


@pytest.fixture
def uuid(store, clock):
    return store.add(type="COMPUTE_HOST", kind=Kind.HOST_FAILURE,
                     hostname="compute-1", generated_time=clock.now(),
                     payload={"event": "STOPPED"}, origin="api",
                     status=Status.NEW, now=clock.now()).uuid


def recorder(store, lease, clock, uuid):
    """The run's recorder, as the engine builds it."""
    return StoreRecorder(store, lease, clock, notification=store.get(uuid))


def entry(phase=Phase.LOCKING):
    return InstanceResult(uuid="i-1", name="vm-1", source_host="compute-1",
                          original_state="active", phase=phase)


def test_a_frozen_holder_stops_at_its_own_deadline(store, clock, uuid,
                                                   caplog):
    lease = take(store, clock, "engine-a:1")
    clock.t += SECONDS - 1
    lease.check()
    # Frozen past the lease: it may no longer act, and says why once.
    clock.t += 2
    with caplog.at_level(logging.ERROR):
        for _ in range(2):
            with pytest.raises(exception.LeaseLost, match="ran out"):
                lease.check()
    assert caplog.text.count("Lost the lease") == 1


def test_each_write_extends_the_lease_from_before_it_was_sent(
        store, clock, uuid):
    lease = take(store, clock, "engine-a:1")
    run = recorder(store, lease, clock, uuid)
    clock.t += 50
    run.instance_changed(entry())
    assert store.get(uuid).lease_until == clock.now() + datetime.timedelta(
        seconds=SECONDS)
    clock.t += SECONDS - 1
    lease.check()


def test_a_late_holder_writes_nothing_after_a_takeover(store, clock, uuid):
    """The seeds' check-then-act race, distributed: the frozen engine
    wakes up after another took the run over; the journal write that
    would announce its next side effect fails, and changes nothing."""
    late = take(store, clock, "engine-a:1")
    recorder(store, late, clock, uuid).instance_changed(entry())
    clock.t += SECONDS + 1
    taker = take(store, clock, "engine-b:2")
    assert taker.holder.token == late.holder.token + 1
    with pytest.raises(exception.LeaseLost, match="no longer held"):
        # Its own deadline is moved on as if it never froze: only the
        # fencing token stops it.
        late.extended(clock.monotonic())
        recorder(store, late, clock, uuid).instance_changed(
            entry(Phase.EVACUATING))
    assert store.journal(uuid)[0].phase is Phase.LOCKING
    with pytest.raises(exception.LeaseLost):
        late.check()
    recorder(store, taker, clock, uuid).instance_changed(
        entry(Phase.EVACUATING))


def test_a_lease_that_ran_out_is_never_revived(store, clock, uuid):
    """No takeover yet, but the database's lease ran out: neither a
    renewal nor a journal write brings it back."""
    lease = take(store, clock, "engine-a:1")
    keeper = LeaseKeeper(store, clock, SECONDS)
    keeper.track(lease)
    clock.t += SECONDS
    # Its own clock says a moment is left (it measured from the take).
    lease.extended(clock.monotonic())
    keeper.renew()
    with pytest.raises(exception.LeaseLost, match="lease lost"):
        lease.check()
    with pytest.raises(exception.LeaseLost):
        recorder(store, lease, clock, uuid).step_changed(
            "lock", "RUNNING", "locking")
    assert store.step_events(uuid) == []


def test_the_keeper_renews_every_run_it_tracks(store, clock, uuid):
    lease = take(store, clock, "engine-a:1")
    keeper = LeaseKeeper(store, clock, SECONDS)
    keeper.track(lease)
    clock.t += 40
    keeper.renew()
    clock.t += 40
    keeper.renew()
    lease.check()       # still held
    assert store.get(uuid).lease_until == clock.now() + datetime.timedelta(
        seconds=SECONDS)
    # An untracked run (its worker ended) is left to run out.
    keeper.untrack(lease)
    clock.t += 40
    keeper.renew()
    assert store.get(uuid).lease_until == clock.now() + (
        datetime.timedelta(seconds=SECONDS - 40))


def test_the_keeper_renews_its_runs_in_one_call_and_loses_only_the_lost(
        store, clock, caplog):
    leases = []
    for n in range(3):
        store.add(type="COMPUTE_HOST", kind=Kind.HOST_FAILURE,
                  hostname=f"compute-{n}", generated_time=clock.now(),
                  payload={"event": "STOPPED"}, origin="api",
                  status=Status.NEW, now=clock.now())
        leases.append(take(store, clock, "engine-a:1"))
    calls = []

    class Counted:
        @staticmethod
        def renew_leases(holders):
            calls.append(sorted(holders))
            return store.renew_leases(holders)

    keeper = LeaseKeeper(Counted(), clock, SECONDS)
    for lease in leases:
        keeper.track(lease)
    # Another process took the second run over (a new token).
    lost = leases[1]
    with store._engine.begin() as conn:
        conn.execute(notifications.update().where(
            notifications.c.uuid == lost.uuid).values(
                version=notifications.c.version + 1))
    clock.t += 40
    with caplog.at_level(logging.ERROR):
        keeper.renew()
    assert calls == [sorted(lease.uuid for lease in leases)]
    assert keeper.tracked() == [leases[0], leases[2]]
    assert f"Lost the lease of notification {lost.uuid}: it is no longer " \
           f"held by engine-a:1" in caplog.text
    with pytest.raises(exception.LeaseLost):
        lost.check()
    clock.t += 40       # past the take's lease: the renewal extended them
    leases[0].check()
    leases[2].check()


def test_the_end_of_a_run_proves_the_lease_too(store, clock, uuid):
    late = take(store, clock, "engine-a:1")
    clock.t += SECONDS + 1
    take(store, clock, "engine-b:2")
    with pytest.raises(exception.LeaseLost):
        late.write(store.finish, uuid, Status.FINISHED, "done")
    row = store.get(uuid)
    assert (row.status, row.owner) == (Status.RUNNING, "engine-b:2")


def test_take_refuses_a_second_live_run_of_a_host(store, clock, uuid):
    """Two engines that each saw the host free: the second take, checked
    under the claims lock, finds the first run."""
    other = store.add(type="COMPUTE_HOST", kind=Kind.HOST_FAILURE,
                      hostname="compute-1", generated_time=clock.now(),
                      payload={"event": "STOPPED", "n": 2}, origin="api",
                      status=Status.NEW, now=clock.now())
    assert store.take(store.get(uuid), "engine-a:1", SECONDS) is not None
    assert store.take(store.get(other.uuid), "engine-b:2", SECONDS) is None


def test_take_keeps_the_window_whichever_engine_claims(store, clock):
    for host in ("compute-1", "compute-2", "compute-3"):
        store.add(type="COMPUTE_HOST", kind=Kind.HOST_FAILURE,
                  hostname=host, generated_time=clock.now(),
                  payload={"event": "STOPPED"}, origin="api",
                  status=Status.NEW, now=clock.now())
    for owner in ("engine-a:1", "engine-b:2"):
        assert store.take(store.next_runnable(), owner, SECONDS,
                          window=Window(2, 60)) is not None
    assert store.take(store.next_runnable(), "engine-c:3", SECONDS,
                      window=Window(2, 60)) is None
    clock.t += 61
    assert store.take(store.next_runnable(), "engine-c:3", SECONDS,
                      window=Window(2, 60)) is not None
