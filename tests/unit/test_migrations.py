"""Migrations over a real SQLite file: a store of the previous schema
upgraded in place, with what it held."""

import datetime
import pathlib

import pytest
import sqlalchemy
from alembic.script import ScriptDirectory

from recovery import exception
from recovery.db import revisions
from recovery.db.events import Decision
from recovery.db.events import EventKind
from recovery.db.store import open_store
from recovery.notification import Kind
from recovery.notification import Status
from recovery.results import InstanceResult
from tests.unit.schema import back_to

NOW = datetime.datetime(2026, 11, 22, 10, 0, 0,
                        tzinfo=datetime.timezone.utc)
VM = {"instance_uuid": "6f1d7a3e-9a9c-4a55-8f0e-0a1c2b3d4e5f",
      "vir_domain_event": "STOPPED_FAILED", "event": "LIFECYCLE"}
# What the API and the CLI stored before 0005, and the kind each is.
STORED = [
    ("COMPUTE_HOST", {"event": "STOPPED", "host_status": "NORMAL"},
     Kind.HOST_FAILURE),
    ("COMPUTE_HOST", {"event": "STARTED", "cluster_status": "ONLINE"},
     Kind.HOST_RETURN),
    # The CLI's runs: the event alone; none at all in older tests' rows.
    ("COMPUTE_HOST", {"event": "STARTED"}, Kind.HOST_RETURN),
    ("COMPUTE_HOST", {}, Kind.HOST_FAILURE),
    ("VM", VM, Kind.INSTANCE),
    # A process's STARTED is not a host return.
    ("PROCESS", {"process_name": "nova-compute", "event": "STARTED"},
     Kind.PROCESS),
    ("PROCESS", {"process_name": "nova-compute", "event": "STOPPED"},
     Kind.PROCESS),
]


def test_0005_backfills_the_kind_of_every_stored_notification(tmp_path):
    url = f"sqlite:///{tmp_path}/s.sqlite"
    store = open_store(url)
    expected = {}
    for type, payload, kind in STORED:
        item = store.add(type=type, kind=kind, hostname="compute-1",
                         generated_time=NOW, payload=payload, origin="api",
                         status=Status.FINISHED, now=NOW)
        # Rows that refer to the notification stay valid.
        store.add_step_event(item.uuid, "step", "SUCCESS", 1.0, "done", NOW)
        store.save_instance(item.uuid, InstanceResult(
            uuid="i-1", name="vm", source_host="compute-1",
            original_state="active"), NOW)
        expected[item.uuid] = kind
    store.close()
    back_to(url, "0004")
    store = open_store(url)
    try:
        assert {n.uuid: n.kind for n in store.list_notifications()} == (
            expected)
        assert all(len(store.step_events(uuid)) == 1 for uuid in expected)
        assert all(len(store.journal(uuid)) == 1 for uuid in expected)
    finally:
        store.close()


def test_0005_backfills_host_returns_past_one_batch(tmp_path):
    """The host returns are updated in batches of ids: none is left out
    at a batch's edge."""
    url = f"sqlite:///{tmp_path}/s.sqlite"
    open_store(url).close()
    back_to(url, "0004")
    engine = sqlalchemy.create_engine(url)
    rows = [{"uuid": f"n-{n}", "type": "COMPUTE_HOST", "hostname": "h",
             "generated_time": NOW, "origin": "api", "status": "finished",
             "attempts": 1, "version": 1, "created_at": NOW,
             "updated_at": NOW,
             "payload": '{"event":"%s"}' % ("STARTED" if n % 3 else
                                           "STOPPED")}
            for n in range(1501)]
    with engine.begin() as conn:
        conn.execute(sqlalchemy.text(
            "INSERT INTO notifications (uuid, type, hostname, "
            "generated_time, payload, origin, status, attempts, version, "
            "created_at, updated_at) VALUES (:uuid, :type, :hostname, "
            ":generated_time, :payload, :origin, :status, :attempts, "
            ":version, :created_at, :updated_at)"), rows)
    engine.dispose()
    store = open_store(url)
    try:
        kinds = {n.uuid: n.kind for n in store.list_notifications()}
    finally:
        store.close()
    assert kinds == {f"n-{n}": Kind.HOST_RETURN if n % 3 else
                     Kind.HOST_FAILURE for n in range(1501)}


def test_0007_adds_the_detection_rule_to_a_store_in_use(tmp_path):
    url = f"sqlite:///{tmp_path}/s.sqlite"
    store = open_store(url)
    kept = store.add(type="VM", kind=Kind.INSTANCE, hostname="compute-1",
                     generated_time=NOW, payload=VM, origin="api",
                     status=Status.FINISHED, now=NOW)
    store.close()
    back_to(url, "0006")
    store = open_store(url)
    try:
        assert store.get(kept.uuid).detection is None
        detected = dict(type="COMPUTE_HOST", kind=Kind.HOST_FAILURE,
                        hostname="compute-2", generated_time=NOW,
                        payload={"event": "STOPPED"}, origin="detector",
                        status=Status.NEW, now=NOW,
                        detection="compute-2@2026-11-22T09:59:00")
        store.add(**detected)
        with pytest.raises(exception.Duplicate):
            store.add(**detected)
    finally:
        store.close()


def test_0008_dates_journal_entries_written_before_it(tmp_path):
    url = f"sqlite:///{tmp_path}/s.sqlite"
    store = open_store(url)
    run = store.add(type="COMPUTE_HOST", kind=Kind.HOST_FAILURE,
                    hostname="compute-1", generated_time=NOW,
                    payload={"event": "STOPPED"}, origin="api",
                    status=Status.FINISHED, now=NOW)
    store.save_instance(run.uuid, InstanceResult(
        uuid="i-1", name="vm-1", source_host="compute-1",
        original_state="active"), NOW)
    store.close()
    back_to(url, "0007")
    store = open_store(url)
    later = NOW + datetime.timedelta(minutes=5)
    try:
        [old] = store.journal_entries(run.uuid)
        assert old.created_at == NOW == old.updated_at
        store.save_instance(run.uuid, InstanceResult(
            uuid="i-2", name="vm-2", source_host="compute-1",
            original_state="active"), later)
        store.save_instance(run.uuid, old.result, later)
        entries = store.journal_entries(run.uuid)
        assert [(e.result.uuid, e.created_at, e.updated_at)
                for e in entries] == [("i-1", NOW, later),
                                      ("i-2", later, later)]
    finally:
        store.close()


def test_0009_adds_the_decision_log_to_a_store_in_use(tmp_path):
    url = f"sqlite:///{tmp_path}/s.sqlite"
    store = open_store(url)
    run = store.add(type="COMPUTE_HOST", kind=Kind.HOST_FAILURE,
                    hostname="compute-1", generated_time=NOW,
                    payload={"event": "STOPPED"}, origin="api",
                    status=Status.NEW, now=NOW)
    store.add_step_event(run.uuid, "fence", "SUCCESS", 1.0, "off", NOW)
    store.close()
    back_to(url, "0008")
    engine = sqlalchemy.create_engine(url)
    assert "events" not in sqlalchemy.inspect(engine).get_table_names()
    engine.dispose()
    store = open_store(url)
    store.lease_clock = lambda conn: NOW
    later = NOW + datetime.timedelta(minutes=5)
    try:
        # What was stored before it is kept; nothing was logged then.
        assert store.get(run.uuid).status is Status.NEW
        assert len(store.step_events(run.uuid)) == 1
        assert store.events() == []
        # The old notification takes events, and so does no notification.
        taken = store.take(store.next_runnable(), "engine-a:1", 60)
        assert taken.uuid == run.uuid
        store.add_event(Decision("detector", "compute-2", EventKind.SUSPECT,
                                 "seen down"), later)
        assert [(e.notification_uuid, e.kind) for e in store.events()] == [
            (run.uuid, "claimed"), (None, "suspect")]
        assert [e.kind for e in store.events(run.uuid)] == ["claimed"]
        assert [e.kind for e in store.events(since=later)] == ["suspect"]
    finally:
        store.close()


def _journal_one(url: str, **fields):
    """A host failure in the store at ``url``, running, with instance
    i-1 journaled (with ``fields``); the store closed again."""
    store = open_store(url)
    run = store.add(type="COMPUTE_HOST", kind=Kind.HOST_FAILURE,
                    hostname="compute-1", generated_time=NOW,
                    payload={"event": "STOPPED"}, origin="api",
                    status=Status.RUNNING, now=NOW)
    store.save_instance(run.uuid, InstanceResult(
        uuid="i-1", name="vm-1", source_host="compute-1",
        original_state="active", **fields), NOW)
    store.close()
    return run


def test_0010_adds_priority_and_capacity_to_a_journal_in_use(tmp_path):
    url = f"sqlite:///{tmp_path}/s.sqlite"
    run = _journal_one(url, method="auto")
    back_to(url, "0009")
    engine = sqlalchemy.create_engine(url)
    columns = {c["name"] for c in sqlalchemy.inspect(engine).get_columns(
        "instance_journal")}
    engine.dispose()
    assert not {"priority", "priority_phase", "capacity_warning"} & columns
    store = open_store(url)
    try:
        # The entry written before it has none of the three.
        [old] = store.journal(run.uuid)
        assert (old.method, old.priority, old.priority_phase,
                old.capacity_warning) == ("auto", None, None, None)
        old.priority, old.priority_phase = 10, 1
        old.capacity_warning = "compute-2 may lack 2048 MB of MEMORY_MB"
        store.save_instance(run.uuid, old, NOW)
        [kept] = store.journal(run.uuid)
        assert (kept.priority, kept.priority_phase, kept.capacity_warning) \
            == (10, 1, "compute-2 may lack 2048 MB of MEMORY_MB")
    finally:
        store.close()


def test_0017_journals_each_instance_s_project(tmp_path):
    """An entry written before 0017 has no project (no owner sees it);
    one written after keeps its instance's project."""
    url = f"sqlite:///{tmp_path}/s.sqlite"
    run = _journal_one(url, project_id="p-1")
    back_to(url, "0016")
    store = open_store(url)
    try:
        [old] = store.journal(run.uuid)
        assert old.project_id is None
        store.save_instance(run.uuid, InstanceResult(
            uuid="i-2", name="vm-2", source_host="compute-1",
            original_state="active", project_id="p-2"), NOW)
        assert [(r.uuid, r.project_id) for r in store.journal(run.uuid)] \
            == [("i-1", None), ("i-2", "p-2")]
    finally:
        store.close()


def test_0018_keeps_each_fencing_device_s_lag(tmp_path):
    """A store of 0017, with what it held, gets the table of the devices'
    lags, empty: no device has a lag learned before it."""
    url = f"sqlite:///{tmp_path}/s.sqlite"
    run = _journal_one(url, project_id="p-1")
    back_to(url, "0017")
    engine = sqlalchemy.create_engine(url)
    assert "fence_lags" not in sqlalchemy.inspect(
        engine).get_table_names()
    engine.dispose()
    store = open_store(url)
    store.lease_clock = lambda conn: NOW
    device = "redfish https://bmc-1:8000/redfish/v1/Systems/1"
    try:
        assert [r.project_id for r in store.journal(run.uuid)] == ["p-1"]
        assert store.fence_lag(device) is None
        learned = store.learn_fence_lag(device, "compute-1", 12.5)
        assert (learned.longest, learned.last, learned.fencings) == (
            12.5, 12.5, 1)
        assert store.fence_lag(device) == learned
    finally:
        store.close()


def test_head_revision_is_the_migrations_head():
    """A store at HEAD_REVISION is opened without alembic: were it not
    the real head of migrations/versions, a new migration would never
    run."""
    migrations = pathlib.Path(revisions.__file__).parent / "migrations"
    assert ScriptDirectory(str(migrations)).get_heads() == [
        revisions.HEAD_REVISION]
