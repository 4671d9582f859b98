"""What the unit tests of the engine's parts share: a fake clock, an
SQLite store whose database clock is that same fake, so a test moves
both, and recovery's options at their defaults (a test module may
override ``conf`` with its own)."""

import pytest
from oslo_config import cfg

from recovery import conf as recovery_conf
from recovery.db.store import open_store
from tests.unit.fakes import FakeClock


@pytest.fixture
def conf():
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf([])
    return conf


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def store(tmp_path, clock):
    store = open_store(f"sqlite:///{tmp_path}/s.sqlite")
    store.lease_clock = lambda conn: clock.now()
    yield store
    store.close()
