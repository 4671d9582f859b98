"""A BMC that starts its power-off delay anew on each request (the real
sushy-emulator, with a fixed delay): its requests are paced by the lag
its past fencings showed, kept in the store (SQLite here; the store's
part is tested on every backend in tests/unit/test_store_fence_lags.py).
"""

import pytest

from recovery.concurrency import Clock
from recovery.db.store import open_store
from recovery.exception import FenceHeld
from recovery.fencing import HostFence
from tests.bmc.redfish import RedfishBmc
from tests.functional.test_fencing_bmc import fencer_for

HOST = "compute-1"
# Requests in shares of 6 s; the BMC applies one 6 to 7 s after it comes
# (more than 5 s: int(now) + 6), and a request sent again restarts that.
DELAY = 7
TIMING = dict(timeout=12.0, attempts=2, poll_interval=0.5)
# How much later than the BMC applied it a loaded machine (CI's test
# workers) may read Off; still well short of a share (6 s).
SLACK = 2.0


@pytest.fixture
def slow_bmc(tmp_path):
    with RedfishBmc(tmp_path / "bmc", delay=DELAY) as bmc:
        yield bmc


@pytest.fixture
def store(tmp_path):
    store = open_store(f"sqlite:///{tmp_path}/recovery.sqlite")
    yield store
    store.close()


def key_of(fence: HostFence) -> str:
    [(_, device)] = fence.devices
    return device.fencer.device_key()


def test_unpaced_requests_keep_restarting_the_delay(slow_bmc, tmp_path,
                                                    store):
    """What pacing is for: a device with no past fencing gets its second
    request at the end of the first share, which starts the delay again,
    and is never seen Off. Nothing is learned from a failure."""
    fence = fencer_for(tmp_path, slow_bmc, **TIMING)
    with pytest.raises(FenceHeld, match=r"after 2 power-off request\(s\); "
                                        r"the power last read On"):
        fence.power_off(Clock(), lags=store)
    assert store.fence_lag(key_of(fence)) is None


def test_a_learned_lag_paces_the_requests(slow_bmc, tmp_path, store):
    fence = fencer_for(tmp_path, slow_bmc, **TIMING)
    key = key_of(fence)
    assert key == f"redfish {slow_bmc.address}{slow_bmc.system}"
    store.learn_fence_lag(key, HOST, float(DELAY))
    proof = fence.power_off(Clock(), lags=store).text
    # One request (6 to 7 s to Off), not sent again at 6 s.
    assert "power-off requests" not in proof, proof
    assert proof.endswith("; paced by its lag learned over 1 fencing(s): "
                          "up to 7.0 s, so a request is sent again only "
                          "9.2 s after one it accepted")
    assert slow_bmc.power_state() == "Off"
    lag = store.fence_lag(key)
    # The longest of the two: Off read a poll (and, under load, a little
    # more) after the BMC applied it may be over the 7.0 s learned.
    assert lag.fencings == 2 and lag.longest == max(float(DELAY), lag.last)
    assert DELAY - 1 < lag.last <= DELAY + TIMING["poll_interval"] + SLACK


def test_a_fencing_teaches_the_device_s_lag(tmp_path, store):
    with RedfishBmc(tmp_path / "bmc", fast=True) as bmc:
        fence = fencer_for(tmp_path, bmc, **TIMING)
        fence.power_off(Clock(), lags=store)
    lag = store.fence_lag(key_of(fence))
    assert lag.fencings == 1 and lag.longest == lag.last
    assert 0 < lag.last <= 1 + TIMING["poll_interval"] + SLACK
