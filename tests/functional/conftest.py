import socket

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
def silent_port():
    """A listener that never accepts, its queue full: new connections
    time out, as to a host that lost power (the liveness probe's
    silence)."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        fillers.append(filler)
    yield port
    for sock in (*fillers, listener):
        sock.close()


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
