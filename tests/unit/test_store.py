"""The store's contract, on each backend (SQLite, PostgreSQL, MariaDB):
notifications, duplicates, paging, claiming and leases judged by the
database's clock (a fake one here, so times are exact), the instance
journal, step events and the decision log."""

import contextlib
import datetime
import socket
import subprocess
import sys
import threading
import time

import pytest
import sqlalchemy as sa

from recovery import exception
from recovery import intake
from recovery.concurrency import ThreadTaskPool
from recovery.db.claims import Holder
from recovery.db.claims import Start
from recovery.db.claims import Window
from recovery.db.events import Decision
from recovery.db.events import EventKind
from recovery.db.store import open_store
from recovery.notification import Kind
from recovery.notification import Status
from recovery.notification import classify
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import Phase
from tests.unit.schema import back_to

UTC = datetime.timezone.utc
NOW = datetime.datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)
STOPPED = {"event": "STOPPED", "host_status": "NORMAL",
           "cluster_status": "OFFLINE"}
LEASE = 60.0
ME = "engine-a:1"
OTHER = "engine-b:2"


def later(seconds):
    return NOW + datetime.timedelta(seconds=seconds)


class DatabaseClock:
    """The database's clock, as the test sets it."""

    def __init__(self):
        self.now = NOW

    def __call__(self, conn):
        return self.now


@pytest.fixture
def url(db_url):
    return db_url


@pytest.fixture
def sqlite_url(tmp_path):
    return f"sqlite:///{tmp_path}/s.sqlite"


def open_for_test(url):
    store = open_store(url, upgrade=True)
    store.lease_clock = DatabaseClock()
    return store


@pytest.fixture
def store(url):
    store = open_for_test(url)
    yield store
    store.close()


def add(store, hostname="compute-1", *, type="COMPUTE_HOST",
        payload=None, status=Status.NEW, now=NOW, generated_time=None,
        **kwargs):
    payload = STOPPED if payload is None else payload
    return store.add(type=type, kind=classify(type, payload),
                     hostname=hostname, generated_time=generated_time or now,
                     payload=payload, origin="api", status=status, now=now,
                     **kwargs)


def claim_host(store, *, payload, now, owner, actor=None, **kwargs):
    """What the CLI does (``intake.by_hand``), at ``now`` by the
    database's clock: the kind is decided from the payload."""
    store.lease_clock.now = now
    return intake.by_hand(store, kind=classify("COMPUTE_HOST", payload),
                          owner=owner, actor=actor or owner, **kwargs)


def holder(store, uuid, owner):
    """``owner`` as the holder of the run it took last."""
    return Holder(owner, store.get(uuid).version, LEASE)


def finish(store, uuid, owner, status, message, now, retry_at=None):
    store.lease_clock.now = now
    store.finish(uuid, status, message, holder=holder(store, uuid, owner),
                 retry_in=None if retry_at is None else (
                     retry_at - now).total_seconds())


def renew(store, owner, now):
    """What an engine's lease keeper does for each run it holds."""
    store.lease_clock.now = now
    assert store.renew_leases({
        item.uuid: holder(store, item.uuid, owner)
        for item in store.list_notifications(
            filters={"owner": owner, "status": "running"})}) == set()


def next_runnable(store, now, **kwargs):
    store.lease_clock.now = now
    return store.next_runnable(**kwargs)


def take(store, item, owner, now, lease, window=None):
    store.lease_clock.now = now
    return store.take(item, owner, lease, window=window)


def dead_owner():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return f"{socket.gethostname()}:{child.pid}"


# -- add / get ---------------------------------------------------------------
def test_add_get_round_trip(store):
    generated = datetime.datetime(2026, 11, 22, 9, 59, 30, 123456,
                                  tzinfo=UTC)
    added = add(store, generated_time=generated, message="why",
                source_host_uuid="svc-1")
    got = store.get(added.uuid)
    assert got == added
    assert got.payload == STOPPED
    assert got.type == "COMPUTE_HOST"
    assert got.hostname == "compute-1"
    assert got.status is Status.NEW
    assert got.origin == "api"
    assert got.message == "why"
    assert got.source_host_uuid == "svc-1"
    assert got.attempts == 0
    assert got.generated_time == generated
    assert got.generated_time.tzinfo is not None
    assert got.generated_time.utcoffset() == datetime.timedelta(0)
    assert got.created_at == got.updated_at == NOW
    assert got.created_at.tzinfo is not None


def test_add_converts_other_offsets_to_utc(store):
    plus_two = datetime.timezone(datetime.timedelta(hours=2))
    generated = datetime.datetime(2026, 11, 22, 12, 0, tzinfo=plus_two)
    got = store.get(add(store, generated_time=generated).uuid)
    assert got.generated_time == generated
    assert got.generated_time.utcoffset() == datetime.timedelta(0)
    assert got.generated_time.hour == 10


def test_get_unknown_uuid_is_not_found(store):
    with pytest.raises(exception.NotFound):
        store.get("00000000-0000-0000-0000-000000000000")


# -- duplicates --------------------------------------------------------------
def test_duplicate_within_window_is_refused_and_not_stored(store):
    first = add(store, duplicate_window=180)
    with pytest.raises(exception.Duplicate, match=first.uuid):
        add(store, generated_time=later(60), now=later(61),
            duplicate_window=180)
    with pytest.raises(exception.Duplicate):
        add(store, generated_time=later(-60), now=later(61),
            duplicate_window=180)
    assert [n.uuid for n in store.list_notifications()] == [first.uuid]


def test_duplicate_payload_key_order_does_not_matter(store):
    add(store, duplicate_window=180)
    reordered = dict(reversed(list(STOPPED.items())))
    with pytest.raises(exception.Duplicate):
        add(store, payload=reordered, generated_time=later(1),
            duplicate_window=180)


def test_different_payload_host_or_type_is_accepted(store):
    add(store, duplicate_window=180)
    add(store, payload={**STOPPED, "host_status": "UNKNOWN"},
        generated_time=later(1), duplicate_window=180)
    add(store, "compute-2", generated_time=later(1), duplicate_window=180)
    add(store, type="PROCESS", generated_time=later(1),
        duplicate_window=180)
    assert len(store.list_notifications()) == 4


def test_a_later_event_past_the_window_is_accepted(store):
    add(store, duplicate_window=180)
    add(store, generated_time=later(181), duplicate_window=180)
    assert len(store.list_notifications()) == 2


def test_an_event_dated_in_the_future_blocks_no_later_report(store):
    # A monitor's clock a day ahead: its event is stored, and the host's
    # next failure, reported with the right time, is not refused.
    add(store, generated_time=later(86400), now=later(0),
        duplicate_window=180)
    add(store, generated_time=later(600), now=later(600),
        duplicate_window=180)
    assert len(store.list_notifications()) == 2


def test_an_event_older_than_one_stored_is_a_duplicate(store):
    # Masakari's rule: every stored one generated since this one's time
    # less the window, with no upper end.
    first = add(store, generated_time=later(3600), now=later(3600),
                duplicate_window=180)
    with pytest.raises(exception.Duplicate, match=first.uuid):
        add(store, generated_time=later(-181), now=later(3601),
            duplicate_window=180)
    assert [n.uuid for n in store.list_notifications()] == [first.uuid]


def test_window_zero_disables_the_check(store):
    add(store)
    add(store, duplicate_window=0)
    add(store, duplicate_window=0)
    assert len(store.list_notifications()) == 3


def test_duplicate_window_at_the_end_of_time(store):
    end = datetime.datetime(9999, 12, 31, 23, 59, tzinfo=UTC)
    start = datetime.datetime(1, 1, 1, 0, 1, tzinfo=UTC)
    add(store, generated_time=start, duplicate_window=180)
    add(store, generated_time=end, duplicate_window=180)
    with pytest.raises(exception.Duplicate):
        add(store, generated_time=end, duplicate_window=180)
    with pytest.raises(exception.Duplicate):
        add(store, generated_time=start, duplicate_window=180)


# -- list --------------------------------------------------------------------
@pytest.fixture
def listed(store):
    """Five notifications, created one second apart."""
    items = [
        add(store, "compute-1", now=later(0)),
        add(store, "compute-2", now=later(1), status=Status.IGNORED),
        add(store, "compute-1", now=later(2), type="PROCESS",
            payload={"process_name": "nova-compute", "event": "STOPPED"},
            status=Status.IGNORED),
        add(store, "compute-3", now=later(3)),
        add(store, "compute-1", now=later(4), status=Status.FAILED),
    ]
    return items


def uuids(items):
    return [n.uuid for n in items]


def test_list_default_is_newest_first(store, listed):
    assert uuids(store.list_notifications()) == uuids(reversed(listed))


def test_list_sort_ascending_and_by_other_keys(store, listed):
    assert uuids(store.list_notifications(sort_dir="asc")) == uuids(listed)
    by_host = store.list_notifications(sort_key="hostname", sort_dir="asc")
    assert [n.hostname for n in by_host] == [
        "compute-1", "compute-1", "compute-1", "compute-2", "compute-3"]
    # Ties on the sort key fall back to the id, in the same direction.
    assert uuids(by_host[:3]) == uuids([listed[0], listed[2], listed[4]])


def test_list_filters(store, listed):
    assert uuids(store.list_notifications(
        filters={"hostname": "compute-1"})) == uuids(
            [listed[4], listed[2], listed[0]])
    assert uuids(store.list_notifications(
        filters={"status": "ignored"})) == uuids([listed[2], listed[1]])
    assert uuids(store.list_notifications(
        filters={"type": "PROCESS"})) == uuids([listed[2]])
    assert uuids(store.list_notifications(
        filters={"hostname": "compute-1", "status": "new"})) == uuids(
            [listed[0]])
    assert store.list_notifications(filters={"hostname": "nope"}) == []


def test_list_generated_since(store, listed):
    found = store.list_notifications(generated_since=later(3),
                                     sort_dir="asc")
    assert uuids(found) == uuids(listed[3:])


def test_list_limit(store, listed):
    assert uuids(store.list_notifications(limit=2)) == uuids(
        [listed[4], listed[3]])


@pytest.mark.parametrize("sort_dir", ["asc", "desc"])
@pytest.mark.parametrize("by", ["id", "uuid"])
def test_list_marker_paging(store, listed, sort_dir, by):
    pages = []
    marker = None
    while True:
        page = store.list_notifications(limit=2, marker=marker,
                                        sort_dir=sort_dir)
        if not page:
            break
        pages.append(uuids(page))
        marker = str(page[-1].id) if by == "id" else page[-1].uuid
    expected = listed if sort_dir == "asc" else list(reversed(listed))
    assert [len(p) for p in pages] == [2, 2, 1]
    assert sum(pages, []) == uuids(expected)


def test_list_marker_paging_with_ties_on_the_sort_key(store, listed):
    """Three notifications share a hostname; paging by one at a time
    still sees each once."""
    seen = []
    marker = None
    for _ in range(10):
        page = store.list_notifications(limit=1, marker=marker,
                                        sort_key="hostname")
        if not page:
            break
        seen.append(page[0].uuid)
        marker = page[0].uuid
    assert sorted(seen) == sorted(uuids(listed))


@pytest.mark.parametrize("marker", ["999", "no-such-uuid", "\u00b2",
                                    "\u0661", "9" * 30])
def test_list_unknown_marker_is_not_found(store, listed, marker):
    with pytest.raises(exception.NotFound, match=marker):
        store.list_notifications(marker=marker)


# -- next_runnable and take -------------------------------------------------
def claim(store, owner, now, lease):
    """What the engine does, without its gates."""
    while (item := next_runnable(store, now)) is not None:
        taken = take(store, item, owner, now, lease)
        if taken is not None:
            return taken
    return None


def test_claim_takes_the_oldest_new_compute_host(store):
    first = add(store, "compute-1", now=later(0))
    add(store, "compute-2", now=later(1))
    claimed = claim(store, ME, later(10), LEASE)
    assert claimed.uuid == first.uuid
    assert claimed.status is Status.RUNNING
    assert claimed.owner == ME
    assert claimed.lease_until == later(10 + LEASE)
    assert claimed.attempts == 1
    stored = store.get(first.uuid)
    assert stored.status is Status.RUNNING
    assert stored.owner == ME
    assert stored.lease_until == later(10 + LEASE)
    assert stored.attempts == 1
    assert stored.version == claimed.version == first.version + 1


def test_claim_takes_vm_and_process_notifications(store):
    vm = add(store, type="VM", payload={"instance_uuid": "x",
                                        "vir_domain_event": "STOPPED_FAILED",
                                        "event": "LIFECYCLE"})
    process = add(store, "compute-2", type="PROCESS",
                  payload={"process_name": "nova-compute",
                           "event": "STOPPED"})
    assert claim(store, ME, NOW, LEASE).uuid == vm.uuid
    assert claim(store, ME, NOW, LEASE).uuid == process.uuid


def test_claim_never_takes_what_is_over(store):
    add(store, "compute-2", status=Status.IGNORED)
    add(store, "compute-3", status=Status.FINISHED)
    add(store, "compute-4", status=Status.FAILED)
    assert claim(store, ME, NOW, LEASE) is None


def test_a_claimed_notification_is_not_claimed_again(store):
    first = add(store, "compute-1", now=later(0))
    second = add(store, "compute-2", now=later(1))
    assert claim(store, ME, NOW, LEASE).uuid == first.uuid
    assert claim(store, OTHER, NOW, LEASE).uuid == second.uuid
    assert claim(store, OTHER, NOW, LEASE) is None


def test_claim_skips_a_host_with_a_live_run(store):
    running = add(store, "compute-1", now=later(0))
    add(store, "compute-1", now=later(1),
        payload={**STOPPED, "cluster_status": "ONLINE"})
    other = add(store, "compute-2", now=later(2))
    assert claim(store, ME, NOW, LEASE).uuid == running.uuid
    # The second compute-1 notification waits for the first run.
    assert claim(store, OTHER, NOW, LEASE).uuid == other.uuid
    assert claim(store, OTHER, NOW, LEASE) is None


def test_claim_takes_over_an_expired_lease(store):
    item = add(store)
    claim(store, ME, NOW, LEASE)
    assert claim(store, OTHER, later(LEASE - 1), LEASE) is None
    taken = claim(store, OTHER, later(LEASE + 1), LEASE)
    assert taken.uuid == item.uuid
    assert taken.owner == OTHER
    assert taken.lease_until == later(2 * LEASE + 1)
    # A resumed run continues its attempt.
    assert taken.attempts == 1
    assert store.get(item.uuid).attempts == 1


def test_claim_takes_over_from_a_dead_process(store):
    item = add(store)
    gone = dead_owner()
    claim(store, gone, NOW, LEASE)
    # The lease is still valid, but its owner has exited.
    taken = claim(store, ME, later(1), LEASE)
    assert taken.uuid == item.uuid
    assert taken.owner == ME
    assert taken.attempts == 1


def test_claim_leaves_a_live_owner_of_another_host_alone(store):
    add(store)
    # A process on another machine cannot be checked: only the lease
    # tells.
    claim(store, "elsewhere.example:1", NOW, LEASE)
    assert claim(store, ME, later(1), LEASE) is None


def test_claim_retries_an_error_when_due(store):
    item = add(store)
    claim(store, ME, NOW, LEASE)
    finish(store, item.uuid, ME, Status.ERROR, "nova down", later(1),
           retry_at=later(100))
    assert store.get(item.uuid).next_attempt_at == later(100)
    assert claim(store, ME, later(99), LEASE) is None
    taken = claim(store, ME, later(100), LEASE)
    assert taken.uuid == item.uuid
    assert taken.attempts == 2
    assert taken.next_attempt_at is None
    stored = store.get(item.uuid)
    assert stored.attempts == 2
    assert stored.next_attempt_at is None


# -- finish / renew ----------------------------------------------------------
def test_finish_by_the_owner(store):
    item = add(store)
    claim(store, ME, NOW, LEASE)
    finish(store, item.uuid, ME, Status.FINISHED, "done", later(5))
    stored = store.get(item.uuid)
    assert stored.status is Status.FINISHED
    assert stored.message == "done"
    assert stored.owner is None
    assert stored.lease_until is None
    assert stored.updated_at == later(5)
    # Finished: never claimed again, and cannot be finished twice.
    assert claim(store, ME, later(1000), LEASE) is None
    with pytest.raises(exception.RecoveryError):
        finish(store, item.uuid, ME, Status.FAILED, "again", later(6))


def test_finish_by_another_owner_is_refused(store):
    item = add(store)
    claim(store, ME, NOW, LEASE)
    with pytest.raises(exception.RecoveryError, match=OTHER):
        finish(store, item.uuid, OTHER, Status.FINISHED, "done", later(5))
    assert store.get(item.uuid).status is Status.RUNNING


def test_finish_after_a_takeover_is_refused(store):
    item = add(store)
    claim(store, ME, NOW, LEASE)
    claim(store, OTHER, later(LEASE + 1), LEASE)
    with pytest.raises(exception.RecoveryError):
        finish(store, item.uuid, ME, Status.FINISHED, "late", later(70))
    finish(store, item.uuid, OTHER, Status.FINISHED, "done", later(70))


def test_renew_extends_the_lease(store):
    item = add(store)
    claim(store, ME, NOW, LEASE)
    renew(store, ME, later(50))
    assert store.get(item.uuid).lease_until == later(50 + LEASE)
    # Not expired at the original lease end any more.
    assert claim(store, OTHER, later(LEASE + 1), LEASE) is None


def test_renew_leaves_other_owners_alone(store):
    mine = add(store, "compute-1")
    theirs = add(store, "compute-2", now=later(1))
    claim(store, ME, NOW, LEASE)
    claim(store, OTHER, NOW, LEASE)
    renew(store, ME, later(30))
    assert store.get(mine.uuid).lease_until == later(30 + LEASE)
    assert store.get(theirs.uuid).lease_until == later(LEASE)


def test_an_engine_s_leases_are_renewed_in_one_statement(store):
    items = [add(store, f"compute-{n}", now=later(n)) for n in range(3)]
    for _ in items:
        claim(store, ME, NOW, LEASE)
    updates = []
    sa.event.listen(store._engine, "before_cursor_execute",
                    lambda conn, cursor, statement, *_: updates.append(
                        statement) if statement.startswith("UPDATE") else None)
    renew(store, ME, later(30))
    assert len(updates) == 1
    for item in items:
        assert store.get(item.uuid).lease_until == later(30 + LEASE)


def test_a_renewal_names_the_runs_no_longer_held(store):
    taken_over, ran_out = (add(store, f"compute-{n}", now=later(n))
                           for n in range(2))
    claim(store, ME, NOW, LEASE)
    claim(store, ME, NOW, LEASE)
    kept = add(store, "compute-3", now=later(2))
    claim(store, ME, later(30), LEASE)
    holders = {item.uuid: holder(store, item.uuid, ME)
               for item in (kept, taken_over, ran_out)}
    # Two leases ran out; another engine took one of those runs over.
    take(store, store.get(taken_over.uuid), OTHER, later(LEASE + 1), LEASE)
    store.lease_clock.now = later(LEASE + 2)
    assert store.renew_leases(holders) == {taken_over.uuid, ran_out.uuid}
    assert store.get(kept.uuid).lease_until == later(2 * LEASE + 2)
    # Neither the other engine's run nor the one that ran out is revived.
    assert store.get(taken_over.uuid).owner == OTHER
    assert store.get(taken_over.uuid).lease_until == later(2 * LEASE + 1)
    assert store.get(ran_out.uuid).lease_until == later(LEASE)


# -- claim_host --------------------------------------------------------------
def test_claim_host_records_a_new_run(store):
    item, resumed = claim_host(store, hostname="compute-1", owner=ME,
                               now=NOW, lease=LEASE,
                               payload={"event": "STOPPED"})
    assert resumed is False
    assert item.status is Status.RUNNING
    assert item.origin == "cli"
    assert item.owner == ME
    assert item.attempts == 1
    assert item.lease_until == later(LEASE)
    assert item.payload == {"event": "STOPPED"}
    assert store.get(item.uuid) == item
    # The engine does not take a host the CLI is recovering.
    add(store, "compute-1", now=later(1))
    assert claim(store, OTHER, later(1), LEASE) is None


def test_claim_host_resumes_an_abandoned_run(store):
    first, _ = claim_host(store, hostname="compute-1", owner=dead_owner(),
                          now=NOW, lease=LEASE, payload={})
    item, resumed = claim_host(store, hostname="compute-1", owner=ME,
                               now=later(1), lease=LEASE, payload={})
    assert resumed is True
    assert item.uuid == first.uuid
    assert item.owner == ME
    assert item.attempts == 1
    assert len(store.list_notifications()) == 1


def test_claim_host_resumes_an_engine_run_whose_lease_expired(store):
    item = add(store)
    claim(store, OTHER, NOW, LEASE)
    taken, resumed = claim_host(store, hostname="compute-1", owner=ME,
                                now=later(LEASE + 1), lease=LEASE,
                                payload={})
    assert resumed is True
    assert taken.uuid == item.uuid
    assert store.get(item.uuid).owner == ME


def test_claim_host_refuses_a_host_with_a_live_owner(store):
    item = add(store)
    claim(store, OTHER, NOW, LEASE)
    with pytest.raises(exception.RecoveryInProgress,
                       match=f"{OTHER}.*{item.uuid}"):
        claim_host(store, hostname="compute-1", owner=ME, now=later(1),
                   lease=LEASE, payload={})
    assert len(store.list_notifications()) == 1
    # Another host is free.
    _, resumed = claim_host(store, hostname="compute-2", owner=ME,
                            now=later(1), lease=LEASE, payload={})
    assert resumed is False


def test_claim_host_checks_and_records_in_one_transaction(store, url,
                                                         monkeypatch):
    """An engine that claims right after claim_host's check must find the
    host busy, not start a second run next to the CLI's."""
    add(store)
    engine = open_for_test(url)
    claimed = []
    real_tx = store._tx

    @contextlib.contextmanager
    def tx():
        with real_tx() as conn:
            yield conn
        if not claimed:
            claimed.append(claim(engine, OTHER, NOW, LEASE))

    monkeypatch.setattr(store, "_tx", tx)
    try:
        claim_host(store, hostname="compute-1", owner=ME, now=NOW,
                   lease=LEASE, payload={})
    except exception.RecoveryInProgress:
        pass
    finally:
        engine.close()
    owners = [n.owner for n in store.list_notifications(
        filters={"hostname": "compute-1", "status": "running"})]
    assert len(owners) == 1, owners


# -- journal and step events -------------------------------------------------
def test_save_instance_upserts_and_journal_round_trips(store):
    item = add(store)
    started = later(1)
    first = InstanceResult(uuid="i-1", name="vm-1", source_host="compute-1",
                           original_state="active", started_at=started,
                           phase=Phase.LOCKING, locked_by_us=True)
    second = InstanceResult(uuid="i-2", name="vm-2",
                            source_host="compute-1",
                            original_state="stopped")
    store.save_instance(item.uuid, first, later(1))
    store.save_instance(item.uuid, second, later(2))
    assert store.journal(item.uuid) == [first, second]

    first.phase = Phase.EVACUATING
    first.migration_floor = 41
    store.save_instance(item.uuid, first, later(3))
    first.phase = Phase.DONE
    first.outcome = Outcome.RECOVERED
    first.dest_host = "compute-2"
    first.final_state = "active"
    first.finished_at = later(9)
    first.locked_by_us = False
    first.priority, first.priority_phase = -5, 2
    first.capacity_warning = "compute-2 may lack room " + "x" * 400
    store.save_instance(item.uuid, first, later(9))

    journal = store.journal(item.uuid)
    assert journal == [first, second]
    got = journal[0]
    assert got.migration_floor == 41
    assert (got.priority, got.priority_phase) == (-5, 2)
    assert journal[1].priority is journal[1].capacity_warning is None
    assert got.phase is Phase.DONE
    assert got.outcome is Outcome.RECOVERED
    assert got.started_at == started
    assert got.started_at.tzinfo is not None
    assert got.finished_at == later(9)
    assert journal[1].outcome is None
    assert journal[1].phase is Phase.PENDING
    assert journal[1].migration_floor is None


def test_journal_is_per_notification(store):
    one = add(store, "compute-1")
    two = add(store, "compute-2")
    result = InstanceResult(uuid="i-1", name="vm-1",
                            source_host="compute-1",
                            original_state="active")
    store.save_instance(one.uuid, result, NOW)
    assert store.journal(two.uuid) == []
    assert store.journal(one.uuid) == [result]


def test_step_events_in_order(store):
    item = add(store)
    events = [("disable_host", "RUNNING", 0.0, "disabling", later(1)),
              ("disable_host", "SUCCESS", 1.0, "disabled", later(1)),
              ("evacuate", "RUNNING", 0.1, "evacuating", later(1)),
              ("evacuate", "FAILURE", 1.0, "failed", later(2))]
    for step, state, progress, message, at in events:
        store.add_step_event(item.uuid, step, state, progress, message, at)
    got = store.step_events(item.uuid)
    assert [(e.step, e.state, e.progress, e.message, e.created_at)
            for e in got] == events
    assert store.step_events(add(store, "compute-2").uuid) == []


def test_upgrade_resumes_the_retired_resetting_phase_as_locking(
        sqlite_url):
    """Migration 0002: a journal left in "resetting" by an older version
    reads back as "locking" (locked, not yet evacuated)."""
    url = sqlite_url
    store = open_store(url)
    item = add(store)
    store.save_instance(item.uuid, InstanceResult(
        uuid="i-1", name="vm", source_host="compute-1",
        original_state="active", phase=Phase.LOCKING), NOW)
    store.close()
    back_to(url, "0001",
            "UPDATE instance_journal SET phase = 'resetting'")
    store = open_store(url)
    try:
        [entry] = store.journal(item.uuid)
    finally:
        store.close()
    assert entry.phase is Phase.LOCKING


# -- the safety gates' state -------------------------------------------------
STARTED = {"event": "STARTED", "host_status": "NORMAL",
           "cluster_status": "ONLINE"}


def test_a_held_notification_waits_and_keeps_its_attempts(store):
    item = add(store)
    assert store.hold(next_runnable(store, NOW), "held: why", 30)
    assert next_runnable(store, later(29)) is None
    held = store.get(item.uuid)
    assert (held.status, held.attempts, held.message) == (
        Status.NEW, 0, "held: why")
    taken = claim(store, ME, later(30), LEASE)
    assert taken.uuid == item.uuid
    assert taken.attempts == 1


def test_hold_loses_to_a_concurrent_change(store):
    add(store)
    seen = next_runnable(store, NOW)
    assert take(store, seen, OTHER, NOW, LEASE) is not None
    assert not store.hold(seen, "held", 30)
    assert store.get(seen.uuid).status is Status.RUNNING


def test_resume_only_takes_abandoned_runs(store):
    add(store, "compute-1")
    abandoned = add(store, "compute-2")
    take(store, store.get(abandoned.uuid), dead_owner(), NOW, LEASE)
    assert next_runnable(store, later(1), resume_only=True).uuid == (
        abandoned.uuid)
    claim(store, ME, later(1), LEASE)
    assert next_runnable(store, later(1), resume_only=True) is None


def test_started_at_is_kept_across_attempts(store):
    item = add(store)
    first = claim(store, ME, later(5), LEASE)
    assert first.started_at == later(5)
    finish(store, item.uuid, ME, Status.ERROR, "again", later(6))
    assert claim(store, ME, later(10), LEASE).started_at == later(5)


def test_recoveries_started_within_counts_host_failures_only(store):
    add(store, "compute-1")
    add(store, "compute-2", payload=STARTED)
    add(store, "compute-3")
    for seconds in (1, 2, 3):
        claim(store, f"owner-{seconds}", later(seconds), LEASE)
    store.lease_clock.now = later(10)
    # How long ago, by the database's clock, oldest first.
    assert store.recoveries_started_within(7.5) == [Start(7.0, None)]
    assert store.recoveries_started_within(10) == [Start(9.0, None),
                                                   Start(7.0, None)]


def test_a_failure_domain_is_one_start_of_the_window(store):
    """Three hosts of rack-1, down as a whole, take one slot of a window
    of two; a host alone takes the other, and a fourth start waits."""
    for host in ("r1-a", "alone", "r1-b", "r1-c", "late"):
        add(store, host)
    rack = Window(2, 60, "rack-1")
    for n, host in enumerate(("r1-a", "alone", "r1-b", "r1-c")):
        window = Window(2, 60) if host == "alone" else rack
        taken = take(store, next_runnable(store, later(n)), ME, later(n),
                     LEASE, window)
        assert (taken.hostname, taken.failure_domain) == (
            host, window.domain)
    assert store.recoveries_started_within(60) == [
        Start(3.0, "rack-1"), Start(2.0, None)]
    late = next_runnable(store, later(4))
    assert take(store, late, ME, later(4), LEASE, Window(2, 60)) is None
    assert take(store, late, ME, later(4), LEASE,
                Window(2, 60, "rack-2")) is None
    events = [e.message for e in store.events(host="r1-b")]
    assert events[-1].endswith(
        "one of failure domain rack-1, down as a whole")


def test_a_release_after_a_hold_is_an_event_with_its_reason(store):
    item = add(store)
    store.lease_clock.now = NOW
    store.hold(item, "held by the brake", 30, event=Decision(
        "engine", item.hostname, EventKind.HELD, "held by the brake"))
    waiting = next_runnable(store, later(31))
    take(store, waiting, ME, later(31), LEASE,
         Window(10, 60, released="failure domain rack-1 is down as a whole"))
    kinds = [(e.kind, e.message) for e in store.events(item.uuid)]
    assert kinds[-3:] == [
        ("held", "held by the brake"),
        ("released", "failure domain rack-1 is down as a whole"),
        ("claimed", f"attempt 1 starts on {ME}")]


def test_no_release_event_without_a_hold(store):
    item = add(store)
    take(store, next_runnable(store, NOW), ME, NOW, LEASE,
         Window(10, 60, released="the gates pass"))
    assert "released" not in [e.kind for e in store.events(item.uuid)]


def test_hosts_in_recovery_are_the_running_host_failures(store):
    for host in ("compute-1", "compute-2", "compute-3"):
        add(store, host, payload=STARTED if host == "compute-2" else STOPPED)
    add(store, "compute-4", status=Status.ERROR)
    claim(store, ME, NOW, LEASE)
    claim(store, OTHER, NOW, LEASE)
    assert store.hosts_in_recovery() == {"compute-1"}


def test_arming_is_armed_until_disarmed(store):
    assert store.arming().armed
    store.set_arming(False, "ops@bastion", "network work in rack 3", NOW)
    arming = store.arming()
    assert (arming.armed, arming.changed_by, arming.reason,
            arming.changed_at) == (False, "ops@bastion",
                                   "network work in rack 3", NOW)
    store.set_arming(True, "ops@bastion", None, later(60))
    assert store.arming().armed


def test_claim_host_never_resumes_a_run_of_another_event(store):
    item = add(store)
    take(store, store.get(item.uuid), dead_owner(), NOW, LEASE)
    with pytest.raises(exception.RecoveryInProgress,
                       match="recovery host-failure compute-1"):
        claim_host(store, hostname="compute-1", owner=ME, now=later(1),
                   lease=LEASE, payload={"event": "STARTED"})
    resumed, again = claim_host(store, hostname="compute-1", owner=ME,
                                now=later(1), lease=LEASE,
                                payload={"event": "STOPPED"})
    assert (resumed.uuid, again) == (item.uuid, True)


# -- the detector's one-notification rule ------------------------------------
def detect(store, hostname="compute-1", heartbeat="2026-11-22T09:59:00"):
    return add(store, hostname, detection=f"{hostname}@{heartbeat}")


def finished(store, item):
    take(store, item, ME, NOW, LEASE)
    finish(store, item.uuid, ME, Status.FINISHED, "done", NOW)


def _in_two_groups(store, write, first, others):
    """``write(first)`` alone, its commit held until ``write`` has been
    called for each of ``others`` (they queue for the next group
    meanwhile); the outcomes of all, and the number of commits."""
    held = threading.Event()
    commits = []

    @sa.event.listens_for(store._engine, "commit")
    def _commit(conn):
        commits.append(1)
        if held.is_set():
            return
        held.set()
        deadline = time.monotonic() + 10
        while (len(store._group.pending) < len(others)
               and time.monotonic() < deadline):
            time.sleep(0.01)

    alone = ThreadTaskPool(1)
    outcome = []
    thread = threading.Thread(
        target=lambda: outcome.extend(alone.run(write, [first])))
    thread.start()
    assert held.wait(10)
    outcomes = ThreadTaskPool(len(others)).run(write, others)
    thread.join(10)
    sa.event.remove(store._engine, "commit", _commit)
    return outcome + outcomes, len(commits)


def _entry(n, phase=Phase.LOCKING):
    return InstanceResult(uuid=f"i-{n}", name=f"vm-{n}",
                          source_host="compute-1", original_state="active",
                          phase=phase)


def test_concurrent_journal_entries_are_committed_together(store):
    """Group commit: the entries written while one transaction commits go
    in the next one, and each writer returns only once its own entry is
    committed (what it announces may happen then)."""
    item = add(store)
    claim(store, ME, NOW, LEASE)
    mine = holder(store, item.uuid, ME)

    def write(n):
        store.save_instance(item.uuid, _entry(n), later(1), holder=mine)
        return {r.uuid for r in store.journal(item.uuid)}

    outcomes, commits = _in_two_groups(store, write, 0, list(range(1, 8)))
    # Each saw its own entry in the store as soon as it returned.
    assert all(o.error is None and f"i-{o.item}" in o.value
               for o in outcomes)
    # The first entry alone, then the seven that queued behind it (and
    # the eight reads).
    assert commits == 2 + 8
    assert len(store.journal(item.uuid)) == 8
    finish(store, item.uuid, ME, Status.FINISHED, "done", NOW)


def test_a_lost_lease_fails_only_its_own_run_s_entries_in_a_group(store):
    lost_run, held_run = add(store), add(store, "compute-2")
    claim(store, ME, NOW, LEASE)
    claim(store, ME, NOW, LEASE)
    lost = holder(store, lost_run.uuid, ME)
    held = holder(store, held_run.uuid, ME)
    # Another engine took the first run over.
    claim(store, OTHER, later(LEASE + 1), LEASE)
    store.lease_clock.now = later(5)

    def write(what):
        uuid, by, n = what
        store.save_instance(uuid, _entry(n, Phase.EVACUATING), later(6),
                            holder=by)

    outcomes, commits = _in_two_groups(
        store, write, (held_run.uuid, held, 0),
        [(lost_run.uuid, lost, 1), (held_run.uuid, held, 2)])
    assert commits == 2
    errors = {o.item[2]: type(o.error) for o in outcomes if o.error}
    assert errors == {1: exception.LeaseLost}
    assert [(r.uuid, r.phase) for r in store.journal(held_run.uuid)] == [
        ("i-0", Phase.EVACUATING), ("i-2", Phase.EVACUATING)]
    assert store.journal(lost_run.uuid) == []


def test_one_failure_is_detected_once_by_racing_engines(url):
    """Three engines that see one failure at once store one notification:
    on a server database the unique index decides, whoever checked
    first."""
    stores = [open_for_test(url) for _ in range(3)]
    try:
        for round in range(5):
            host = f"compute-{round}"
            start = threading.Barrier(len(stores))

            def race(store, start=start, host=host):
                start.wait(timeout=10)
                try:
                    detect(store, host)
                except exception.Duplicate:
                    return "duplicate"
                return "stored"

            outcomes = [o.value for o in ThreadTaskPool(3).run(race, stores)]
            assert sorted(outcomes) == ["duplicate", "duplicate", "stored"]
        assert len(stores[0].list_notifications()) == 5
    finally:
        for store in stores:
            store.close()


def test_a_new_failure_of_the_same_host_is_a_new_detection(store):
    first = detect(store)
    finished(store, first)
    second = detect(store, heartbeat="2026-11-22T11:00:00")
    assert second.uuid != first.uuid
    with pytest.raises(exception.Duplicate, match="detected already"):
        detect(store, heartbeat="2026-11-22T11:00:00")


def test_no_detection_while_the_host_has_an_open_failure(store):
    reported = add(store)   # a monitor's, through the API
    with pytest.raises(exception.Duplicate, match=reported.uuid):
        detect(store)
    finished(store, reported)
    detect(store)


# -- the decision log --------------------------------------------------------
def said(events):
    return [(e.actor, e.subject, e.kind, e.message) for e in events]


def test_events_read_back_in_order_with_their_filters(store):
    one = add(store, "compute-1", event=Decision(
        "api", "compute-1", EventKind.RECEIVED, "COMPUTE_HOST STOPPED"))
    two = add(store, "compute-2", now=later(10), event=Decision(
        "api", "compute-2", EventKind.IGNORED, "host_status is UNKNOWN"))
    store.add_event(Decision("detector", "compute-3", EventKind.SUSPECT,
                             "seen down"), later(20))
    store.save_instance(one.uuid, InstanceResult(
        uuid="i-1", name="vm-1", source_host="compute-1",
        original_state="active", phase=Phase.EVACUATING), later(30),
        event=Decision(ME, "vm-1 (i-1)", EventKind.EVACUATING,
                       "evacuating from compute-1 (auto)"))
    # Microseconds are kept, on every backend.
    at = later(40) + datetime.timedelta(microseconds=250)
    store.add_step_event(one.uuid, "fence", "SUCCESS", 1.0, "powered off",
                         at, event=Decision(ME, "compute-1",
                                            EventKind.FENCED, "powered off"))
    everything = store.events()
    assert said(everything) == [
        ("api", "compute-1", "received", "COMPUTE_HOST STOPPED"),
        ("api", "compute-2", "ignored", "host_status is UNKNOWN"),
        ("detector", "compute-3", "suspect", "seen down"),
        (ME, "vm-1 (i-1)", "evacuating", "evacuating from compute-1 (auto)"),
        (ME, "compute-1", "fenced", "powered off")]
    assert [e.notification_uuid for e in everything] == [
        one.uuid, two.uuid, None, one.uuid, one.uuid]
    assert [e.created_at for e in everything] == [
        NOW, later(10), later(20), later(30), at]
    assert everything[0].created_at.tzinfo is not None
    assert [e.id for e in everything] == sorted(e.id for e in everything)

    assert store.events(one.uuid) == [everything[i] for i in (0, 3, 4)]
    assert store.events(two.uuid) == [everything[1]]
    assert store.events(since=later(20)) == everything[2:]
    assert store.events(since=later(41)) == []
    # The last ones, still oldest first.
    assert store.events(limit=2) == everything[3:]
    assert store.events(one.uuid, since=later(30), limit=1) == [
        everything[4]]
    # A host's own events, and its notifications' (its instances').
    assert store.events(host="compute-1") == [
        everything[i] for i in (0, 3, 4)]
    assert store.events(host="compute-3") == [everything[2]]
    assert store.events(host="compute-9") == []


def test_a_run_s_event_is_written_only_while_it_holds_the_run(store):
    """The event goes with its journal write, step or end: in the same
    transaction, behind the same lease check."""
    item = add(store)
    claim(store, ME, NOW, LEASE)
    mine = holder(store, item.uuid, ME)
    # The lease ran out; another engine took the run over.
    claim(store, OTHER, later(LEASE + 1), LEASE)
    before = store.events(item.uuid)
    result = InstanceResult(uuid="i-1", name="vm-1",
                            source_host="compute-1",
                            original_state="active",
                            phase=Phase.EVACUATING)
    late = Decision(ME, "vm-1 (i-1)", EventKind.EVACUATING, "too late")
    with pytest.raises(exception.LeaseLost):
        store.save_instance(item.uuid, result, later(62), holder=mine,
                            event=late)
    with pytest.raises(exception.LeaseLost):
        store.add_step_event(item.uuid, "fence", "SUCCESS", 1.0, "off",
                             later(62), holder=mine, event=late)
    with pytest.raises(exception.LeaseLost):
        store.finish(item.uuid, Status.FINISHED, "done", holder=mine,
                     event=late)
    assert store.events(item.uuid) == before
    assert store.journal(item.uuid) == []
    assert store.step_events(item.uuid) == []

    theirs = holder(store, item.uuid, OTHER)
    store.save_instance(item.uuid, result, later(63), holder=theirs,
                        event=Decision(OTHER, "vm-1 (i-1)",
                                       EventKind.EVACUATING, "in time"))
    store.finish(item.uuid, Status.FINISHED, "1 recovered", holder=theirs,
                 event=Decision(OTHER, "compute-1", EventKind.FINISHED,
                                "1 recovered"))
    assert said(store.events(item.uuid))[len(before):] == [
        (OTHER, "vm-1 (i-1)", "evacuating", "in time"),
        (OTHER, "compute-1", "finished", "1 recovered")]


def test_a_claim_and_a_takeover_are_events(store):
    item = add(store)
    claim(store, ME, NOW, LEASE)
    finish(store, item.uuid, ME, Status.ERROR, "again", later(1))
    claim(store, ME, later(5), LEASE)
    claim(store, OTHER, later(5 + LEASE), LEASE)
    assert said(store.events(item.uuid)) == [
        (ME, "compute-1", "claimed", f"attempt 1 starts on {ME}"),
        (ME, "compute-1", "claimed", f"attempt 2 starts on {ME}"),
        (OTHER, "compute-1", "taken-over",
         f"taken over from {ME} (its lease ran out at 10:01:05 UTC): "
         f"attempt 2 resumes from its journal on {OTHER}")]


def test_a_takeover_from_a_process_that_exited_says_so(store):
    item = add(store)
    gone = dead_owner()
    take(store, store.get(item.uuid), gone, NOW, LEASE)
    claim(store, ME, later(1), LEASE)
    assert store.events(item.uuid)[-1].message == (
        f"taken over from {gone} (its process has exited): attempt 1 "
        f"resumes from its journal on {ME}")


def test_a_run_by_hand_is_the_operator_s_claim(store):
    item, _ = claim_host(store, hostname="compute-1", owner=ME,
                         actor="alice@ctl-1", payload={"event": "STOPPED"},
                         lease=LEASE, now=NOW)
    [event] = store.events(item.uuid)
    assert (event.actor, event.subject, event.kind, event.message) == (
        "alice@ctl-1", "compute-1", "claimed",
        f"run by hand ('recovery host-failure compute-1'): attempt 1 "
        f"starts on {ME}")
    assert event.created_at == NOW


def test_a_run_by_hand_is_recorded_by_its_host_s_segment_entry(store):
    """As a monitor's is; and the operator vouches for the host: one on
    maintenance in a disabled segment is run all the same."""
    segment = store.create_segment(name="rack-1", recovery_method="auto",
                                   enabled=False, now=NOW)
    host = store.create_host(segment.uuid, name="compute-1",
                             on_maintenance=True, now=NOW)
    item, _ = claim_host(store, hostname="compute-1", owner=ME,
                         payload={"event": "STARTED"}, lease=LEASE, now=NOW)
    assert (item.type, item.kind, item.origin, item.status) == (
        "COMPUTE_HOST", Kind.HOST_RETURN, "cli", Status.RUNNING)
    assert item.payload == {"event": "STARTED"}
    assert (item.source_host_uuid, item.failover_segment_uuid) == (
        host.uuid, segment.uuid)
    [event] = store.events(item.uuid)
    assert event.message.startswith(
        "run by hand ('recovery host-return compute-1')")


def test_a_hold_is_recorded_once_per_cause(store):
    item = add(store)
    brake = Decision(ME, "compute-1", EventKind.HELD, "held by the brake")
    window = Decision(ME, "compute-1", EventKind.HELD, "waiting: window")
    for cause in (brake, brake, window, window, brake):
        assert store.hold(next_runnable(store, store.lease_clock.now),
                          f"{cause.message}; again soon", 1, event=cause)
        store.lease_clock.now += datetime.timedelta(seconds=1)
    assert [e.message for e in store.events(item.uuid)] == [
        "held by the brake", "waiting: window", "held by the brake"]
    # A hold that lost to a claim records nothing.
    seen = next_runnable(store, store.lease_clock.now)
    take(store, seen, OTHER, store.lease_clock.now, LEASE)
    assert not store.hold(seen, "held", 1, event=window)
    assert store.events(item.uuid)[-1].kind == "claimed"


def test_arming_and_disarming_are_events(store):
    store.set_arming(False, "alice@ctl-1", "rack 3 network work", NOW)
    store.set_arming(True, "bob@ctl-2", None, later(60))
    assert said(store.events()) == [
        ("alice@ctl-1", "all hosts", "disarmed",
         "no recovery starts until 'recovery arm': rack 3 network work"),
        ("bob@ctl-2", "all hosts", "armed",
         "recoveries start again; what waited runs if it is still valid")]


def test_events_of_some_kinds(store):
    for kind in (EventKind.CAPACITY_SHORT, EventKind.HELD,
                 EventKind.CAPACITY_OK, EventKind.HELD):
        store.add_event(Decision("e-1", "rack-1", kind, kind.value), NOW)
    store.add_event(Decision("e-1", "rack-2", EventKind.CAPACITY_SHORT,
                             "other"), NOW)
    wanted = ("capacity-short", "capacity-ok")
    assert [e.kind for e in store.events(host="rack-1", kinds=wanted)] == [
        "capacity-short", "capacity-ok"]
    [last] = store.events(host="rack-1", kinds=wanted, limit=1)
    assert last.kind == "capacity-ok"
