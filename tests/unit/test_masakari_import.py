"""'recovery db import-masakari' from an SQLite database with Masakari
22's tables (recovery.db.masakari_source's transcription of Masakari's
models, which tests/compat/test_masakari_import.py checks against
Masakari's own): what each row becomes, what is skipped and why, a
second run, a dry run, conflicts, and the source left unwritten."""

import argparse
import datetime
import json

import pytest
import sqlalchemy as sa

from recovery import exception
from recovery.api import views
from recovery.cmd import commands
from recovery.db import masakari_import as mi
from recovery.db import masakari_source as ms
from recovery.db.tables import hosts
from recovery.db.tables import instance_journal
from recovery.db.tables import notifications
from recovery.db.tables import segments
from recovery.notification import Kind
from recovery.notification import Status

T0 = datetime.datetime(2026, 3, 1, 10, 0, 0)
NOW = datetime.datetime(2026, 11, 1, tzinfo=datetime.timezone.utc)
STOPPED = {"event": "STOPPED", "host_status": "NORMAL",
           "cluster_status": "OFFLINE"}


def at(minutes: int) -> datetime.datetime:
    return T0 + datetime.timedelta(minutes=minutes)


def utc(value: datetime.datetime) -> datetime.datetime:
    return value.replace(tzinfo=datetime.timezone.utc)


class Masakari:
    """A Masakari 22 database in an SQLite file, filled row by row as
    Masakari's DB API writes them (soft delete: ``deleted`` = the id)."""

    def __init__(self, path):
        self.url = f"sqlite:///{path}"
        self.engine = sa.create_engine(self.url)
        ms._masakari.create_all(self.engine)
        self.insert(ms.M_VERSION, version_num=ms.REVISION)

    def insert(self, table, **values):
        """The new row's id."""
        with self.engine.begin() as conn:
            return conn.execute(table.insert().values(
                **values)).lastrowid

    def delete(self, table, row_id):
        with self.engine.begin() as conn:
            conn.execute(table.update().where(table.c.id == row_id).values(
                deleted=row_id))

    def segment(self, uuid, name, method="auto", deleted=False, **more):
        values = dict(uuid=uuid, name=name, service_type="COMPUTE",
                      enabled=True, description=f"{name} hosts",
                      recovery_method=method, created_at=at(0), deleted=0)
        row = self.insert(ms.M_SEGMENTS, **{**values, **more})
        if deleted:
            self.delete(ms.M_SEGMENTS, row)

    def host(self, uuid, name, segment, deleted=False, **more):
        values = dict(uuid=uuid, name=name, reserved=False, type="COMPUTE",
                      control_attributes="SSH", on_maintenance=False,
                      failover_segment_id=segment, created_at=at(1),
                      deleted=0)
        row = self.insert(ms.M_HOSTS, **{**values, **more})
        if deleted:
            self.delete(ms.M_HOSTS, row)

    def notification(self, uuid, host, status, deleted=False,
                     type="COMPUTE_HOST", payload=STOPPED, **more):
        values = dict(notification_uuid=uuid, generated_time=at(10),
                      type=type, payload=json.dumps(payload),
                      status=status, source_host_uuid=host,
                      failover_segment_uuid="seg-1", message=None,
                      created_at=at(10), updated_at=at(12), deleted=0)
        row = self.insert(ms.M_NOTIFICATIONS, **{**values, **more})
        if deleted:
            self.delete(ms.M_NOTIFICATIONS, row)

    def vmove(self, uuid, notification, instance, status="succeeded",
              deleted=False, **more):
        values = dict(uuid=uuid, notification_uuid=notification,
                      instance_uuid=instance, instance_name=f"vm-{instance}",
                      source_host="compute-1", dest_host="compute-2",
                      start_time=at(11), end_time=at(12), type="evacuation",
                      status=status, message=None, created_at=at(11),
                      updated_at=at(12), deleted=0)
        row = self.insert(ms.M_VMOVES, **{**values, **more})
        if deleted:
            self.delete(ms.M_VMOVES, row)

    def dump(self):
        """Every row of every table: what must not change."""
        with self.engine.connect() as conn:
            return {t.name: conn.execute(sa.select(t)).all()
                    for t in ms._masakari.sorted_tables}


@pytest.fixture
def masakari(tmp_path):
    db = Masakari(tmp_path / "masakari.sqlite")
    yield db
    db.engine.dispose()


@pytest.fixture
def cloud(masakari):
    """Two segments, and one deleted; reserved, normal, maintenance and
    deleted hosts, and one left in the deleted segment; finished, failed,
    running, new and error notifications, one deleted, with vmoves in
    each of Masakari's states."""
    masakari.segment("seg-1", "rack-1")
    masakari.segment("seg-2", "rack-2", method="reserved_host",
                     description=None, updated_at=at(5))
    masakari.segment("seg-3", "old-rack", deleted=True)
    masakari.host("host-1", "compute-1", "seg-1")
    masakari.host("host-2", "compute-2", "seg-1", on_maintenance=True,
                  control_attributes="TCP")
    masakari.host("host-3", "compute-3", "seg-2", reserved=True,
                  updated_at=at(6))
    masakari.host("host-4", "compute-4", "seg-2", deleted=True)
    masakari.host("host-5", "compute-5", "seg-3")
    masakari.notification("note-1", "host-1", "finished")
    for n, status in enumerate(("succeeded", "failed", "ignored",
                                "pending", "ongoing")):
        masakari.vmove(f"vm-{n}", "note-1", f"i-{n}", status=status,
                       message=f"{status} here")
    masakari.vmove("vm-gone", "note-1", "i-9", deleted=True)
    masakari.notification("note-2", "host-3", "failed",
                          message="evacuation failed")
    masakari.vmove("vm-5", "note-2", "i-5", status="failed",
                   dest_host=None, end_time=None)
    masakari.notification("note-3", "host-1", "running")
    masakari.notification("note-4", "host-4", "new", updated_at=None)
    masakari.notification("note-5", "host-1", "error", message="Nova down")
    masakari.notification("note-6", "host-1", "finished", deleted=True)
    masakari.vmove("vm-6", "note-6", "i-6")
    masakari.notification("note-7", "host-2", "finished", type="VM",
                          payload={"event": "LIFECYCLE",
                                   "instance_uuid": "i-7",
                                   "vir_domain_event": "STOPPED_FAILED"})
    masakari.notification("note-8", "host-2", "ignored", type="PROCESS",
                          payload={"event": "STOPPED",
                                   "process_name": "nova-compute"})
    return masakari


def imported(store, masakari, dry_run=False):
    engine = ms.open_source(masakari.url)
    try:
        source = ms.read(engine)
    finally:
        engine.dispose()
    return mi.run(store, source, url=masakari.url, now=NOW,
                  dry_run=dry_run)


def results(report):
    return {(i.what, i.uuid): i.result for i in report.items}


def reason(report, uuid):
    return next(i.reason for i in report.items if i.uuid == uuid)


def counts(store):
    with store._tx() as conn:
        return {t.name: conn.execute(sa.select(sa.func.count()).select_from(
            t)).scalar() for t in (segments, hosts, notifications,
                                   instance_journal)}


def test_segments_and_hosts_keep_their_uuids_and_fields(store, cloud):
    report = imported(store, cloud)

    one = store.get_segment("seg-1")
    assert (one.name, one.description, one.recovery_method,
            one.service_type, one.enabled) == (
        "rack-1", "rack-1 hosts", "auto", "COMPUTE", True)
    # Masakari leaves updated_at NULL until an update: created_at here.
    assert one.created_at == one.updated_at == utc(at(0))
    two = store.get_segment("seg-2")
    assert (two.recovery_method, two.description, two.updated_at) == (
        "reserved_host", None, utc(at(5)))
    listed = {h.uuid: h for h in store.list_hosts("seg-1")}
    assert set(listed) == {"host-1", "host-2"}
    assert (listed["host-2"].on_maintenance,
            listed["host-2"].control_attributes) == (True, "TCP")
    reserved = store.get_host("seg-2", "host-3")
    assert (reserved.name, reserved.reserved, reserved.claimed_by,
            reserved.updated_at) == ("compute-3", True, None, utc(at(6)))
    assert [h.uuid for h in store.list_hosts("seg-2")] == ["host-3"]
    assert results(report)["segment", "seg-1"] == mi.IMPORTED
    assert results(report)["host", "host-3"] == mi.IMPORTED


def test_soft_deleted_rows_are_skipped_and_said_so(store, cloud):
    report = imported(store, cloud)

    for what, uuid in (("segment", "seg-3"), ("host", "host-4"),
                       ("host", "host-5"), ("notification", "note-6")):
        assert results(report)[what, uuid] == mi.SKIPPED
        assert "soft-deleted in Masakari" in reason(report, uuid)
    assert "segment seg-3 is" in reason(report, "host-5")
    assert "with its 1 vmove" in reason(report, "note-6")
    gone = [i for i in report.items if i.what == "vmove"]
    assert [(i.uuid, i.name, i.result, i.reason) for i in gone] == [
        ("vm-gone", "vm-i-9", mi.SKIPPED, "soft-deleted in Masakari (not "
                                          "live), of notification note-1")]
    # Not live in Masakari: nothing is left behind.
    assert report.left_behind == []
    with pytest.raises(exception.NotFound):
        store.get("note-6")
    with pytest.raises(exception.NotFound):
        store.get_segment("seg-3")


def test_notifications_are_history_with_their_vmoves(store, cloud):
    imported(store, cloud)

    finished = store.get("note-1")
    assert (finished.type, finished.kind, finished.hostname,
            finished.status, finished.payload, finished.origin,
            finished.source_host_uuid, finished.failover_segment_uuid,
            finished.generated_time, finished.created_at,
            finished.updated_at, finished.started_at) == (
        "COMPUTE_HOST", Kind.HOST_FAILURE, "compute-1", Status.FINISHED,
        STOPPED, "masakari", "host-1", "seg-1", utc(at(10)), utc(at(10)),
        utc(at(12)), None)
    shown = [views.vmove("note-1", e) for e in store.journal_entries(
        "note-1")]
    # Each of Masakari's vmove statuses reads back as itself.
    assert [(v["instance_uuid"], v["status"], v["message"])
            for v in shown] == [
        (f"i-{n}", status, f"{status} here") for n, status in enumerate(
            ("succeeded", "failed", "ignored", "pending", "ongoing"))]
    assert {(v["instance_name"], v["source_host"], v["dest_host"],
             v["start_time"], v["end_time"], v["type"]) for v in shown} == {
        ("vm-i-0", "compute-1", "compute-2", views.timestamp(at(11)),
         views.timestamp(at(12)), "evacuation")} | {
        (f"vm-i-{n}", "compute-1", "compute-2", views.timestamp(at(11)),
         views.timestamp(at(12)), "evacuation") for n in range(1, 5)}
    failed = store.get("note-2")
    assert (failed.status, failed.message, failed.hostname) == (
        Status.FAILED, "evacuation failed", "compute-3")
    [entry] = store.journal_entries("note-2")
    assert (entry.result.dest_host, entry.result.finished_at) == (None, None)
    assert store.get("note-7").kind is Kind.INSTANCE
    assert store.get("note-8").kind is Kind.PROCESS
    assert store.get("note-8").status is Status.IGNORED


def test_notifications_masakari_may_still_act_on_are_ignored(store, cloud):
    report = imported(store, cloud)

    for uuid, was in (("note-3", "running"), ("note-4", "new"),
                      ("note-5", "error (Nova down)")):
        item = store.get(uuid)
        assert item.status is Status.IGNORED
        assert item.message.startswith(
            f"Imported from Masakari, where it was {was}: Masakari may "
            f"still have been working on it, so recovery does not act "
            f"on it.")
        assert "as ignored" in reason(report, uuid)
    assert "'recovery host-failure compute-1'" in store.get(
        "note-3").message
    # The host deleted since keeps its name from its deleted row.
    assert store.get("note-4").hostname == "compute-4"
    # Its updated_at was NULL in Masakari.
    assert store.get("note-4").updated_at == utc(at(10))
    # Nothing for an engine to pick up, no gate counts them, and the
    # segment can be edited.
    for status in (Status.NEW, Status.RUNNING, Status.ERROR):
        assert store.list_notifications(
            filters={"status": status.value}) == []
    assert store.hosts_in_recovery() == set()
    store.update_segment("seg-1", {"description": "edited"}, NOW)


def test_a_second_run_imports_nothing(store, cloud):
    first = imported(store, cloud)
    before = counts(store)

    second = imported(store, cloud)

    assert counts(store) == before
    assert before == {"segments": 2, "hosts": 3, "notifications": 7,
                      "instance_journal": 6}
    assert {k: v for k, v in results(second).items()
            if v != mi.SKIPPED} == {
        k: mi.PRESENT for k, v in results(first).items()
        if v == mi.IMPORTED}
    assert second.summary() == (
        "imported: nothing; already imported: 2 segments, 3 hosts, "
        "7 notifications; skipped: 1 segment, 2 hosts, 1 notification, "
        "1 vmove")
    assert first.summary() == (
        "imported: 2 segments, 3 hosts, 7 notifications, 6 vmoves; "
        "already imported: nothing; skipped: 1 segment, 2 hosts, "
        "1 notification, 1 vmove")


def test_a_dry_run_writes_nothing_and_says_the_same(store, cloud):
    dry = imported(store, cloud, dry_run=True)

    assert counts(store) == {"segments": 0, "hosts": 0, "notifications": 0,
                             "instance_journal": 0}
    assert "(dry run: nothing written)" in dry.render()
    assert "would import" in dry.render()
    assert results(dry) == results(imported(store, cloud))


def test_masakari_s_database_is_not_written(store, cloud):
    before = cloud.dump()
    imported(store, cloud)
    imported(store, cloud)
    assert cloud.dump() == before


def test_the_source_connection_is_read_only(cloud):
    engine = ms.open_source(cloud.url)
    try:
        with pytest.raises(sa.exc.OperationalError, match="readonly"):
            with engine.begin() as conn:
                conn.execute(ms.M_VERSION.delete())
    finally:
        engine.dispose()


def test_an_entry_changed_in_recovery_is_not_overwritten(store, cloud):
    imported(store, cloud)
    store.update_host("seg-2", "host-3", {"reserved": False}, NOW)
    store.update_segment("seg-1", {"recovery_method": "reserved_host"},
                         NOW)

    report = imported(store, cloud)

    assert results(report)["host", "host-3"] == mi.SKIPPED
    assert reason(report, "host-3").startswith(
        "recovery has it with other content, left as it is: reserved False "
        "in recovery, True in Masakari; updated_at ")
    assert "recovery_method 'reserved_host' in recovery, 'auto' in " \
           "Masakari" in reason(report, "seg-1")
    assert store.get_host("seg-2", "host-3").reserved is False
    assert store.get_segment("seg-1").recovery_method == "reserved_host"
    assert {i.uuid for i in report.left_behind} == {"host-3", "seg-1"}
    assert "2 live entries were left behind" in report.render()


def test_a_changed_vmove_is_a_different_notification(store, cloud):
    imported(store, cloud)
    with cloud.engine.begin() as conn:
        conn.execute(ms.M_VMOVES.update().where(
            ms.M_VMOVES.c.uuid == "vm-3").values(status="succeeded"))

    report = imported(store, cloud)

    assert results(report)["notification", "note-1"] == mi.SKIPPED
    assert ("vmove of i-3: phase 'pending' in recovery, 'done' in "
            "Masakari") in reason(report, "note-1")


def test_a_name_recovery_has_under_another_uuid(store, cloud):
    store.create_segment(name="rack-2", recovery_method="auto", now=NOW)
    store.create_host(store.get_segment("rack-2").uuid, name="compute-1",
                      now=NOW)

    report = imported(store, cloud)

    assert results(report)["segment", "seg-2"] == mi.SKIPPED
    assert reason(report, "seg-2").startswith(
        "recovery has another segment named rack-2 (")
    assert results(report)["host", "host-3"] == mi.SKIPPED
    assert reason(report, "host-3") == "its segment rack-2 was not imported"
    assert reason(report, "host-1").startswith(
        "recovery has another host named compute-1 (")
    assert {i.uuid for i in report.left_behind} == {"seg-2", "host-3",
                                                    "host-1"}
    # The rest is imported, notifications of those hosts too.
    assert store.get("note-2").hostname == "compute-3"


def test_what_recovery_cannot_hold_is_left_behind(store, masakari):
    masakari.segment("seg-1", "rack-1")
    masakari.host("host-1", "compute-1", "seg-1")
    masakari.notification("odd", "host-1", "finished",
                          payload={"event": "REBOOTED"})
    masakari.notification("bad", "host-1", "finished", payload=None)
    masakari.notification("lost", "nowhere", "finished")
    masakari.notification("note", "host-1", "finished")
    masakari.vmove("v-1", "note", "i-1")
    masakari.vmove("v-2", "note", "i-1")
    masakari.vmove("v-3", "note", "i-3", type="live_migration")
    with masakari.engine.begin() as conn:
        conn.execute(ms.M_NOTIFICATIONS.update().where(
            ms.M_NOTIFICATIONS.c.notification_uuid == "bad").values(
                payload="{not json"))

    report = imported(store, masakari)

    assert reason(report, "odd") == (
        "a COMPUTE_HOST notification with event 'REBOOTED' is not one "
        "recovery knows")
    assert reason(report, "bad").startswith("its payload is not JSON")
    assert reason(report, "lost") == (
        "its host nowhere is not in Masakari's database")
    assert reason(report, "v-2") == (
        "of notification note: a second vmove of instance i-1 (recovery "
        "keeps one journal entry per instance and notification)")
    assert reason(report, "v-3") == (
        "of notification note: a live_migration (recovery's journal holds "
        "evacuations only)")
    assert reason(report, "note") == "with 1 vmove"
    assert {i.uuid for i in report.left_behind} == {"odd", "bad", "lost",
                                                    "v-2", "v-3"}
    assert [e.result.uuid for e in store.journal_entries("note")] == ["i-1"]
    # Again: the same ones left behind, nothing twice.
    again = imported(store, masakari)
    assert {i.uuid for i in again.left_behind} == {"odd", "bad", "lost",
                                                   "v-2", "v-3"}
    assert results(again)["notification", "note"] == mi.PRESENT


def test_a_database_that_is_not_masakari_22_is_refused(store, masakari):
    with masakari.engine.begin() as conn:
        conn.execute(ms.M_VERSION.update().values(version_num="8bdf5929c5a6"))
    with pytest.raises(exception.ConfigError, match=(
            "at Masakari schema revision 8bdf5929c5a6, not Masakari 22's "
            "13adff5efb9a: upgrade it")):
        imported(store, masakari)
    with masakari.engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE masakari_alembic_version"))
    with pytest.raises(exception.ConfigError, match=(
            "is not a Masakari 22 database: it has no "
            "masakari_alembic_version table")):
        imported(store, masakari)


@pytest.mark.parametrize("url, driver", [
    ("mysql://masakari:secret@db/masakari", "mysql+pymysql"),
    ("mysql+pymysql://masakari:secret@db/masakari", "mysql+pymysql"),
    ("postgresql://masakari@db/masakari", "postgresql+psycopg"),
    ("postgresql+psycopg://masakari@db/masakari", "postgresql+psycopg"),
])
def test_urls_as_oslo_db_writes_them(url, driver):
    assert ms.source_url(url).drivername == driver


def test_other_databases_are_refused():
    with pytest.raises(exception.ConfigError, match="cannot be oracle"):
        ms.source_url("oracle://db/masakari")
    with pytest.raises(exception.ConfigError, match="not a database URL"):
        ms.source_url("masakari")
    with pytest.raises(exception.ConfigError, match="not a database URL"):
        ms.source_url("mysql://masakari@db:port/masakari")
    with pytest.raises(exception.ConfigError, match="is not installed"):
        ms.open_source("mysql+mysqldb://masakari@db/masakari")


def test_the_command_refuses_a_port_that_is_not_a_number(tmp_path, conf):
    """``--from`` goes through the store's own URL parsing, and its
    refusal names ``--from``: the command line shows it in one line."""
    conf.set_override("connection", f"sqlite:///{tmp_path}/r.sqlite",
                      "database")
    args = argparse.Namespace(source="mysql://masakari@db:port/masakari",
                              dry_run=False)
    with pytest.raises(exception.ConfigError) as raised:
        commands.import_masakari(conf, args)
    assert str(raised.value).startswith("--from is not a database URL: ")
    assert "\n" not in str(raised.value)


def test_a_missing_sqlite_file_is_refused_and_not_created(tmp_path):
    typo = tmp_path / "masakri.sqlite"
    with pytest.raises(exception.ConfigError, match=(
            f"there is no SQLite database at {typo}")):
        ms.open_source(f"sqlite:///{typo}")
    assert not typo.exists()


def test_the_url_may_come_from_the_environment(monkeypatch):
    """$MASAKARI_DATABASE_URL keeps the password out of ps and the
    shell's history; without it or --from, the command says what to
    give."""
    url = "mysql+pymysql://masakari:s3cret@db/masakari"
    monkeypatch.setenv(commands.MASAKARI_URL_VARIABLE, url)
    args = commands.build_parser().parse_args(["db", "import-masakari"])
    assert args.source == url
    monkeypatch.delenv(commands.MASAKARI_URL_VARIABLE)
    args = commands.build_parser().parse_args(["db", "import-masakari"])
    assert commands.import_masakari(None, args) == commands.EXIT_USAGE


def test_an_unreachable_database_names_it_without_its_password():
    engine = ms.open_source("mysql://masakari:s3cret@127.0.0.1:1/masakari")
    with pytest.raises(exception.StoreUnavailable) as caught:
        ms.read(engine)
    assert "mysql+pymysql://masakari:***@127.0.0.1:1/masakari" in str(
        caught.value)
    assert "s3cret" not in str(caught.value)


def test_the_command_exits_2_when_it_left_a_live_entry_behind(
        tmp_path, conf, cloud, capsys):
    conf.set_override("connection", f"sqlite:///{tmp_path}/r.sqlite",
                      "database")
    args = argparse.Namespace(source=cloud.url, dry_run=False)

    assert commands.import_masakari(conf, args) == commands.EXIT_OK
    assert commands.import_masakari(conf, args) == commands.EXIT_OK
    with cloud.engine.begin() as conn:
        conn.execute(ms.M_SEGMENTS.update().where(
            ms.M_SEGMENTS.c.uuid == "seg-1").values(name="rack-one"))
    assert commands.import_masakari(conf, args) == commands.EXIT_USAGE

    last = capsys.readouterr().out.split("Masakari's database")[-1]
    assert "rack-one" in last
    assert last.endswith("\n1 live entry was left behind: see their "
                         "reasons above\n")
