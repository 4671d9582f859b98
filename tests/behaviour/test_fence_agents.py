"""ClusterLabs fence agents on a real host failure, against both Novas: a
compute's nova-compute stops, the detector sees it, and the host is
proved off by the real agents (Debian's fence-agents) before anything
moves: fence_redfish against sushy-tools' emulator, fence_ipmilan
against the pyghmi BMC (powered off and read back off), and fence_kdump
as level 1 with a real kdump message from fence_kdump_send (no power-off
at all).
"""

import pytest

from tests.behaviour.checks import FAILED
from tests.behaviour.checks import evacuations
from tests.behaviour.clouds import Spec
from tests.bmc import write_sections
from tests.bmc.agents import FENCE_IPMILAN
from tests.bmc.agents import FENCE_KDUMP
from tests.bmc.agents import FENCE_KDUMP_SEND
from tests.bmc.agents import FENCE_REDFISH
from tests.bmc.agents import IPMITOOL
from tests.bmc.agents import device_section
from tests.bmc.agents import require_agent
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


@pytest.mark.parametrize("bmc_name", ["fast_tls_redfish_bmc", "ipmi_bmc"])
def test_an_agent_powers_a_failed_host_off_before_its_instances_move(
        cloud, engine_for, tmp_path, request, bmc_name):
    bmc = request.getfixturevalue(bmc_name)
    agent = device_section(bmc)["agent"]
    ids = cloud.boot(FAILED, [Spec(f"vm-{n}") for n in range(2)])
    engine = fenced_engine(engine_for, cloud, tmp_path, {
        FAILED: {"level1": "power"}, "device:power": device_section(bmc)})
    cloud.fail_host(FAILED)
    events = recovered(engine, cloud, ids)
    assert bmc.power_state() == "Off"
    # One device: the fencing's own event says it all.
    assert "fence-attempt" not in events
    assert events["fenced"].startswith(f"powered off through {agent}")
    assert "verified Off" in events["fenced"]
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
    attempts = [e.message for e in engine.store().events(host=FAILED)
                if e.kind == "fence-attempt"]
    assert len(attempts) == 1, attempts
    assert attempts[0].startswith("level 1 device kdump (fence_kdump) "
                                  "proved off after ")
    assert fast_tls_redfish_bmc.power_state() == "On"
