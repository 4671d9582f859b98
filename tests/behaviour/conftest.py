"""Every test here runs twice: against the fake Nova and a real one.

The real Nova needs the ``integration`` extra (``tox -e integration``);
without it those runs are skipped. They carry the ``integration`` marker,
so ``pytest -m "not integration"`` leaves them out altogether.
"""

import importlib.util

import pytest

from tests.behaviour.clouds import FakeCloud
from tests.behaviour.clouds import RealCloud

NOVA_MISSING = importlib.util.find_spec("nova") is None  # never import it


@pytest.fixture(params=[
    pytest.param(FakeCloud, id="fake"),
    pytest.param(RealCloud, id="real", marks=[
        pytest.mark.integration,
        pytest.mark.skipif(NOVA_MISSING, reason="nova is not installed "
                           "(tox -e integration installs it)")]),
])
def cloud(request):
    cloud = request.param()
    yield cloud
    cloud.close()
