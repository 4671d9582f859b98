"""Instances come home: after a host failure and the host's return,
``recovery host-return --bring-back`` live-migrates back the instances
the failure evacuated, and only those still where recovery put them."""

import json

from tests.behaviour.checks import FAILED
from tests.behaviour.clouds import RealCloud
from tests.behaviour.clouds import Spec
from tests.fakenova.server import wait_until
from tests.functional.cli_process import run_cli
from tests.functional.cli_process import write_config


def live_migrations(cloud, uuid):
    return cloud._get(f"/os-migrations?migration_type=live-migration"
                      f"&instance_uuid={uuid}")["migrations"]


def deletes(cloud):
    """Whether the test deletes a server: on the real Nova's harness, a
    deleted server that was evacuated stays "deleting" (its periodic
    tasks are off), so the fake Nova alone shows that case."""
    return not isinstance(cloud, RealCloud)


def live_migrate(cloud, uuid, host=None):
    """An operator's live migration, waited for."""
    done = len(live_migrations(cloud, uuid)) + 1
    status, body = cloud.api("POST", f"/servers/{uuid}/action", {
        "os-migrateLive": {"host": host, "block_migration": "auto"}})
    assert status == 202, body
    wait_until(lambda: len([m for m in live_migrations(cloud, uuid)
                            if m["status"] == "completed"]) == done, 60,
               interval=0.2, what="the operator's live migration")
    return cloud.server(uuid)["host"]


def test_the_evacuated_instances_come_home_and_no_other(cloud, tmp_path):
    ids = cloud.boot(FAILED, [Spec("a", metadata={"HA_Priority": "5"}),
                              Spec("b"), Spec("moved"), Spec("gone"),
                              Spec("round-trip")])
    config = write_config(tmp_path, cloud, poll_interval=0.2)
    cloud.fail_host(FAILED)
    proc = run_cli(config, "host-failure", FAILED)
    assert proc.returncode == 0, proc.stderr

    # Since: one is moved by someone else, one moved away and back to
    # where recovery put it, one deleted.
    moved = ids["moved"]
    moved_to = live_migrate(cloud, moved)
    round_trip = ids["round-trip"]
    put = cloud.server(round_trip)["host"]
    live_migrate(cloud, round_trip)
    assert live_migrate(cloud, round_trip, put) == put
    if deletes(cloud):
        status, body = cloud.api("DELETE", f"/servers/{ids['gone']}")
        assert status == 204, body

    cloud.restore_host(FAILED)
    plan = run_cli(config, "host-return", FAILED, "--bring-back",
                   "--dry-run", "--format", "json")
    assert plan.returncode == 0, plan.stderr
    planned = {r["name"]: r["outcome"]
               for r in json.loads(plan.stdout)["instances"]}
    assert planned == {"a": "planned", "b": "planned", "moved": "skipped",
                       "gone": "skipped" if deletes(cloud) else "planned",
                       "round-trip": "skipped"}

    proc = run_cli(config, "host-return", FAILED, "--bring-back", "--format",
                   "json")
    assert proc.returncode == 0, proc.stderr
    results = {r["name"]: r for r in json.loads(proc.stdout)["instances"]}
    for name in ("a", "b") if deletes(cloud) else ("a", "b", "gone"):
        assert results[name]["outcome"] == "recovered", results[name]
        assert cloud.server(ids[name])["host"] == FAILED
        [migration] = live_migrations(cloud, ids[name])
        assert (migration["dest_compute"], migration["status"]) == (
            FAILED, "completed")
    assert results["moved"]["reason"].startswith(
        "no longer where recovery put it")
    assert cloud.server(moved)["host"] == moved_to
    assert "moved or resized since its evacuation (live-migration" in (
        results["round-trip"]["reason"])
    assert cloud.server(round_trip)["host"] == put
    if deletes(cloud):
        assert results["gone"]["reason"] == "deleted since its evacuation"
    service = cloud.service(FAILED)
    assert (service["state"], service["status"]) == ("up", "enabled")
