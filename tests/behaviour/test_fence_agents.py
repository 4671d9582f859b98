"""ClusterLabs fence agents on a real host failure, against both Novas: a
compute's nova-compute stops, the detector sees it, and the host is
proved off by the real agents (Debian's fence-agents) before anything
moves: fence_redfish against sushy-tools' emulator, fence_ipmilan
against the pyghmi BMC, and fence_kdump as level 1 with a real kdump
message from fence_kdump_send.
"""

import pytest

from tests.behaviour.checks import FAILED
from tests.behaviour.checks import evacuations
from tests.behaviour.clouds import Spec
from tests.bmc.agents import FENCE_IPMILAN
from tests.bmc.agents import FENCE_KDUMP
from tests.bmc.agents import FENCE_KDUMP_SEND
from tests.bmc.agents import FENCE_REDFISH
from tests.bmc.agents import IPMITOOL
from tests.bmc.agents import device_section
from tests.bmc.agents import require_agent
from tests.bmc.agents import write_sections
from tests.bmc.kdump import kdump_sender

DETECTOR = ("[detector]\nenabled = true\nhosts = compute-*\n"
            "grace_period = 1\npoll_interval = 1\n")


@pytest.fixture(autouse=True)
def agents():
    require_agent(FENCE_REDFISH)
    require_agent(FENCE_IPMILAN, IPMITOOL)
    require_agent(FENCE_KDUMP, FENCE_KDUMP_SEND)


def fenced_engine(engine_for, cloud, tmp_path, sections):
    credentials = write_sections(tmp_path / "fencing.ini", sections)
    return engine_for(cloud, extra=(
        f"{DETECTOR}\n[fencing]\ncredentials_file = {credentials}\n"
        f"poll_interval = 0.2\n"))


def recovered(engine, cloud, ids):
    item = engine.wait_only("finished", timeout=120)
    assert (item.origin, item.hostname) == ("detector", FAILED)
    assert f"{len(ids)} recovered" in item.message
    assert evacuations(cloud) == {uuid: 1 for uuid in ids.values()}
    for uuid in ids.values():
        server = cloud.server(uuid)
        assert server["host"] != FAILED and server["status"] == "ACTIVE"
    return {e.kind: e.message for e in engine.store().events(host=FAILED)}


def test_fence_redfish_then_fence_ipmilan_prove_a_failed_host_off(
        cloud, engine_for, tmp_path, fast_tls_redfish_bmc, ipmi_bmc):
    # Level 1 is a Redfish BMC that refuses the password: level 2's IPMI
    # one powers the host off.
    fast_tls_redfish_bmc.refuse()
    ids = cloud.boot(FAILED, [Spec(f"vm-{n}") for n in range(2)])
    engine = fenced_engine(engine_for, cloud, tmp_path, {
        FAILED: {"level1": "redfish", "level2": "ipmi"},
        "device:redfish": device_section(fast_tls_redfish_bmc, timeout="5"),
        "device:ipmi": device_section(ipmi_bmc)})
    cloud.fail_host(FAILED)
    events = recovered(engine, cloud, ids)
    assert ipmi_bmc.power_state() == "Off"
    assert fast_tls_redfish_bmc.power_state() == "On"
    attempts = [e.message for e in engine.store().events(host=FAILED)
                if e.kind == "fence-attempt"]
    assert len(attempts) == 2, attempts
    assert attempts[0].startswith("level 1 device redfish (fence_redfish) "
                                  "failed")
    assert attempts[1].startswith("level 2 device ipmi (fence_ipmilan) "
                                  "proved off")
    assert events["fenced"].startswith("level 2: powered off through "
                                       "fence_ipmilan")
    for bmc in (fast_tls_redfish_bmc, ipmi_bmc):
        assert bmc.password not in (engine.workdir / "stderr.log").read_text()
        assert not any(bmc.password in e.message
                       for e in engine.store().events())


def test_a_kdump_message_proves_the_host_dead_with_its_power_kept(
        cloud, engine_for, tmp_path, fast_tls_redfish_bmc, kdump_port):
    ids = cloud.boot(FAILED, [Spec(f"vm-{n}") for n in range(2)])
    engine = fenced_engine(engine_for, cloud, tmp_path, {
        FAILED: {"level1": "kdump", "level2": "redfish"},
        # Here the crashed host's address is loopback's.
        "device:kdump": {"driver": "fence_agent", "agent": "fence_kdump",
                         "nodename": "127.0.0.1", "ipport": str(kdump_port),
                         "timeout": "30"},
        "device:redfish": device_section(fast_tls_redfish_bmc)})
    # The crash kernel sends its message every second while it dumps.
    with kdump_sender("127.0.0.1", kdump_port):
        cloud.fail_host(FAILED)
        events = recovered(engine, cloud, ids)
    assert events["fenced"].startswith(
        "level 1: proved dead by fence_kdump (nodename=127.0.0.1)")
    assert fast_tls_redfish_bmc.power_state() == "On"
