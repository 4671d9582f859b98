"""Every test here runs twice: against the fake Nova and a real one.

The real Nova needs the ``integration`` extra (``tox -e integration``);
without it those runs are skipped, and under CI (CI=true) they fail. They
carry the ``integration`` marker,
so ``pytest -m "not integration"`` leaves them out altogether.
"""

import pytest

from tests.behaviour.clouds import FakeCloud
from tests.behaviour.clouds import RealCloud
from tests.behaviour.clouds import require_nova
from tests.bmc.fixtures import fast_redfish_bmc  # noqa: F401
from tests.bmc.fixtures import fast_tls_redfish_bmc  # noqa: F401
from tests.bmc.fixtures import ipmi_bmc  # noqa: F401
from tests.bmc.fixtures import kdump_port  # noqa: F401
from tests.functional.engine_process import EngineProcess
from tests.functional.engine_process import start_engines


@pytest.fixture(params=[
    pytest.param(FakeCloud, id="fake"),
    pytest.param(RealCloud, id="real", marks=[pytest.mark.integration]),
])
def cloud(request):
    if request.param is RealCloud:
        require_nova()
    cloud = request.param()
    yield cloud
    cloud.close()


@pytest.fixture
def fake_cloud():
    """The fake Nova alone, for a test that runs once: its world is one
    the real Nova cannot make (more hosts), or it would only repeat,
    slower, what a real-Nova test of the same flow shows already."""
    cloud = FakeCloud()
    yield cloud
    cloud.close()


POLL = 0.2


@pytest.fixture
def engine_for(tmp_path):
    """Start ``recovery-engine`` against a cloud; stopped at the end."""
    engines = []

    def start(cloud, threads=3, extra=""):
        engine = EngineProcess(tmp_path, cloud.endpoint, threads=threads,
                               extra=extra, poll_interval=POLL)
        engines.append(engine)
        engine.start()
        return engine

    yield start
    for engine in engines:
        engine.close()


@pytest.fixture
def engines_for(tmp_path):
    """Start ``count`` engines that share ``database`` against a cloud;
    stopped at the end."""
    engines = []

    def start(cloud, database, count, threads=3, extra=""):
        started = start_engines(count, tmp_path, cloud.endpoint, database,
                                threads=threads, extra=extra,
                                poll_interval=POLL)
        engines.extend(started)
        return started

    yield start
    for engine in engines:
        engine.close()
