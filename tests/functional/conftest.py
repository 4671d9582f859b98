import pytest

# The emulated BMCs, one per test (fencing tests).
from tests.bmc.fixtures import fast_redfish_bmc  # noqa: F401
from tests.bmc.fixtures import fast_tls_redfish_bmc  # noqa: F401
from tests.bmc.fixtures import ipmi_bmc  # noqa: F401
from tests.bmc.fixtures import kdump_port  # noqa: F401
from tests.bmc.fixtures import redfish_bmc  # noqa: F401
from tests.fakenova import FakeNova
from tests.functional.engine_process import EngineProcess


@pytest.fixture
def fake_nova():
    with FakeNova(evacuation_latency=0.05) as nova:
        yield nova


# -- recovery-engine against a fake Nova with four computes ----------------
@pytest.fixture
def nova():
    with FakeNova(evacuation_latency=0.3) as fake:
        for host in ("compute-1", "compute-2", "compute-3", "compute-4"):
            fake.add_compute(host)
        yield fake


@pytest.fixture
def engine(nova, tmp_path):
    process = EngineProcess(tmp_path, nova.endpoint)
    yield process
    process.close()
