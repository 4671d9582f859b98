"""``recovery segment ...`` and ``recovery host ...`` end to end: a real
subprocess against the fake Nova, on the store the engine reads."""

import datetime
import json

import pytest

from recovery.db.claims import Holder
from recovery.db.store import open_store
from recovery.notification import Kind
from recovery.notification import Status
from tests.functional.cli_process import run_cli
from tests.functional.cli_process import write_config

UTC = datetime.timezone.utc


@pytest.fixture
def config(fake_nova, tmp_path):
    for host in ("compute-1", "compute-2"):
        fake_nova.add_compute(host)
    return write_config(tmp_path, fake_nova, retries=0)


def ok(config, *args):
    proc = run_cli(config, *args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def as_json(config, *args):
    return json.loads(ok(config, *args, "--format", "json"))


def test_segment_lifecycle(config):
    created = as_json(config, "segment", "create", "rack-1",
                      "--recovery-method", "reserved_host",
                      "--description", "first rack")
    assert (created["name"], created["recovery_method"],
            created["service_type"], created["enabled"],
            created["description"]) == (
        "rack-1", "reserved_host", "compute", True, "first rack")
    as_json(config, "segment", "create", "rack-2", "--recovery-method",
            "auto", "--service-type", "COMPUTE", "--disabled")
    listed = as_json(config, "segment", "list")
    assert [(s["name"], s["enabled"]) for s in listed] == [
        ("rack-2", False), ("rack-1", True)]
    table = ok(config, "segment", "list")
    assert "| rack-1" in table and "reserved_host" in table

    shown = ok(config, "segment", "show", created["uuid"])
    assert "| name" in shown and "rack-1" in shown
    updated = as_json(config, "segment", "update", "rack-1", "--name",
                      "rack-one", "--recovery-method", "auto", "--disable")
    assert (updated["uuid"], updated["name"], updated["recovery_method"],
            updated["enabled"]) == (created["uuid"], "rack-one", "auto",
                                    False)
    enabled = as_json(config, "segment", "update", "rack-one", "--enable")
    assert enabled["enabled"] is True

    deleted = ok(config, "segment", "delete", "rack-one")
    assert f"Deleted failover segment rack-one ({created['uuid']})" in (
        deleted)
    assert [s["name"] for s in as_json(config, "segment", "list")] == [
        "rack-2"]


def test_host_lifecycle(config, fake_nova):
    ok(config, "segment", "create", "rack-1", "--recovery-method", "auto")
    created = as_json(config, "host", "create", "rack-1", "compute-1",
                      "--reserved", "--control-attributes", "SSH")
    assert (created["name"], created["type"], created["reserved"],
            created["on_maintenance"], created["control_attributes"],
            created["failover_segment"]["name"]) == (
        "compute-1", "COMPUTE", True, False, "SSH", "rack-1")
    ok(config, "host", "create", "rack-1", "compute-2", "--on-maintenance")
    listed = as_json(config, "host", "list", "rack-1")
    assert [(h["name"], h["on_maintenance"]) for h in listed] == [
        ("compute-2", True), ("compute-1", False)]
    assert "Hosts of failover segment rack-1" in ok(config, "host", "list",
                                                    "rack-1")

    # The command the intake's message names.
    back = as_json(config, "host", "update", "rack-1", "compute-2",
                   "--no-maintenance")
    assert back["on_maintenance"] is False
    spare = as_json(config, "host", "update", "rack-1", created["uuid"],
                    "--no-reserved", "--maintenance")
    assert (spare["reserved"], spare["on_maintenance"]) == (False, True)
    shown = ok(config, "host", "show", "rack-1", "compute-1")
    assert "| failover_segment" in shown and "rack-1" in shown

    assert "Removed host compute-1 from failover segment rack-1" in ok(
        config, "host", "delete", "rack-1", "compute-1")
    assert [h["name"] for h in as_json(config, "host", "list", "rack-1")] == [
        "compute-2"]
    # Each add asked Nova about the host.
    services = [r for r in fake_nova.requests
                if r["path"].endswith("/os-services")]
    assert len(services) == 2


def test_an_unknown_host_is_not_added(config):
    ok(config, "segment", "create", "rack-1", "--recovery-method", "auto")
    proc = run_cli(config, "host", "create", "rack-1", "compute-9")
    assert proc.returncode == 2, proc.stderr
    assert "compute-9" in proc.stderr and "compute service list" in (
        proc.stderr)
    assert "Traceback" not in proc.stderr
    assert as_json(config, "host", "list", "rack-1") == []


def test_nova_unreachable_adds_nothing(config, fake_nova):
    ok(config, "segment", "create", "rack-1", "--recovery-method", "auto")
    fake_nova.stop()
    proc = run_cli(config, "host", "create", "rack-1", "compute-1")
    assert proc.returncode == 1, proc.stderr
    assert "Check [nova] endpoint_override or auth_url" in proc.stderr
    assert as_json(config, "host", "list", "rack-1") == []


@pytest.mark.parametrize("args,message", [
    (("segment", "create", "rack-1", "--recovery-method", "auto"),
     "a segment named 'rack-1' exists"),
    (("segment", "create", " rack", "--recovery-method", "auto"),
     "segment.name"),
    (("segment", "create", "rack-3", "--recovery-method", "manual"),
     "invalid choice"),
    (("segment", "update", "rack-2", "--name", "rack-1"), "rack-1"),
    (("segment", "update", "rack-1"), "nothing to change"),
    (("segment", "show", "rack-9"), "no failover segment rack-9"),
    (("host", "create", "rack-2", "compute-1"),
     "host compute-1 is already in segment rack-1"),
    (("host", "create", "rack-1", "bad/name"), "host.name"),
    (("host", "create", "rack-9", "compute-2"), "no failover segment"),
    (("host", "update", "rack-1", "compute-1"), "nothing to change"),
    (("host", "show", "rack-2", "compute-1"),
     "no host compute-1 in segment rack-2"),
    (("host", "delete", "rack-1", "compute-9"), "no host compute-9"),
])
def test_bad_input_exits_2(config, tmp_path, args, message):
    # Seeded in the store: the commands that do this are tested above.
    store = open_store(f"sqlite:///{tmp_path}/recovery.sqlite")
    now = datetime.datetime.now(UTC)
    rack = store.create_segment(name="rack-1", recovery_method="auto",
                                now=now)
    store.create_segment(name="rack-2", recovery_method="auto", now=now)
    store.create_host(rack.uuid, name="compute-1", now=now)
    store.close()
    proc = run_cli(config, *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_edits_during_a_recovery_exit_3(config, tmp_path):
    ok(config, "segment", "create", "rack-1", "--recovery-method", "auto")
    ok(config, "host", "create", "rack-1", "compute-1", "--reserved")
    store = open_store(f"sqlite:///{tmp_path}/recovery.sqlite")
    now = datetime.datetime.now(UTC)
    item = store.add(type="COMPUTE_HOST", kind=Kind.HOST_FAILURE,
                     hostname="compute-1", generated_time=now,
                     origin="api", status=Status.NEW,
                     payload={"event": "STOPPED", "host_status": "NORMAL"},
                     now=now)
    for args in (("host", "update", "rack-1", "compute-1",
                  "--no-maintenance"),
                 ("host", "delete", "rack-1", "compute-1"),
                 ("segment", "update", "rack-1", "--disable"),
                 ("segment", "delete", "rack-1")):
        proc = run_cli(config, *args)
        assert proc.returncode == 3, (args, proc.stderr)
        assert f"notification {item.uuid} for host compute-1 is new" in (
            proc.stderr)
        assert "Traceback" not in proc.stderr
    # Adding a spare is allowed: it is capacity for the recovery.
    ok(config, "host", "create", "rack-1", "compute-2", "--reserved")

    taken = store.take(item, "engine:1", 60)
    store.finish(item.uuid, Status.FINISHED, "done",
                 holder=Holder("engine:1", taken.version, 60))
    store.close()
    ok(config, "host", "update", "rack-1", "compute-1", "--no-reserved")
    ok(config, "segment", "delete", "rack-1")
