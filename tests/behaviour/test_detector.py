"""The detector against both Novas: a compute's nova-compute stops and
nobody posts a notification. Fenced through an emulated BMC, the host is
recovered; answering its liveness probe (a port this test opens, as a
live host's sshd would), it is disabled and nothing is evacuated."""

import socket

from tests.behaviour.checks import FAILED
from tests.behaviour.checks import evacuations
from tests.behaviour.checks import mutations
from tests.behaviour.clouds import Spec
from tests.bmc import write_credentials_file

DETECTOR = ("[detector]\nenabled = true\nhosts = compute-*\n"
            "grace_period = 1\npoll_interval = 1\n")


def test_a_dead_host_is_detected_fenced_and_recovered(
        cloud, engine_for, tmp_path, fast_redfish_bmc):
    ids = cloud.boot(FAILED, [Spec(f"vm-{n}") for n in range(3)])
    credentials = write_credentials_file(tmp_path / "bmc.conf",
                                         {FAILED: fast_redfish_bmc})
    engine = engine_for(cloud, extra=(
        f"{DETECTOR}\n[fencing]\ncredentials_file = {credentials}\n"
        f"poll_interval = 0.2\n"))
    cloud.fail_host(FAILED)
    item = engine.wait_only("finished", timeout=120)
    assert (item.origin, item.type, item.hostname) == (
        "detector", "COMPUTE_HOST", FAILED)
    assert "3 recovered" in item.message
    assert fast_redfish_bmc.power_state() == "Off"
    assert evacuations(cloud) == {uuid: 1 for uuid in ids.values()}
    assert {len(cloud.evacuation_migrations(FAILED))} == {len(ids)}
    for uuid in ids.values():
        server = cloud.server(uuid)
        assert server["host"] != FAILED and server["status"] == "ACTIVE"


def test_a_host_that_answers_its_probe_is_disabled_not_evacuated(
        cloud, engine_for):
    ids = cloud.boot(FAILED, [Spec("a")])
    with socket.create_server(("127.0.0.1", 0)) as sshd:
        port = sshd.getsockname()[1]
        engine = engine_for(cloud, extra=(
            f"{DETECTOR}liveness_probe = {port}\n"
            f"probe_addresses = {FAILED}:127.0.0.1\n"))
        cloud.fail_host(FAILED)
        item = engine.wait_only("finished", timeout=120)
    assert (item.origin, item.type) == ("detector", "PROCESS")
    assert item.message.startswith("ALARM: ")
    service = cloud.service(FAILED)
    assert service["status"] == "disabled"
    assert "Process failure" in service["disabled_reason"]
    assert evacuations(cloud) == {}
    assert [c["path"] for c in mutations(cloud)] == [
        f"/v2.1/os-services/{service['id']}"]
    assert cloud.server(ids["a"])["host"] == FAILED
