"""The OpenStack CLI with python-masakariclient's commands, run as an
operator runs them, against recovery-engine found in Keystone's catalog
(at ``/v1/<project_id>`` and at ``/v1``)."""

import datetime
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.compat.conftest import HOSTS

pytest.importorskip("masakariclient",
                    reason="tox -e masakari-compat installs it")

OPENSTACK = Path(sys.executable).with_name("openstack")
STOPPED = {"event": "STOPPED", "host_status": "NORMAL",
           "cluster_status": "OFFLINE"}


def openstack(cloud, *args: str) -> str:
    done = subprocess.run(
        [str(OPENSTACK), "--os-cloud", "devstack-admin", *args],
        env=cloud.env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"openstack {' '.join(args)}: {done.stderr}"
    return done.stdout


def shown(cloud, *args: str):
    return json.loads(openstack(cloud, *args, "-f", "json"))


def pick(item: dict, *keys: str) -> dict:
    return {key: item[key] for key in keys}


def test_segments_and_hosts(cloud):
    segment = shown(cloud, "segment", "create", "rack-1", "auto", "COMPUTE",
                    "--description", "first rack")
    assert pick(segment, "name", "recovery_method", "service_type",
                "description", "is_enabled") == {
        "name": "rack-1", "recovery_method": "auto",
        "service_type": "COMPUTE", "description": "first rack",
        "is_enabled": True}
    uuid = segment["uuid"]
    assert [s["uuid"] for s in shown(cloud, "segment", "list")] == [uuid]
    assert shown(cloud, "segment", "show", "rack-1") == segment
    updated = shown(cloud, "segment", "update", "rack-1",
                    "--recovery_method", "reserved_host",
                    "--is_enabled", "False")
    assert pick(updated, "uuid", "recovery_method", "is_enabled") == {
        "uuid": uuid, "recovery_method": "reserved_host",
        "is_enabled": False}

    host = shown(cloud, "segment", "host", "create", "compute-1", "COMPUTE",
                 "SSH", uuid)
    assert pick(host, "name", "type", "control_attributes", "reserved",
                "on_maintenance", "failover_segment_id") == {
        "name": "compute-1", "type": "COMPUTE", "control_attributes": "SSH",
        "reserved": False, "on_maintenance": False,
        "failover_segment_id": uuid}
    shown(cloud, "segment", "host", "create", "compute-2", "COMPUTE", "SSH",
          uuid, "--reserved", "True")
    reserved = shown(cloud, "segment", "host", "list", uuid,
                     "--filters", "reserved=True")
    assert [h["name"] for h in reserved] == ["compute-2"]
    assert shown(cloud, "segment", "host", "show", uuid, "compute-1") == host
    changed = shown(cloud, "segment", "host", "update", uuid, "compute-1",
                    "--on_maintenance", "True", "--control_attributes",
                    "TCP")
    assert pick(changed, "uuid", "on_maintenance", "control_attributes") == {
        "uuid": host["uuid"], "on_maintenance": True,
        "control_attributes": "TCP"}

    openstack(cloud, "segment", "host", "delete", uuid, "compute-1")
    left = shown(cloud, "segment", "host", "list", uuid)
    assert [h["name"] for h in left] == ["compute-2"]
    openstack(cloud, "segment", "delete", "rack-1")
    assert shown(cloud, "segment", "list") == []


def test_a_host_failure_and_its_vmoves(cloud, nova):
    servers = {nova.add_server(f"vm-{n}", "compute-1",
                               metadata={"HA_Enabled": "True"})
               for n in range(3)}
    segment = shown(cloud, "segment", "create", "rack-1", "auto",
                    "COMPUTE")["uuid"]
    for host in HOSTS:
        shown(cloud, "segment", "host", "create", host, "COMPUTE", "SSH",
              segment)
    nova.fail_host("compute-1")
    now = datetime.datetime.now(datetime.timezone.utc)
    created = shown(cloud, "notification", "create", "COMPUTE_HOST",
                    "compute-1", now.strftime("%Y-%m-%dT%H:%M:%S"),
                    json.dumps(STOPPED))
    uuid = created["notification_uuid"]
    cloud.engine.wait_only("finished", timeout=60)

    listed = shown(cloud, "notification", "list")
    assert [n["notification_uuid"] for n in listed] == [uuid]
    notification = shown(cloud, "notification", "show", uuid)
    assert pick(notification, "type", "status", "payload") == {
        "type": "COMPUTE_HOST", "status": "finished", "payload": STOPPED}
    steps = notification["recovery_workflow_details"]
    assert steps and {s["state"] for s in steps} == {"SUCCESS"}, steps

    vmoves = shown(cloud, "notification", "vmove", "list", uuid)
    assert {v["server_id"] for v in vmoves} == servers
    for vmove in vmoves:
        assert pick(vmove, "source_host", "dest_host", "type", "status") == {
            "source_host": "compute-1",
            "dest_host": nova.server(vmove["server_id"])["host"],
            "type": "evacuation", "status": "succeeded"}
        assert vmove["dest_host"] in HOSTS[1:]
    one = shown(cloud, "notification", "vmove", "show", uuid,
                vmoves[0]["uuid"])
    assert pick(one, *vmoves[0]) == vmoves[0]
