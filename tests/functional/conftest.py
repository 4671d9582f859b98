import pytest

# The emulated BMCs, one per test (fencing tests).
from tests.bmc.fixtures import fast_redfish_bmc  # noqa: F401
from tests.bmc.fixtures import ipmi_bmc  # noqa: F401
from tests.bmc.fixtures import redfish_bmc  # noqa: F401
from tests.fakenova import FakeNova


@pytest.fixture
def fake_nova():
    with FakeNova(evacuation_latency=0.05) as nova:
        yield nova
