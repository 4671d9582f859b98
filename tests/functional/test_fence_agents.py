"""The fence_agent driver and fencing levels with the real ClusterLabs
agents (Debian's fence-agents) against emulated BMCs: fence_redfish
against sushy-tools' emulator over TLS, fence_ipmilan against the pyghmi
BMC, and fence_kdump with real messages from fence_kdump_send.

Under CI a missing agent fails these tests; elsewhere it skips them.
"""

import contextlib
import logging
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest
from oslo_config import cfg

from recovery import exception
from recovery.concurrency import Clock
from recovery.conf import fencing as fencing_conf
from recovery.fencing import DeviceKind
from recovery.fencing import load_fencing
from tests.bmc import write_sections
from tests.bmc.agents import FENCE_IPMILAN
from tests.bmc.agents import FENCE_KDUMP
from tests.bmc.agents import FENCE_KDUMP_SEND
from tests.bmc.agents import FENCE_REDFISH
from tests.bmc.agents import IPMITOOL
from tests.bmc.agents import device_section
from tests.bmc.agents import require_agent
from tests.bmc.kdump import kdump_sender
from tests.bmc.kdump import send_kdump
from tests.bmc.kdump import wait_udp_bound
from tests.fakenova import FakeNova
from tests.functional.cli_process import run_cli
from tests.functional.cli_process import write_config
from tests.netlab import netlab  # noqa: F401

HOST = "compute-1"
SLACK = 5.0


@pytest.fixture(autouse=True)
def agents():
    require_agent(FENCE_REDFISH)
    require_agent(FENCE_IPMILAN, IPMITOOL)
    require_agent(FENCE_KDUMP, FENCE_KDUMP_SEND)


def conf_of(path: Path, **options) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    fencing_conf.register_opts(conf)
    conf([])
    conf.set_override("credentials_file", str(path), "fencing")
    conf.set_override("poll_interval", 0.2, "fencing")
    for name, value in options.items():
        conf.set_override(name, value, "fencing")
    return conf


def fence_of(tmp_path, sections, **options):
    path = write_sections(tmp_path / "fencing.ini", sections)
    return load_fencing(conf_of(path, **options)).for_host(HOST)


def kdump_device(port: int, timeout: float = 3) -> dict[str, str]:
    # On loopback every message comes from 127.0.0.1: the "host" here.
    return {"driver": "fence_agent", "agent": "fence_kdump",
            "nodename": "127.0.0.1", "ipport": str(port),
            "timeout": str(timeout)}


class ProcessWatch:
    """Reads every process's command line and environment, over and
    over, while a fencing runs; ``seen`` lists where ``secret`` showed."""

    def __init__(self, secret: str) -> None:
        self.secret = secret.encode()
        self.seen: list[str] = []
        self.scans = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._scan, daemon=True)

    def __enter__(self) -> "ProcessWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()

    def _scan(self) -> None:
        while not self._stop.is_set():
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                for part in ("cmdline", "environ"):
                    with contextlib.suppress(OSError):
                        data = Path(f"/proc/{pid}/{part}").read_bytes()
                        if self.secret in data:
                            self.seen.append(f"{pid} {part}: "
                                             f"{data[:200]!r}")
            self.scans += 1


# -- one agent as a host's only device ----------------------------------------

@pytest.mark.parametrize("bmc_name", ["fast_tls_redfish_bmc", "ipmi_bmc"])
def test_an_agent_powers_the_host_off_and_reads_it_back(
        tmp_path, request, caplog, bmc_name):
    bmc = request.getfixturevalue(bmc_name)
    fence = fence_of(tmp_path, {HOST: device_section(bmc)})
    with caplog.at_level(logging.DEBUG), ProcessWatch(bmc.password) as watch:
        started = time.monotonic()
        message = fence.power_off(Clock()).text
    agent = device_section(bmc)["agent"]
    print(f"{agent}: proved Off after {time.monotonic() - started:.1f} s")
    assert message.startswith(f"powered off through {agent} ip=127.0.0.1")
    assert "verified Off" in message
    assert bmc.power_state() == "Off"
    # The password went on standard input (or, for ipmitool, in a file):
    # never on any process's command line or in its environment.
    assert watch.scans > 10
    assert watch.seen == []
    assert bmc.password not in caplog.text


def test_status_reads_off_and_a_second_fencing_proves_it_again(
        tmp_path, ipmi_bmc):
    fence = fence_of(tmp_path, {HOST: device_section(ipmi_bmc)})
    fence.power_off(Clock())
    assert "verified Off" in fence_of(
        tmp_path, {HOST: device_section(ipmi_bmc)}).power_off(Clock()).text


def test_refused_credentials_stop_the_device_without_the_password(
        tmp_path, fast_tls_redfish_bmc, caplog):
    fast_tls_redfish_bmc.refuse()
    fence = fence_of(tmp_path, {HOST: device_section(fast_tls_redfish_bmc)},
                     timeout=20)
    started = time.monotonic()
    with caplog.at_level(logging.DEBUG), \
            pytest.raises(exception.FenceHeld) as caught:
        fence.power_off(Clock())
    # The same failure three times (off, status, status) and nothing that
    # worked: taken as a refusal, not asked again for the device's 20 s,
    # so that a wrong password does not lock the account out. The agents
    # do not tell it from a BMC out of reach: it never answered.
    assert time.monotonic() - started < 10
    assert caught.value.cause == "unreachable"
    message = str(caught.value)
    assert message.startswith("fence_redfish power-off of ip=127.0.0.1: "
                              "status: exit status 1: ")
    assert message.endswith("the same failure 3 times and no answer that "
                            "worked: taken as a refusal (credentials, "
                            "address or parameters), not asked again")
    # The agent's own error, not its "Please use '-h' for usage".
    assert "ERROR: Unable to get PowerState" in message
    assert "Please use" not in message
    assert fast_tls_redfish_bmc.password not in message + caplog.text
    assert fast_tls_redfish_bmc.power_state() == "On"


# -- levels -------------------------------------------------------------------

def in_background(fence, tell=None):
    """The fencing on a thread of its own (it waits for a kdump message
    the test sends), and where its message will be."""
    result = {}
    fencing = threading.Thread(target=lambda: result.update(
        message=fence.power_off(Clock(), tell).text))
    fencing.start()
    return fencing, result


def test_a_kdump_message_proves_the_host_dead_and_its_power_is_kept(
        tmp_path, ipmi_bmc, kdump_port):
    fence = fence_of(tmp_path, {
        HOST: {"level1": "kdump", "level2": "ipmi"},
        "device:kdump": kdump_device(kdump_port, timeout=20),
        "device:ipmi": device_section(ipmi_bmc)})
    told = []
    fencing, result = in_background(fence, told.append)
    wait_udp_bound(kdump_port)
    with kdump_sender("127.0.0.1", kdump_port):
        fencing.join(30)
    assert result["message"].startswith(
        "level 1: proved dead by fence_kdump (nodename=127.0.0.1)")
    assert "received valid message from '127.0.0.1'" in result["message"]
    assert [(a.level, a.device, a.proved) for a in told] == [
        (1, "kdump", True)]
    assert told[0].device_kind is DeviceKind.MESSAGE
    assert told[0].seconds < 20
    assert ipmi_bmc.power_state() == "On"     # the dump is kept


def test_a_kdump_message_from_the_failed_hosts_own_address(
        tmp_path, ipmi_bmc, kdump_port, netlab):  # noqa: F811
    # The host is a network namespace: its crash kernel's message comes
    # from its own address; another host's message proves nothing.
    host = netlab.add_host(HOST, ports=(22,))
    other = netlab.add_host("compute-2", ports=(22,))
    fence = fence_of(tmp_path, {
        HOST: {"level1": "kdump", "level2": "ipmi"},
        "device:kdump": {**kdump_device(kdump_port, timeout=20),
                         "nodename": host.address},
        "device:ipmi": device_section(ipmi_bmc)})
    fencing, result = in_background(fence)
    wait_udp_bound(kdump_port)
    send_kdump(other.namespace.gateway, kdump_port,
               netns=other.namespace.name)
    time.sleep(1)                    # a wrong message: still waiting
    assert fencing.is_alive()
    send_kdump(host.namespace.gateway, kdump_port,
               netns=host.namespace.name)
    fencing.join(30)
    assert result["message"].startswith(
        f"level 1: proved dead by fence_kdump (nodename={host.address})")
    assert ipmi_bmc.power_state() == "On"


def test_without_a_kdump_message_the_next_level_powers_off(
        tmp_path, ipmi_bmc, kdump_port):
    fence = fence_of(tmp_path, {
        HOST: {"level1": "kdump", "level2": "ipmi"},
        "device:kdump": kdump_device(kdump_port, timeout=3),
        "device:ipmi": device_section(ipmi_bmc)})
    told = []
    message = fence.power_off(Clock(), told.append).text
    assert message.startswith("level 2: powered off through fence_ipmilan")
    assert [(a.level, a.device, a.proved) for a in told] == [
        (1, "kdump", False), (2, "ipmi", True)]
    assert 2.5 <= told[0].seconds <= 3 + SLACK
    assert "no proof within 3 s" in told[0].answer
    assert ipmi_bmc.power_state() == "Off"


def test_a_hung_agent_is_killed_at_its_timeout_and_the_next_level_runs(
        tmp_path, fast_tls_redfish_bmc, ipmi_bmc):
    # fence_redfish waits on a frozen BMC with no limit of its own.
    fast_tls_redfish_bmc.hang()
    fence = fence_of(tmp_path, {
        HOST: {"level1": "redfish", "level2": "ipmi"},
        "device:redfish": device_section(fast_tls_redfish_bmc, timeout="3"),
        "device:ipmi": device_section(ipmi_bmc)}, attempts=1)
    told = []
    try:
        message = fence.power_off(Clock(), told.append).text
    finally:
        fast_tls_redfish_bmc.resume()
    assert message.startswith("level 2: ")
    assert told[0].device == "redfish" and not told[0].proved
    assert "gave no answer within" in told[0].answer
    assert "was killed" in told[0].answer
    assert told[0].seconds <= 3 + SLACK
    assert not _agents_running("fence_redfish")


def test_when_every_level_fails_nothing_is_proved_and_each_answer_named(
        tmp_path, fast_tls_redfish_bmc, ipmi_bmc, kdump_port):
    fast_tls_redfish_bmc.refuse()
    ipmi_bmc.ignore_power_off()
    fence = fence_of(tmp_path, {
        HOST: {"level1": "kdump", "level2": "redfish, ipmi",
               "level3": "ipmi"},
        "device:kdump": kdump_device(kdump_port, timeout=2),
        "device:redfish": device_section(fast_tls_redfish_bmc, timeout="3"),
        "device:ipmi": device_section(ipmi_bmc, timeout="4")},
        attempts=1)
    with pytest.raises(exception.FencingError) as caught:
        fence.power_off(Clock())
    message = str(caught.value)
    assert message.startswith("no fencing level proved it off: ")
    assert "level 1 device kdump (fence_kdump) failed" in message
    # A refused login looks the same as no BMC to the agents.
    assert "level 2 device redfish (fence_redfish) unreachable" in message
    assert caught.value.cause == "fence_failed"   # the IPMI BMC answered
    assert "level 3 device ipmi (fence_ipmilan) failed" in message
    assert "power not verified Off within 4 s" in message
    assert "level 2 device ipmi" not in message   # its level had failed
    for bmc in (fast_tls_redfish_bmc, ipmi_bmc):
        assert bmc.password not in message


def _agents_running(name: str) -> list[str]:
    running = []
    for pid in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            if pid.isdigit() and name.encode() in Path(
                    f"/proc/{pid}/cmdline").read_bytes():
                running.append(pid)
    return running


# -- the settings, checked against the agents' metadata -----------------------

def test_each_mistake_is_named_against_the_agents_metadata(tmp_path,
                                                          ipmi_bmc):
    path = write_sections(tmp_path / "fencing.ini", {
        HOST: device_section(ipmi_bmc, lanplsu="1", verbose="1"),
        "compute-2": {"driver": "fence_agent", "agent": "fence_nosuch"},
        "compute-3": {"driver": "fence_agent", "agent": "fence_kdump",
                      "address": "10.0.0.3", "nodename": "{host}"},
    })
    with pytest.raises(exception.ConfigError) as caught:
        load_fencing(conf_of(path))
    lines = str(caught.value).splitlines()
    assert len(lines) == 4, lines
    assert "[compute-1] lanplsu: fence_ipmilan has no parameter " \
           "'lanplsu'" in lines[0]
    assert "[compute-1] verbose: 'verbose' cannot be set: the agent " \
           "would print its arguments" in lines[1]
    assert "[compute-2] agent: fence agent fence_nosuch is not " \
           "installed" in lines[2]
    assert "[compute-3] address: fence_kdump has no parameter 'ip' to " \
           "take 'address'" in lines[3]
    assert ipmi_bmc.password not in str(caught.value)


def test_inherited_connection_keys_an_agent_lacks_are_left_out(
        tmp_path, kdump_port):
    path = write_sections(tmp_path / "fencing.ini", {
        "DEFAULT": {"address": "https://{host}-bmc", "username": "u",
                    "password": "p"},
        HOST: {"level1": "kdump"},
        "device:kdump": kdump_device(kdump_port)})
    [(_, device)] = load_fencing(conf_of(path)).for_host(HOST).devices
    assert device.fencer.parameters == {
        "nodename": "127.0.0.1", "ipport": str(kdump_port)}


def test_an_agent_and_its_parameters_in_the_file_default(tmp_path):
    path = write_sections(tmp_path / "fencing.ini", {
        "DEFAULT": {"driver": "fence_agent", "agent": "fence_ipmilan",
                    "username": "admin", "lanplus": "1"},
        HOST: {"address": "{host}-ipmi", "password": "p", "cipher": "3"}})
    [(_, device)] = load_fencing(conf_of(path)).for_host(HOST).devices
    assert device.fencer.parameters == {
        "ip": f"{HOST}-ipmi", "username": "admin", "lanplus": "1",
        "cipher": "3"}
    assert device.fencer.settings.password.reveal() == "p"


# -- recovery fencing check HOST ----------------------------------------------

def cli_config(tmp_path, sections) -> str:
    credentials = write_sections(tmp_path / "fencing.ini", sections)
    path = tmp_path / "recovery.conf"
    path.write_text(f"[fencing]\ncredentials_file = {credentials}\n"
                    f"timeout = 10\n")
    return str(path)


def test_fencing_check_asks_every_device_and_powers_nothing_off(
        tmp_path, fast_tls_redfish_bmc, ipmi_bmc, kdump_port):
    config = cli_config(tmp_path, {
        HOST: {"level1": "kdump", "level2": "redfish", "level3": "ipmi"},
        "device:kdump": kdump_device(kdump_port),
        "device:redfish": device_section(fast_tls_redfish_bmc),
        "device:ipmi": {"driver": "ipmi", **ipmi_bmc.credentials()}})
    proc = run_cli(config, "fencing", "check", HOST)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines()
            if line.startswith("| ") and "Level" not in line]
    cells = [[cell.strip() for cell in row.strip("|").split("|")]
             for row in rows]
    assert [(c[0], c[1], c[2], c[3], c[4]) for c in cells] == [
        ("1", "kdump", "fence_kdump", "metadata", "yes"),
        ("2", "redfish", "fence_redfish", "monitor", "yes"),
        ("2", "redfish", "fence_redfish", "status", "yes"),
        ("3", "ipmi", "ipmi", "status", "yes")]
    assert [c[6] for c in cells[2:]] == ["power On", "power On"]
    for bmc in (fast_tls_redfish_bmc, ipmi_bmc):
        assert bmc.power_state() == "On"
        assert bmc.password not in proc.stdout + proc.stderr


def test_fencing_check_exit_status_says_a_device_did_not_answer(
        tmp_path, fast_tls_redfish_bmc):
    fast_tls_redfish_bmc.refuse()
    config = cli_config(tmp_path, {
        HOST: device_section(fast_tls_redfish_bmc)})
    proc = run_cli(config, "fencing", "check", HOST, "--format", "json")
    assert proc.returncode == 1, proc.stderr
    assert '"ok": false' in proc.stdout
    assert fast_tls_redfish_bmc.password not in proc.stdout + proc.stderr


def test_fencing_check_refuses_wrong_settings_before_asking_anything(
        tmp_path, ipmi_bmc):
    config = cli_config(tmp_path, {
        HOST: device_section(ipmi_bmc, lanplsu="1")})
    proc = run_cli(config, "fencing", "check", HOST)
    assert proc.returncode == 2
    assert "fence_ipmilan has no parameter 'lanplsu'" in proc.stderr
    proc = run_cli(config, "fencing", "check", "compute-2")
    assert proc.returncode == 2


# -- a host failure whose every level fails -----------------------------------

def test_a_host_no_level_proves_off_is_not_touched_and_the_alarm_names_all(
        tmp_path, fast_tls_redfish_bmc, kdump_port):
    fast_tls_redfish_bmc.refuse()
    credentials = write_sections(tmp_path / "fencing.ini", {
        HOST: {"level1": "kdump", "level2": "redfish"},
        "device:kdump": kdump_device(kdump_port, timeout=2),
        "device:redfish": device_section(fast_tls_redfish_bmc, timeout="3")})
    with FakeNova(evacuation_latency=0.1) as nova:
        for host in (HOST, "compute-2"):
            nova.add_compute(host)
        nova.add_server("vm", HOST)
        config = write_config(tmp_path, nova, extra=(
            f"[fencing]\ncredentials_file = {credentials}\n"
            f"poll_interval = 0.2\nattempts = 1\n"))
        proc = run_cli(config, "host-failure", HOST)
        assert proc.returncode == 1, proc.stderr
        alarm = [line for line in proc.stderr.splitlines()
                 if "ALARM" in line]
        assert len(alarm) == 1, proc.stderr
        assert f"ALARM: {HOST} could not be proved off: no fencing level " \
               f"proved it off" in alarm[0]
        assert "level 1 device kdump (fence_kdump) failed" in alarm[0]
        # The agent cannot tell a refused login from no BMC at all.
        assert "level 2 device redfish (fence_redfish) unreachable" in (
            alarm[0])
        assert fast_tls_redfish_bmc.password not in proc.stderr
        assert [r for r in nova.requests
                if r["method"] in ("POST", "PUT")] == []


def test_a_noexec_temporary_directory_is_refused_for_ipmi_agents(
        tmp_path, ipmi_bmc, monkeypatch):
    # The ipmitool wrapper runs from TMPDIR: on a noexec mount it could
    # not, and every fencing would fail. Said at start instead.
    noexec = tmp_path / "noexec"
    noexec.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "noexec,size=1m",
                              "tmpfs", str(noexec)], capture_output=True)
    if mounted.returncode != 0:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"cannot mount a tmpfs: {mounted.stderr}")
        pytest.skip("mounting a tmpfs needs root")
    try:
        monkeypatch.setattr(tempfile, "tempdir", str(noexec))
        with pytest.raises(exception.ConfigError) as caught:
            fence_of(tmp_path, {HOST: device_section(ipmi_bmc)})
        assert f"{noexec}, which is mounted noexec" in str(caught.value)
        assert "TMPDIR" in str(caught.value)
    finally:
        subprocess.run(["umount", str(noexec)], check=True)


def test_the_docs_credentials_file_example_loads_as_it_says(tmp_path):
    section = (Path(__file__).parents[2] / "doc" / "source" / "admin"
               / "fencing.md").read_text()
    start = section.index("# /etc/recovery/bmc.conf")
    example = tmp_path / "bmc.conf"
    example.write_text(section[start:section.index("```", start)])
    example.chmod(0o600)
    fencing = load_fencing(conf_of(example))
    assert fencing.for_host("rack-a-1").describe() == (
        "fence_ipmilan power-off of ip=rack-a-1-ipmi.oob.example.com")
    assert fencing.for_host("rack-c-1").describe() == (
        "fence_idrac power-off of ip=rack-c-1-idrac.oob.example.com")
    assert fencing.for_host("compute-12").describe() == (
        "level 1: kdump (fence_kdump proof of nodename=compute-12); "
        "level 2: ipmi (fence_ipmilan power-off of "
        "ip=compute-12-ipmi.oob.example.com)")
