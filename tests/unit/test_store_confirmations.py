"""An operator's confirmation that a host is off, in the store: recorded
as an event of the host's latest unfinished host failure, which it makes
due at once, and of no later failure. What is due, the row locks and a
lost take run on each backend (SQLite, PostgreSQL, MariaDB); which
failure and which event are meant, on SQLite."""

import pytest

from recovery import exception
from recovery.confirmation import Confirmation
from recovery.db.events import Decision
from recovery.db.events import EventKind
from recovery.notification import Status
from tests.unit.test_store import LEASE
from tests.unit.test_store import ME
from tests.unit.test_store import NOW
from tests.unit.test_store import add
from tests.unit.test_store import claim
from tests.unit.test_store import claim_host
from tests.unit.test_store import finish
from tests.unit.test_store import holder
from tests.unit.test_store import later
from tests.unit.test_store import next_runnable
from tests.unit.test_store import open_for_test
from tests.unit.test_store import said
from tests.unit.test_store import take

HOST = "compute-1"
ALICE = "alice"
WHY = "PDU 4 of rack B7 is dead: the host is dark, checked on site"
RETURN = {"event": "STARTED", "host_status": "NORMAL",
          "cluster_status": "ONLINE"}


@pytest.fixture
def store(db_url):
    """On each backend: for what their SQL may do differently (what is
    due, the row locks, a take that lost)."""
    opened = open_for_test(db_url)
    yield opened
    opened.close()


@pytest.fixture
def sqlite_store(tmp_path):
    """On SQLite only: for which notification and which event are meant,
    the same query on every backend (each server backend costs a second
    of schema per test)."""
    opened = open_for_test(f"sqlite:///{tmp_path}/store.sqlite")
    yield opened
    opened.close()


def failed_attempt(store, status=Status.ERROR, hostname=HOST):
    """A host failure whose attempt ended ``status`` at later(10), its
    retry (if any) due at later(600)."""
    item = add(store, hostname)
    claim(store, ME, NOW, LEASE)
    finish(store, item.uuid, ME, status, "fencing failed", later(10),
           retry_at=later(600) if status is Status.ERROR else None)
    return store.get(item.uuid)


def confirmed(store, hostname=HOST, at=None):
    return store.confirm_fenced(hostname, ALICE, WHY, at or later(20))


@pytest.mark.parametrize("status", [Status.ERROR, Status.FAILED])
def test_a_waiting_failure_is_confirmed_and_due_at_once(store, status):
    item = failed_attempt(store, status)
    assert next_runnable(store, later(20)) is None
    confirmation = confirmed(store)
    assert confirmation == Confirmation(HOST, item.uuid, ALICE, WHY,
                                        later(20))
    assert store.confirmation(item.uuid) == confirmation
    stored = store.get(item.uuid)
    # A given-up one is re-opened: in error, due now.
    assert stored.status is Status.ERROR
    assert stored.next_attempt_at is None
    assert stored.version == item.version + 1
    assert stored.message == (f"confirmed off by {ALICE} at 2026-11-22 "
                              f"10:00:20 UTC: {WHY}; due again now")
    assert said(store.events(item.uuid))[-1] == (
        ALICE, HOST, "confirmed", WHY)
    # The engine's next poll, at once, takes it up.
    assert next_runnable(store, later(20)).uuid == item.uuid
    assert claim(store, ME, later(20), LEASE).uuid == item.uuid


def test_a_new_failure_held_by_a_gate_is_due_at_once(sqlite_store):
    item = add(sqlite_store)
    assert sqlite_store.hold(item, "held: too many hosts down", 300)
    confirmed(sqlite_store)
    assert sqlite_store.get(item.uuid).next_attempt_at is None
    assert sqlite_store.get(item.uuid).status is Status.NEW
    assert next_runnable(sqlite_store, NOW).uuid == item.uuid


def test_a_running_failure_is_left_to_its_run(store):
    item = add(store)
    taken = claim(store, ME, NOW, LEASE)
    confirmed(store)
    stored = store.get(item.uuid)
    assert (stored.status, stored.owner, stored.version) == (
        Status.RUNNING, ME, taken.version)
    assert store.confirmation(item.uuid).reason == WHY
    # The holder's token still holds: its run goes on and ends.
    finish(store, item.uuid, ME, Status.FINISHED, "recovered", later(30))
    assert store.get(item.uuid).status is Status.FINISHED


@pytest.mark.parametrize("end", [Status.ERROR, Status.FAILED])
def test_a_confirmation_during_an_attempt_makes_its_retry_due_at_once(
        store, end):
    """The Fence step looked for a confirmation and found none; one came
    before the run ended: the next attempt is due now, not after the
    backoff, and a given-up run is not given up."""
    item = add(store)
    claim(store, ME, NOW, LEASE)
    confirmed(store, at=later(5))
    store.lease_clock.now = later(10)
    store.finish(item.uuid, end, "fencing failed",
                 holder=holder(store, item.uuid, ME),
                 retry_in=600 if end is Status.ERROR else None,
                 event=Decision(ME, HOST, EventKind(end.value),
                                "fencing failed"))
    stored = store.get(item.uuid)
    assert (stored.status, stored.next_attempt_at) == (Status.ERROR, None)
    assert stored.message == ("fencing failed; its host was confirmed off "
                              "during the attempt: due again at once")
    assert said(store.events(item.uuid))[-1] == (
        ME, HOST, "error", stored.message)
    assert next_runnable(store, later(10)).uuid == item.uuid


def test_a_confirmation_before_the_attempt_leaves_its_end_alone(sqlite_store):
    item = failed_attempt(sqlite_store)
    confirmed(sqlite_store)
    claim(sqlite_store, ME, later(30), LEASE)
    finish(sqlite_store, item.uuid, ME, Status.ERROR, "nova down", later(40),
           retry_at=later(600))
    stored = sqlite_store.get(item.uuid)
    assert (stored.message, stored.next_attempt_at) == ("nova down",
                                                        later(600))


def test_a_take_of_what_was_read_before_the_confirmation_fails(store):
    """The confirmation changed the notification: an engine that read it
    before takes nothing, and reads it again at its next poll."""
    failed_attempt(store)
    store.lease_clock.now = later(600)
    before = store.next_runnable()
    confirmed(store)
    assert take(store, before, ME, later(600), LEASE) is None
    assert claim(store, ME, later(600), LEASE).uuid == before.uuid


def test_nothing_to_confirm_without_a_host_failure(sqlite_store):
    with pytest.raises(exception.NotFound) as caught:
        confirmed(sqlite_store)
    assert str(caught.value) == (
        f"nothing to confirm: no recovery of {HOST} is waiting for a "
        f"proof (no host failure of it is recorded); run 'recovery "
        f"host-failure {HOST}' first")
    assert sqlite_store.events() == []


def test_nothing_to_confirm_once_the_failure_finished(sqlite_store):
    item = add(sqlite_store)
    claim(sqlite_store, ME, NOW, LEASE)
    finish(sqlite_store, item.uuid, ME, Status.FINISHED, "recovered",
           later(10))
    with pytest.raises(exception.NotFound,
                       match=f"its last host failure, {item.uuid}, "
                             f"finished"):
        confirmed(sqlite_store)
    assert sqlite_store.confirmation(item.uuid) is None


def test_an_old_failure_is_not_reopened_after_the_host_returned(sqlite_store):
    """A failure given up long ago, then the host returned: that failure
    is over, whatever its status says."""
    old = failed_attempt(sqlite_store, Status.FAILED)
    add(sqlite_store, payload=RETURN, now=later(100))
    with pytest.raises(exception.NotFound, match="a host return"):
        confirmed(sqlite_store)
    assert sqlite_store.get(old.uuid).status is Status.FAILED


def test_an_ignored_notification_does_not_hide_the_waiting_failure(
        sqlite_store):
    item = failed_attempt(sqlite_store)
    add(sqlite_store, payload={"event": "STOPPED", "host_status": "UNKNOWN"},
        status=Status.IGNORED, now=later(15))
    assert confirmed(sqlite_store).notification_uuid == item.uuid


def test_a_confirmation_is_for_one_failure_only(sqlite_store):
    first = failed_attempt(sqlite_store)
    confirmed(sqlite_store)
    claim(sqlite_store, ME, later(30), LEASE)
    finish(sqlite_store, first.uuid, ME, Status.FINISHED, "recovered",
           later(40))
    second = add(sqlite_store, now=later(50))
    assert sqlite_store.confirmation(second.uuid) is None
    assert sqlite_store.confirmation(first.uuid).at == later(20)
    # Confirmed again: the new failure's own, the first one's unchanged.
    again = sqlite_store.confirm_fenced(HOST, "bob", "dark again", later(60))
    assert again.notification_uuid == second.uuid
    assert sqlite_store.confirmation(second.uuid) == again
    assert sqlite_store.confirmation(first.uuid).user == ALICE


def test_the_latest_confirmation_is_the_one(sqlite_store):
    item = failed_attempt(sqlite_store)
    confirmed(sqlite_store)
    sqlite_store.confirm_fenced(HOST, "bob", "checked again", later(30))
    assert sqlite_store.confirmation(item.uuid) == Confirmation(
        HOST, item.uuid, "bob", "checked again", later(30))


def test_another_host_s_failure_is_not_confirmed(sqlite_store):
    other = failed_attempt(sqlite_store, hostname="compute-2")
    with pytest.raises(exception.NotFound):
        confirmed(sqlite_store)
    assert sqlite_store.confirmation(other.uuid) is None
    assert sqlite_store.get(other.uuid).next_attempt_at == later(600)


def test_an_event_that_is_not_a_confirmation_is_none(sqlite_store):
    item = add(sqlite_store, event=Decision("api", HOST, EventKind.RECEIVED,
                                     "COMPUTE_HOST STOPPED"))
    assert sqlite_store.confirmation(item.uuid) is None


def by_hand(store, now):
    """What 'recovery host-failure HOST' claims."""
    return claim_host(store, hostname=HOST, owner="cli:7", now=now,
                      lease=LEASE, payload={"event": "STOPPED"})


def test_a_run_by_hand_takes_up_the_confirmed_failure(store):
    """'recovery host-failure' after a confirmation runs that failure,
    with its confirmation, not a new one without it."""
    item = failed_attempt(store)
    confirmed(store)
    taken, resumed = by_hand(store, later(30))
    assert (taken.uuid, resumed, taken.attempts) == (item.uuid, True, 2)
    assert store.confirmation(taken.uuid).reason == WHY
    assert len(store.list_notifications()) == 1


def test_a_run_by_hand_records_a_new_failure_without_a_confirmation(
        sqlite_store):
    item = failed_attempt(sqlite_store)
    taken, resumed = by_hand(sqlite_store, later(30))
    assert (resumed, taken.uuid != item.uuid) == (False, True)
    assert sqlite_store.confirmation(taken.uuid) is None


def test_a_used_confirmation_is_not_taken_up_again(sqlite_store):
    """Its attempt had it: a later run by hand is a new failure."""
    item = failed_attempt(sqlite_store)
    confirmed(sqlite_store)
    claim(sqlite_store, ME, later(30), LEASE)
    finish(sqlite_store, item.uuid, ME, Status.ERROR, "nova down", later(40),
           retry_at=later(600))
    taken, resumed = by_hand(sqlite_store, later(50))
    assert (resumed, taken.uuid != item.uuid) == (False, True)
