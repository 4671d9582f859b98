"""recovery-engine drains a host whose BMC reports its hardware failing:
a real engine, the fake Nova, and two emulated Redfish BMCs whose health
the test changes. Critical drains; Warning, at the defaults, is only an
event."""

import json

from tests.bmc import write_credentials_file
from tests.bmc.redfish import RedfishBmc
from tests.functional.cli_process import run_cli
from tests.functional.engine_process import EngineProcess
from tests.functional.engine_process import wait_until

FAILING, WARNED = "compute-1", "compute-2"
READING = "Reading the hardware health of 2 host(s) (Redfish) every 0.5 s"


def events_of(engine, host):
    proc = run_cli(str(engine.config), "events", "--since", "1h", "--host",
                   host, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_critical_host_is_drained_and_a_warned_one_is_not(nova, tmp_path):
    with RedfishBmc(tmp_path / "bmc-1", fast=True) as failing, \
            RedfishBmc(tmp_path / "bmc-2", fast=True) as warned:
        credentials = write_credentials_file(
            tmp_path / "bmc.conf", {FAILING: failing, WARNED: warned})
        drained = [nova.add_server(f"vm-{n}", FAILING) for n in range(3)]
        kept = [nova.add_server(f"other-{n}", WARNED) for n in range(2)]
        engine = EngineProcess(
            tmp_path, nova.endpoint,
            extra=f"[fencing]\ncredentials_file = {credentials}\n\n"
                  f"[host_drain]\nhealth_interval = 0.5\n"
                  f"max_per_host = 2\n")
        try:
            engine.start()
            wait_until(lambda: READING in engine.log.read_text(),
                       what="the first read of the hosts' health")
            failing.set_health("Critical")
            warned.set_health("Warning")
            wait_until(lambda: all(nova.server(u)["host"] != FAILING
                                   for u in drained), timeout=60,
                       what="the drain of the failing host")
            service = nova.service(FAILING)
            assert service["status"] == "disabled"
            said = [e["message"] for e in events_of(engine, FAILING)
                    if e["kind"] == "health"]
            assert said == ["hardware health OK -> Critical (Redfish); a "
                            "drain is asked for"]
            warnings = [e["message"] for e in events_of(engine, WARNED)
                        if e["kind"] == "health"]
            assert warnings == [
                "hardware health OK -> Warning (Redfish); no drain: "
                "[host_drain] drain_on_health is Critical"]
        finally:
            engine.close()
        assert all(nova.server(u)["host"] == WARNED for u in kept)
        assert nova.service(WARNED)["status"] == "enabled"
        assert {c["uuid"] for c in nova.live_migrate_calls} == set(drained)
