"""``recovery host-drain`` against a real Nova 34 on its fake virt driver.

Nova's own conductor, scheduler and computes live-migrate: the checks
between the computes (``check_can_live_migrate_destination`` and
``_source`` over RPC), ``pre_live_migration``, the move of the
allocations in Placement, ``post_live_migration_at_destination``. The
fake driver's ``live_migration`` completes at once, and Nova's computes
keep their default ``max_concurrent_live_migrations`` (1): a second
migration from the host waits in Nova's queue, as in a deployment.

Six instances leave a host that is up, each moved once, confirmed from
Nova's live-migration records, and none is evacuated.
"""

import json
import urllib.request

import pytest

from tests.behaviour.clouds import require_nova
from tests.functional.cli_process import run_cli
from tests.functional.cli_process import write_config
from tests.integration.realnova.harness import RealNova

pytestmark = pytest.mark.integration

HOST = "compute-1"
OTHERS = ("compute-2", "compute-3")
COUNT = 6
POLL = 0.2
REASON = "Drained by the integration test"
# Two at once from the host and to each destination: Nova queues the
# second from the host behind the first.
DRAIN = (f"[host_drain]\nmax_parallel = 4\nmax_per_host = 2\n"
         f"migration_timeout = 60\ndisable_reason = {REASON}\n")


@pytest.fixture
def nova():
    require_nova()
    with RealNova(hosts=1 + len(OTHERS)) as real:
        yield real


def migrations(nova, kind, uuid=None):
    query = f"migration_type={kind}"
    if uuid is not None:
        query += f"&instance_uuid={uuid}"
    return nova.api("GET", f"/os-migrations?{query}")["migrations"]


def placement(nova, path):
    """A GET from the harness's Placement, as an admin."""
    base = nova.endpoint.rsplit("/v2.1", 1)[0]
    req = urllib.request.Request(f"{base}/placement{path}", headers={
        "X-Auth-Token": "admin",
        "OpenStack-API-Version": "placement 1.29"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def test_a_drain_live_migrates_every_instance_once(nova, tmp_path):
    # Ask for every server first: Nova builds them concurrently.
    uuids = [nova.create(f"vm-{n}", HOST) for n in range(COUNT)]
    for uuid in uuids:
        nova.settle(uuid)
        assert nova.server(uuid)["OS-EXT-SRV-ATTR:host"] == HOST
    config = write_config(tmp_path, nova, poll_interval=POLL, extra=DRAIN)

    proc = run_cli(config, "host-drain", HOST, "--format", "json")

    assert proc.returncode == 0, proc.stderr
    report = {r["uuid"]: r for r in json.loads(proc.stdout)["instances"]}
    assert set(report) == set(uuids)
    providers = {p["name"]: p["uuid"] for p in placement(
        nova, "/resource_providers")["resource_providers"]}
    for uuid in uuids:
        server = nova.server(uuid)
        dest = server["OS-EXT-SRV-ATTR:host"]
        assert dest in OTHERS, server
        assert (server["status"], server["OS-EXT-STS:task_state"]) == (
            "ACTIVE", None), server
        [migration] = migrations(nova, "live-migration", uuid)
        assert (migration["status"], migration["source_compute"],
                migration["dest_compute"]) == ("completed", HOST, dest)
        result = report[uuid]
        assert (result["outcome"], result["dest_host"]) == (
            "recovered", dest), result
        assert f"to {dest} (migration {migration['id']})" in (
            result["reason"]), result
        # Placement moved its allocation: it holds only the destination.
        held = placement(nova, f"/allocations/{uuid}")["allocations"]
        assert set(held) == {providers[dest]}, held
    assert placement(nova, f"/resource_providers/{providers[HOST]}"
                           f"/usages")["usages"] == {
        "VCPU": 0, "MEMORY_MB": 0, "DISK_GB": 0}

    service = nova.service(HOST)
    assert (service["status"], service["disabled_reason"]) == (
        "disabled", REASON), service
    assert service["state"] == "up", service
    assert migrations(nova, "evacuation") == []
    assert not [c for c in nova.calls() if c["action"] == "evacuate"]
