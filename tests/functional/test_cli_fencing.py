"""``recovery host-failure`` with a fencing driver, end to end: the fake
Nova over HTTP and an emulated BMC. A host Nova still hears from is
evacuated only after its power-off is verified, and never when fencing
fails."""

import pytest

from tests.bmc import write_credentials_file
from tests.fakenova import FakeNova
from tests.functional.cli_process import run_cli
from tests.functional.cli_process import write_config

HOST = "compute-1"


@pytest.fixture
def nova():
    with FakeNova(evacuation_latency=0.1) as fake:
        for host in (HOST, "compute-2", "compute-3", "compute-4"):
            fake.add_compute(host)
        yield fake


def fenced_config(tmp_path, nova, bmc, timeout=30):
    credentials = write_credentials_file(tmp_path / "bmc.conf", {HOST: bmc})
    return write_config(
        tmp_path, nova,
        extra=f"[fencing]\ncredentials_file = {credentials}\n"
              f"timeout = {timeout}\npoll_interval = 0.2\n")


def writes(nova):
    return [r for r in nova.requests if r["method"] in ("POST", "PUT")]


@pytest.mark.parametrize("bmc_name", ["fast_redfish_bmc", "ipmi_bmc"])
def test_a_live_host_is_fenced_then_recovered(nova, tmp_path, request,
                                              bmc_name):
    bmc = request.getfixturevalue(bmc_name)
    uuid = nova.add_server("vm", HOST)
    # Nova still hears from the host: without fencing, refused.
    proc = run_cli(fenced_config(tmp_path, nova, bmc), "host-failure", HOST)
    assert proc.returncode == 0, proc.stderr
    assert bmc.power_state() == "Off"
    assert "[fence] success: powered off through" in proc.stderr
    assert "verified Off" in proc.stderr
    assert nova.server(uuid)["host"] != HOST
    assert nova.service(HOST)["forced_down"]


def test_failed_fencing_evacuates_nothing(nova, tmp_path, fast_redfish_bmc):
    nova.add_server("vm", HOST)
    config = fenced_config(tmp_path, nova, fast_redfish_bmc)
    fast_redfish_bmc.refuse()
    proc = run_cli(config, "host-failure", HOST)
    assert proc.returncode == 1, proc.stderr
    assert "fence" in proc.stderr.lower()
    assert fast_redfish_bmc.password not in proc.stderr
    assert writes(nova) == []
    assert fast_redfish_bmc.power_state() == "On"


def test_power_that_stays_on_evacuates_nothing(nova, tmp_path, ipmi_bmc):
    nova.add_server("vm", HOST)
    ipmi_bmc.ignore_power_off()
    proc = run_cli(fenced_config(tmp_path, nova, ipmi_bmc, timeout=3),
                   "host-failure", HOST)
    assert proc.returncode == 1, proc.stderr
    assert "not verified Off" in proc.stderr
    assert writes(nova) == []


def test_dry_run_names_the_fencing_and_powers_nothing_off(
        nova, tmp_path, fast_redfish_bmc):
    nova.add_server("vm", HOST)
    proc = run_cli(fenced_config(tmp_path, nova, fast_redfish_bmc),
                   "host-failure", HOST, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "[fence] success: dry run: would redfish power-off" in (
        proc.stderr)
    assert fast_redfish_bmc.power_state() == "On"
    assert writes(nova) == []
