"""ClusterLabs' fence agents (Debian fence-agents), run by hand on their
standard input against the emulated BMCs and a kdump sender: what a
``fence_agent`` driver can count on.

- fence_redfish against ``RedfishBmc(tls=True)``, fence_ipmilan against
  ``IpmiBmc``: status exits 0 (on), off exits 0 once the BMC reads Off,
  then status exits 2 (off); a refused password exits 1.
- fence_kdump exits 0 as soon as a kdump message comes from the node's
  address (``nodename``), and 1 at its timeout when none comes, or when
  one comes from another address.

Skipped where an agent is missing, failed instead under CI (CI=true).
"""

import subprocess
import time

import pytest

from tests.bmc.agents import FENCE_IPMILAN
from tests.bmc.agents import FENCE_KDUMP
from tests.bmc.agents import FENCE_KDUMP_SEND
from tests.bmc.agents import FENCE_REDFISH
from tests.bmc.agents import IPMITOOL
from tests.bmc.agents import STATUS_OFF
from tests.bmc.agents import STATUS_ON
from tests.bmc.agents import SUCCESS
from tests.bmc.agents import agent_input
from tests.bmc.agents import require_agent
from tests.bmc.agents import run_agent
from tests.bmc.fixtures import fast_tls_redfish_bmc  # noqa: F401
from tests.bmc.fixtures import kdump_port  # noqa: F401
from tests.bmc.kdump import send_kdump
from tests.bmc.kdump import wait_udp_bound
from tests.netlab import netlab  # noqa: F401

# What fence_kdump takes to notice a message (it exits within
# milliseconds here), with room for a loaded machine.
KDUMP_NOTICE = 1.5


def _no_secret(run, password):
    assert password not in run.stdout
    assert password not in run.stderr


def _status_off_status(agent, bmc):
    parameters = bmc.agent_parameters()

    status = run_agent(agent, "status", parameters)
    assert status.returncode == STATUS_ON, status
    assert "Status: ON" in status.stdout

    off = run_agent(agent, "off", parameters)
    assert off.returncode == SUCCESS, off
    assert "Success: Powered OFF" in off.stdout
    assert bmc.power_state() == "Off"

    status = run_agent(agent, "status", parameters)
    assert status.returncode == STATUS_OFF, status
    assert "Status: OFF" in status.stdout
    for run in (status, off):
        _no_secret(run, bmc.password)


def _refused(agent, bmc):
    bmc.refuse()
    run = run_agent(agent, "status", bmc.agent_parameters())
    assert run.returncode not in (STATUS_ON, STATUS_OFF), run
    _no_secret(run, bmc.password)
    off = run_agent(agent, "off", bmc.agent_parameters())
    assert off.returncode != SUCCESS, off
    assert bmc.power_state() == "On"


# -- fence_redfish ---------------------------------------------------------
def test_fence_redfish_status_off_status(fast_tls_redfish_bmc):  # noqa: F811
    _status_off_status(require_agent(FENCE_REDFISH), fast_tls_redfish_bmc)


def test_fence_redfish_refused(fast_tls_redfish_bmc):  # noqa: F811
    _refused(require_agent(FENCE_REDFISH), fast_tls_redfish_bmc)


# -- fence_ipmilan ---------------------------------------------------------
def test_fence_ipmilan_status_off_status(ipmi_bmc):
    _status_off_status(require_agent(FENCE_IPMILAN, IPMITOOL), ipmi_bmc)


def test_fence_ipmilan_refused(ipmi_bmc):
    _refused(require_agent(FENCE_IPMILAN, IPMITOOL), ipmi_bmc)


# -- fence_kdump -----------------------------------------------------------
class Listener:
    """fence_kdump action=off in the background, bound before a test
    sends anything."""

    def __init__(self, nodename: str, port: int, timeout: int) -> None:
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            [require_agent(FENCE_KDUMP)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.process.stdin.write(agent_input("off", {
            "nodename": nodename, "ipport": str(port),
            "timeout": str(timeout)}))
        self.process.stdin.close()
        wait_udp_bound(port)

    def result(self) -> tuple[int, float]:
        """Its exit status, and when it exited (time.monotonic())."""
        try:
            self.process.wait(60)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
        self.process.stdout.close()
        self.process.stderr.close()
        return self.process.returncode, time.monotonic()


@pytest.fixture
def kdump_send():
    return require_agent(FENCE_KDUMP_SEND)


def test_fence_kdump_message_on_loopback(kdump_port, kdump_send):  # noqa: F811
    listener = Listener("127.0.0.1", kdump_port, timeout=10)
    send_kdump("127.0.0.1", kdump_port, sender=kdump_send)
    sent = time.monotonic()
    returncode, ended = listener.result()
    assert returncode == SUCCESS
    assert ended - sent < KDUMP_NOTICE


def test_fence_kdump_times_out_without_message(kdump_port):  # noqa: F811
    listener = Listener("127.0.0.1", kdump_port, timeout=2)
    returncode, ended = listener.result()
    assert returncode == 1
    assert 2 <= ended - listener.started < 2 + KDUMP_NOTICE


def test_fence_kdump_message_from_a_host(netlab, kdump_port,  # noqa: F811
                                         kdump_send):
    host = netlab.add_host("compute-1", ports=(22,))
    listener = Listener(host.address, kdump_port, timeout=10)
    # From inside the host's namespace, its source address is its own.
    send_kdump(host.namespace.gateway, kdump_port,
               netns=host.namespace.name, sender=kdump_send)
    sent = time.monotonic()
    returncode, ended = listener.result()
    assert returncode == SUCCESS
    assert ended - sent < KDUMP_NOTICE


def test_fence_kdump_ignores_another_hosts_message(
        netlab, kdump_port, kdump_send):  # noqa: F811
    host = netlab.add_host("compute-1", ports=(22,))
    other = netlab.add_host("compute-2", ports=(22,))
    listener = Listener(host.address, kdump_port, timeout=3)
    send_kdump(other.namespace.gateway, kdump_port,
               netns=other.namespace.name, sender=kdump_send)
    # And one from loopback (127.0.0.1), which is not the host either.
    send_kdump("127.0.0.1", kdump_port, sender=kdump_send)
    returncode, ended = listener.result()
    assert returncode == 1
    assert ended - listener.started >= 3
