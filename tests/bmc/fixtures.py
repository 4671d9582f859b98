"""pytest fixtures: one emulated BMC per test, stopped after it.

Import them into a conftest.py::

    from tests.bmc.fixtures import ipmi_bmc  # noqa: F401
    from tests.bmc.fixtures import redfish_bmc  # noqa: F401
"""

from collections.abc import Iterator

import pytest

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
def ipmi_bmc(tmp_path) -> Iterator[IpmiBmc]:
    """pyghmi BMC, one host powered On, power-off applied after 0.5 s."""
    with IpmiBmc(tmp_path / "ipmi-bmc") as bmc:
        yield bmc
