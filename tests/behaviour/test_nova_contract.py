"""What recovery relies on Nova for, asserted on both Novas.

Each fact here was first seen on the real Nova; the same test against the
fake Nova keeps the fake honest.
"""

from tests.behaviour.checks import FAILED
from tests.behaviour.clouds import Spec
from tests.fakenova.server import wait_until

FINAL = ("done", "error", "failed")


def evacuate(cloud, uuid, **body):
    return cloud.api("POST", f"/servers/{uuid}/action", {"evacuate": body})


def message(body):
    return next(iter(body.values()))["message"]


def settled_migrations(cloud, count):
    """Poll the host's evacuation migrations until ``count`` are final;
    return every status seen along the way, and the last listing."""
    seen = set()

    def probe():
        migrations = cloud.evacuation_migrations(FAILED)
        seen.update(m["status"] for m in migrations)
        final = [m for m in migrations if m["status"] in FINAL]
        return len(final) >= count and migrations

    return seen, wait_until(probe, 30, interval=0.02, what="migrations")


def test_evacuate_refusals(cloud):
    ids = cloud.boot(FAILED, [Spec("a"), Spec("paused", state="paused")])
    status, body = evacuate(cloud, ids["a"])
    assert status == 400
    assert message(body) == f"Compute service of {FAILED} is still in use."
    cloud.fail_host(FAILED)
    status, body = evacuate(cloud, ids["paused"])
    assert status == 409
    assert "while it is in vm_state paused" in message(body)
    status, body = evacuate(cloud, ids["a"], host=FAILED)
    assert (status, message(body)) == (
        400, "The target host can't be the same one.")
    status, body = evacuate(cloud, ids["a"], host="nowhere")
    assert (status, message(body)) == (
        404, "Compute host nowhere not found.")
    assert cloud.evacuation_migrations(FAILED) == []


def test_evacuate_goes_over_a_stuck_task_state(cloud):
    """No reset-state is needed; migrations never show "rebuilding"."""
    ids = cloud.boot(FAILED, [Spec("stuck", task_state="rebooting")])
    cloud.fail_host(FAILED)
    status, _ = evacuate(cloud, ids["stuck"])
    assert status == 200
    assert cloud.server(ids["stuck"])["task_state"] != "rebooting"
    seen, [migration] = settled_migrations(cloud, 1)
    assert migration["status"] == "done"
    assert seen <= {"accepted", "pre-migrating", "done"}
    wait_until(lambda: cloud.server(ids["stuck"])["task_state"] is None,
               30, what="the rebuild to end")
    server = cloud.server(ids["stuck"])
    assert server["status"] == "ACTIVE"
    assert server["host"] == migration["dest_compute"] != FAILED


def test_a_second_evacuate_in_flight_spoils_the_instance(cloud):
    """Nova accepts it, and the instance ends in ERROR: why recovery
    never sends an evacuate before checking Nova did not act on one."""
    ids = cloud.boot(FAILED, [Spec("a")])
    cloud.fail_host(FAILED)
    assert evacuate(cloud, ids["a"])[0] == 200
    assert evacuate(cloud, ids["a"])[0] == 200

    def spoiled():
        statuses = [m["status"] for m in sorted(
            cloud.evacuation_migrations(FAILED), key=lambda m: m["id"])]
        return (statuses == ["failed", "accepted"]
                and cloud.server(ids["a"])["vm_state"] == "error")

    wait_until(spoiled, 30, interval=0.05,
               what="first migration failed, second stuck, instance error")
    # A migration never updated (updated_at null) does not match
    # changes-since: the watcher's baseline cannot see one still accepted.
    since = "2000-01-01T00:00:00Z"
    listed = cloud.evacuation_migrations(FAILED, changes_since=since)
    assert [m["status"] for m in listed] == ["failed"]
