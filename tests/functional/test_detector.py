"""The detector in a real recovery-engine, over the fake Nova's HTTP and an
emulated BMC: nobody posts a notification."""

import signal
import socket

import pytest

from tests.bmc import write_credentials_file
from tests.functional.engine_process import EngineProcess

HOST = "compute-1"
DETECTOR = ("[detector]\nenabled = true\nhosts = compute-*\n"
            "grace_period = 1\npoll_interval = 1\n")


@pytest.fixture
def start_engine(nova, tmp_path):
    engines = []

    def start(extra):
        engine = EngineProcess(tmp_path, nova.endpoint, extra=extra)
        engines.append(engine)
        engine.start(watchdog_usec=2_000_000)
        return engine

    yield start
    for engine in engines:
        engine.close()


def test_a_dead_host_is_found_fenced_and_recovered(nova, tmp_path,
                                                   start_engine,
                                                   fast_redfish_bmc):
    uuids = [nova.add_server(f"vm-{n}", HOST) for n in range(3)]
    credentials = write_credentials_file(tmp_path / "bmc.conf",
                                         {HOST: fast_redfish_bmc})
    engine = start_engine(
        f"{DETECTOR}\n[fencing]\ncredentials_file = {credentials}\n"
        f"poll_interval = 0.2\n")
    nova.fail_host(HOST)
    item = engine.wait_only("finished")
    assert (item.origin, item.type, item.hostname) == (
        "detector", "COMPUTE_HOST", HOST)
    assert fast_redfish_bmc.power_state() == "Off"
    assert all(nova.server(uuid)["host"] != HOST for uuid in uuids)
    assert len(nova.evacuate_calls) == len(uuids)
    assert nova.service(HOST)["forced_down"]
    # The decision line.
    assert f"1 failed -> {HOST}: notification {item.uuid} (new)" in (
        engine.log.read_text())


def test_a_host_that_answers_its_probe_is_disabled_not_evacuated(
        nova, start_engine):
    uuid = nova.add_server("vm", HOST)
    with socket.create_server(("127.0.0.1", 0)) as sshd:
        port = sshd.getsockname()[1]
        engine = start_engine(
            f"{DETECTOR}liveness_probe = {port}\n"
            f"probe_addresses = {HOST}:127.0.0.1\n")
        nova.fail_host(HOST)
        item = engine.wait_only("finished")
    assert (item.origin, item.type) == ("detector", "PROCESS")
    assert item.message.startswith(f"ALARM: {HOST} (127.0.0.1) answers on "
                                   f"TCP port {port}")
    assert "not evacuated" in item.message
    service = nova.service(HOST)
    assert service["status"] == "disabled"
    assert "Process failure" in service["disabled_reason"]
    assert not service["forced_down"]
    assert nova.evacuate_calls == []
    assert nova.server(uuid)["host"] == HOST


def test_sighup_switches_the_detector_on(nova, start_engine):
    """Off, it sees nothing; switched on in the config file and reloaded
    with SIGHUP, it finds the host that failed meanwhile."""
    uuid = nova.add_server("vm", HOST)
    trusting = f"{DETECTOR}trust_nova_heartbeat = true\n"
    engine = start_engine(trusting.replace("enabled = true",
                                           "enabled = false"))
    nova.fail_host(HOST)
    # A few turns of the engine's loop (one a second), switched off.
    engine.wait_message(lambda m: m.get("WATCHDOG") == "1")
    engine.wait_message(lambda m: m.get("WATCHDOG") == "1")
    assert engine.stored() == []
    assert not [r for r in nova.requests if "os-services" in r["path"]]
    engine.write_config(nova.endpoint, 5, trusting)
    engine.signal(signal.SIGHUP)
    item = engine.wait_only("finished")
    assert item.origin == "detector"
    assert nova.server(uuid)["host"] != HOST
