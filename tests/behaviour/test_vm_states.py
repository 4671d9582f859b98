"""Every vm_state an instance can have on a dead host, on both Novas.

One host holds an instance in each special state; it fails once and one
``recovery host-failure`` run decides for all (see "vm_states on a dead
host" in the README). The states are set with Nova's own API on the real
Nova; the fake Nova is handed them. Shelve needs the real Nova's compute
manager (it offloads at once), so it is real-only.
"""

import json

from tests.behaviour.checks import FAILED
from tests.behaviour.checks import actions
from tests.behaviour.checks import evacuations
from tests.behaviour.clouds import HA_KEY
from tests.fakenova.server import wait_until
from tests.functional.cli_process import run_cli
from tests.functional.cli_process import write_config
from tests.integration.realnova.harness import OWNER_TOKEN

POLL = 0.2
# Evacuated: where each ends.
RECOVERED = {"paused": ("paused", "PAUSED"),
             "migrating": ("active", "ACTIVE"),
             "resize_migrating": ("active", "ACTIVE"),
             "suspended": ("suspended", "SUSPENDED"),
             "rescued": ("active", "ACTIVE"),
             "resized": ("active", "ACTIVE")}
# The recovery's own actions on each, in order.
ACTIONS = {
    "paused": ["lock", "os-resetState", "evacuate", "pause", "unlock"],
    "suspended": ["lock", "os-resetState", "evacuate", "suspend",
                  "unlock"],
    "rescued": ["lock", "os-resetState", "evacuate", "unlock"],
    "resized": ["lock", "confirmResize", "evacuate", "unlock"],
    # A migration half done: active, its task stuck on the dead host.
    "migrating": ["lock", "evacuate", "unlock"],
    "resize_migrating": ["lock", "evacuate", "unlock"],
}
STUCK = ("migrating", "resize_migrating")
# The owner's own action that puts an ACTIVE instance in the state, and
# the status Nova shows once it is there.
OWNER_ACTIONS = {
    "paused": ({"pause": None}, "PAUSED"),
    "suspended": ({"suspend": None}, "SUSPENDED"),
    "rescued": ({"rescue": None}, "RESCUE"),
    "shelved": ({"shelve": None}, "SHELVED_OFFLOADED"),
}
RESIZE_FLAVOR = "2"  # m1.small


def _boot_fake(cloud, names):
    states = {"soft-deleted": "soft-delete"}
    ids = {name: cloud.nova.add_server(
        name, FAILED, vm_state=states.get(name, name),
        metadata={HA_KEY: "True"}) for name in names}
    for name in STUCK:
        ids[name] = cloud.nova.add_server(
            name, FAILED, task_state=name, metadata={HA_KEY: "True"})
    return ids


def _boot_real(cloud, names):
    nova = cloud.nova
    ids = {name: nova.create(name, FAILED, {HA_KEY: "True"})
           for name in names}
    # Resized onto the failed host: booted elsewhere, the other hosts out
    # of scheduling while it resizes, so the scheduler picks FAILED.
    ids["resized"] = nova.create("resized", "compute-2", {HA_KEY: "True"})
    ids.update((name, nova.create(name, FAILED, {HA_KEY: "True"}))
               for name in STUCK)
    for name, uuid in ids.items():
        nova.settle(uuid, task_state=name if name in STUCK else None)
    for name, (body, _) in OWNER_ACTIONS.items():
        nova.action(ids[name], body, token=OWNER_TOKEN)
    # reclaim_instance_interval > 0 (stack.py): a soft delete.
    nova.api("DELETE", f"/servers/{ids['soft-deleted']}", token=OWNER_TOKEN)
    others = [cloud.service(h)["id"] for h in ("compute-3", "compute-4")]
    for service_id in others:
        cloud.api("PUT", f"/os-services/{service_id}", {"status": "disabled"})
    nova.action(ids["resized"], {"resize": {"flavorRef": RESIZE_FLAVOR}},
                token=OWNER_TOKEN)
    nova.wait_status(ids["resized"], "VERIFY_RESIZE", timeout=60)
    for service_id in others:
        cloud.api("PUT", f"/os-services/{service_id}", {"status": "enabled"})
    for name, (_, status) in OWNER_ACTIONS.items():
        nova.wait_status(ids[name], status, timeout=60)
    nova.wait_status(ids["soft-deleted"], "SOFT_DELETED", timeout=60)
    return ids


def test_each_vm_state_ends_as_the_readme_says(cloud, tmp_path):
    names = ["paused", "suspended", "rescued", "soft-deleted"]
    if cloud.kind == "real":
        ids = _boot_real(cloud, names + ["shelved"])
        assert cloud.server(ids["resized"])["host"] == FAILED
        assert cloud.server(ids["shelved"])["host"] is None
    else:
        ids = _boot_fake(cloud, names + ["resized"])
    cloud._mark = len(cloud._all_calls())  # as boot(): calls from here on
    cloud.fail_host(FAILED)
    config = write_config(tmp_path, cloud, poll_interval=POLL)
    proc = run_cli(config, "host-failure", FAILED, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    report = {r["name"]: r for r in json.loads(proc.stdout)["instances"]}

    for name, (vm_state, status) in RECOVERED.items():
        result = report[name]
        assert result["outcome"] == "recovered", result
        original = "active" if name in STUCK else name
        assert (result["original_state"], result["final_state"]) == (
            original, vm_state)
        server = wait_until(
            lambda uuid=ids[name]: (s := cloud.server(uuid))["task_state"]
            is None and s, 30, interval=0.1, what=f"{name} settled")
        assert server["host"] not in (FAILED, None), server
        assert (server["vm_state"], server["status"]) == (vm_state, status)
        assert not server["locked"], server
        assert [a for u, a in actions(cloud) if u == ids[name]] == (
            ACTIONS[name])
    assert evacuations(cloud) == {ids[name]: 1 for name in RECOVERED}
    if cloud.kind == "real":
        # It keeps the flavor it ran on; the resize is confirmed, so the
        # source host holds nothing for it any more.
        flavor = cloud.nova.server(ids["resized"])["flavor"]
        assert flavor["original_name"] == "m1.small", flavor
        [resize] = [m for m in cloud.nova.api("GET", "/os-migrations")[
            "migrations"] if m["instance_uuid"] == ids["resized"]
            and m["migration_type"] == "resize"]
        assert resize["status"] == "confirmed", resize

    # Nova does not list a soft-deleted server: recovery never sees it,
    # and leaves it where its owner deleted it.
    assert "soft-deleted" not in report
    server = cloud.server(ids["soft-deleted"])
    assert (server["host"], server["status"]) == (FAILED, "SOFT_DELETED")
    assert [a for u, a in actions(cloud) if u == ids["soft-deleted"]] == []
    if cloud.kind == "real":
        # Offloaded: not on the host, so not listed, nothing to do.
        assert "shelved" not in report
        server = cloud.server(ids["shelved"])
        assert (server["host"], server["status"]) == (
            None, "SHELVED_OFFLOADED")
