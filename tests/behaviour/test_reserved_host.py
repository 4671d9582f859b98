"""The reserved_host recovery methods, against both Novas.

Segments are written to the store the command reads, as ``recovery
segment`` would."""

import datetime
import json

import pytest

from recovery.db.store import open_store
from tests.behaviour.checks import FAILED
from tests.behaviour.checks import evacuations
from tests.behaviour.clouds import FakeCloud
from tests.behaviour.clouds import Spec
from tests.functional.cli_process import run_cli
from tests.functional.cli_process import write_config

NOW = datetime.datetime(2026, 11, 22, tzinfo=datetime.timezone.utc)


def segment(tmp_path, method, reserved):
    store = open_store(f"sqlite:///{tmp_path}/recovery.sqlite")
    seg = store.create_segment(name="rack-1", recovery_method=method,
                               now=NOW)
    store.create_host(seg.uuid, name=FAILED, now=NOW)
    for name in reserved:
        store.create_host(seg.uuid, name=name, reserved=True, now=NOW)
    return store


def disable(cloud, host):
    status, _ = cloud.api("PUT", f"/os-services/{cloud.service(host)['id']}",
                          {"status": "disabled",
                           "disabled_reason": "reserved for failover"})
    assert status == 200


def host_failure(cloud, tmp_path):
    proc = run_cli(write_config(tmp_path, cloud, poll_interval=0.2),
                   "host-failure", FAILED, "--format", "json")
    return proc, json.loads(proc.stdout or "{}")


def test_reserved_host_skips_a_down_one_and_takes_the_next(cloud, tmp_path):
    """compute-2 is reserved but down, compute-3 reserved and disabled,
    compute-4 a normal host the scheduler would pick."""
    ids = cloud.boot(FAILED, [Spec("a"), Spec("b", state="stopped")])
    for host in ("compute-2", "compute-3"):
        disable(cloud, host)
    store = segment(tmp_path, "reserved_host", ["compute-2", "compute-3"])
    cloud.fail_host("compute-2")
    cloud.fail_host(FAILED)
    proc, report = host_failure(cloud, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert {(r["name"], r["outcome"], r["method"], r["dest_host"])
            for r in report["instances"]} == {
        ("a", "recovered", "reserved_host", "compute-3"),
        ("b", "recovered", "reserved_host", "compute-3")}
    for name, uuid in ids.items():
        server = cloud.server(uuid)
        assert server["host"] == "compute-3"
        assert server["status"] == {"a": "ACTIVE", "b": "SHUTOFF"}[name]
        assert not server["locked"]
    assert evacuations(cloud) == {uuid: 1 for uuid in ids.values()}
    service = cloud.service("compute-3")
    assert (service["status"], service["state"]) == ("enabled", "up")
    assert cloud.service("compute-2")["status"] == "disabled"
    assert store.host_record("compute-3")[0].reserved is False
    assert store.host_record("compute-2")[0].reserved is True


@pytest.fixture
def fake_cloud():
    cloud = FakeCloud()
    yield cloud
    cloud.close()


def test_rh_priority_full_reserved_host_then_auto(fake_cloud, tmp_path):
    """The fake Nova only: a reserved host full after one instance. The
    others go to the next reserved host, then to the scheduler."""
    cloud = fake_cloud
    ids = cloud.boot(FAILED, [Spec(f"vm-{n}") for n in range(4)])
    for host in ("compute-2", "compute-3"):
        disable(cloud, host)
        cloud.nova.set_capacity(host, 1)
    segment(tmp_path, "rh_priority", ["compute-2", "compute-3"])
    cloud.fail_host(FAILED)
    proc, report = host_failure(cloud, tmp_path)
    assert proc.returncode == 0, proc.stderr
    placed = sorted((r["method"], r["dest_host"])
                    for r in report["instances"])
    assert placed == [("auto", "compute-4"), ("auto", "compute-4"),
                      ("reserved_host", "compute-2"),
                      ("reserved_host", "compute-3")]
    # Each refusal by a full reserved host costs that instance one more
    # evacuate (how many depends on the race for the hosts), at most one
    # per reserved host plus the scheduler's.
    counts = evacuations(cloud)
    assert set(counts) == set(ids.values())
    assert max(counts.values()) <= 3
    assert sum(counts.values()) >= 4 + 2
