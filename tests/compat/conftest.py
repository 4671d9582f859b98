"""recovery-engine behind Keystone against the fake Nova, for the tests
of Masakari's client and monitors (the masakari-compat env)."""

import pytest

from tests.compat.deployment import deployed
from tests.fakenova import FakeNova

HOSTS = ("compute-1", "compute-2", "compute-3")


@pytest.fixture
def nova():
    with FakeNova(evacuation_latency=0.05) as fake:
        for host in HOSTS:
            fake.add_compute(host)
        yield fake


@pytest.fixture(params=[True, False], ids=["project-url", "plain-url"])
def cloud(request, nova, tmp_path):
    """The engine in the catalog at ``/v1/<project_id>``, then at
    ``/v1``."""
    with deployed(tmp_path, nova.endpoint,
                  project_in_url=request.param) as deployment:
        yield deployment
