import pytest

from tests.fakenova import FakeNova


@pytest.fixture
def fake_nova():
    with FakeNova(evacuation_latency=0.05) as nova:
        yield nova
