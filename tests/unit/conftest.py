"""What the unit tests of the engine's parts share: a fake clock, and an
SQLite store whose database clock is that same fake, so a test moves
both."""

import pytest

from recovery.db.store import open_store
from tests.unit.fakes import FakeClock


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def store(tmp_path, clock):
    store = open_store(f"sqlite:///{tmp_path}/s.sqlite")
    store.lease_clock = lambda conn: clock.now()
    yield store
    store.close()
