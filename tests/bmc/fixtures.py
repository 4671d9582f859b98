"""pytest fixtures: one emulated BMC per test, stopped after it.

Import them into a conftest.py::

    from tests.bmc.fixtures import ipmi_bmc  # noqa: F401
    from tests.bmc.fixtures import redfish_bmc  # noqa: F401

``tls_redfish_bmc`` and ``fast_tls_redfish_bmc`` serve HTTPS, for
ClusterLabs' ``fence_redfish``; ``kdump_port`` is a free UDP port for a
``fence_kdump`` (see ``tests.bmc.agents`` and ``tests.bmc.kdump``).
"""

import socket
from collections.abc import Iterator

import pytest

from tests.bmc import free_port
from tests.bmc.ipmi import IpmiBmc
from tests.bmc.redfish import RedfishBmc


@pytest.fixture
def redfish_bmc(tmp_path) -> Iterator[RedfishBmc]:
    """sushy-emulator, one host powered On, the emulator's 1-11 s lag."""
    with RedfishBmc(tmp_path / "redfish-bmc") as bmc:
        yield bmc


@pytest.fixture
def fast_redfish_bmc(tmp_path) -> Iterator[RedfishBmc]:
    """The same, applying a power-off within 1 s."""
    with RedfishBmc(tmp_path / "fast-redfish-bmc", fast=True) as bmc:
        yield bmc


@pytest.fixture
def tls_redfish_bmc(tmp_path) -> Iterator[RedfishBmc]:
    """sushy-emulator over HTTPS (self-signed), the emulator's 1-11 s
    lag: ``agent_parameters()`` for fence_redfish."""
    with RedfishBmc(tmp_path / "tls-redfish-bmc", tls=True) as bmc:
        yield bmc


@pytest.fixture
def fast_tls_redfish_bmc(tmp_path) -> Iterator[RedfishBmc]:
    """The same, applying a power-off within 1 s."""
    with RedfishBmc(tmp_path / "fast-tls-redfish-bmc", tls=True,
                    fast=True) as bmc:
        yield bmc


@pytest.fixture
def kdump_port() -> int:
    """A UDP port nothing listens on, for a fence_kdump."""
    return free_port(socket.SOCK_DGRAM)


@pytest.fixture
def ipmi_bmc(tmp_path) -> Iterator[IpmiBmc]:
    """pyghmi BMC, one host powered On, power-off applied after 0.5 s."""
    with IpmiBmc(tmp_path / "ipmi-bmc") as bmc:
        yield bmc
