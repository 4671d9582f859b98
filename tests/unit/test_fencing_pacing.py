"""Pacing a device's power-off requests by its learned lag
(``recovery.pacing``), on the fake clock: the fencer's loop, and the
levels reading and teaching each power device's lag."""

import logging

import pytest

from recovery import exception
from recovery.fencing import BmcSettings
from recovery.fencing import Fencer
from recovery.fencing import Secret
from recovery.fencing import Timing
from recovery.pacing import Lag
from tests import fencing_doubles as doubles
from tests.fencing_doubles import StorageDouble
from tests.unit.fakes import FakeClock

TIMING = Timing(timeout=30.0, poll_interval=1.0, attempts=3)


class RestartingBmc(Fencer):
    """A BMC that powers off ``delay`` s after the last power-off request
    it accepted: each request starts the delay anew. ``send_errors``:
    the requests' errors, in turn (the BMC did not act); the requests
    (1-based) it ``dropped`` (accepted, never acted on), or whose answer
    was ``lost`` (acted on, and an error)."""

    driver = "fake"

    def __init__(self, clock: FakeClock, delay: float, *,
                 send_errors=(), dropped=(), lost=()) -> None:
        super().__init__(BmcSettings(host="compute-1", driver="fake",
                                     address="bmc", username="admin",
                                     password=Secret("pw")), TIMING)
        self.clock, self.delay = clock, delay
        self.send_errors = list(send_errors)
        self.dropped, self.lost = set(dropped), set(lost)
        self.requests: list[float] = []
        self._off_at: float | None = None

    def describe(self) -> str:
        return "fake power-off of bmc"

    def _target(self) -> str:
        return "bmc"

    def _send_off(self, seconds: float) -> None:
        self.requests.append(self.clock.t)
        if self.send_errors:
            raise self.send_errors.pop(0)
        if len(self.requests) not in self.dropped:
            self._off_at = self.clock.t + self.delay
        if len(self.requests) in self.lost:
            raise exception.FencingError("fake: connection reset")

    def _read_power(self, seconds: float) -> str:
        if self._off_at is not None and self.clock.t >= self._off_at:
            return "Off"
        return "On"


def test_without_a_lag_each_share_ends_with_a_request():
    clock = FakeClock()
    bmc = RestartingBmc(clock, delay=12.0)
    with pytest.raises(exception.FencingError,
                       match=r"after 3 power-off request\(s\); the power "
                             r"last read On$"):
        bmc.power_off(clock)
    assert bmc.requests == [0.0, 10.0, 20.0]
    assert bmc.lag_seen is None


def test_a_learned_lag_holds_the_next_request_back():
    clock = FakeClock()
    bmc = RestartingBmc(clock, delay=12.0)
    message = bmc.power_off(clock, Lag(longest=11.0, last=4.0, fencings=5))
    assert bmc.requests == [0.0]
    assert message == (
        "powered off through fake bmc, verified Off after 12.0 s; paced "
        "by its lag learned over 5 fencing(s): up to 11.0 s, so a request "
        "is sent again only 14.8 s after one it accepted")
    assert bmc.lag_seen == 12.0


def test_the_lag_holds_back_only_a_request_after_an_accepted_one():
    # The first request is lost: nothing is pending at the BMC, so the
    # next share's request goes at 10 s, as without a lag.
    clock = FakeClock()
    bmc = RestartingBmc(clock, delay=3.0, send_errors=[
        exception.FencingError("fake: connection reset")])
    message = bmc.power_off(clock, Lag(longest=11.0, last=11.0, fencings=1))
    assert bmc.requests == [0.0, 10.0]
    assert "(2 power-off requests, Off 3.0 s after the last one " \
           "accepted)" in message
    assert bmc.lag_seen == 3.0


def test_no_lag_is_learned_when_the_last_request_failed():
    # The first request is accepted and dropped; the second is acted on,
    # its answer lost. The time from the first to Off is no lag of the
    # BMC's, and the second's sending time says nothing sure either.
    clock = FakeClock()
    bmc = RestartingBmc(clock, delay=5.0, dropped={1}, lost={2})
    message = bmc.power_off(clock)
    assert bmc.requests == [0.0, 10.0] and clock.t == 15.0
    assert message.endswith("verified Off after 15.0 s (2 power-off "
                            "requests)")
    assert bmc.lag_seen is None


def test_the_lag_never_holds_a_request_past_the_timeout():
    clock = FakeClock()
    bmc = RestartingBmc(clock, delay=40.0)
    with pytest.raises(exception.FencingError) as caught:
        bmc.power_off(clock, Lag(longest=60.0, last=60.0, fencings=2))
    assert bmc.requests == [0.0]
    assert clock.t == 30.0
    assert str(caught.value).endswith(
        "after 1 power-off request(s); the power last read On; paced by "
        "its lag learned over 2 fencing(s): up to 60.0 s, so a request is "
        "sent again only 76.0 s after one it accepted")


class Book:
    """An in-memory LagBook; ``broken``: every call fails as a store
    that cannot be reached does."""

    def __init__(self, broken: bool = False) -> None:
        self.lags: dict[str, Lag] = {}
        self.learned: list[tuple[str, str, float]] = []
        self.broken = broken

    def fence_lag(self, device):
        if self.broken:
            raise exception.StoreUnavailable("the database is unavailable")
        return self.lags.get(device)

    def learn_fence_lag(self, device, host, seconds):
        if self.broken:
            raise exception.StoreUnavailable("the database is unavailable")
        self.learned.append((device, host, seconds))
        old = self.lags.get(device)
        lag = Lag(max(seconds, old.longest if old else 0.0), seconds,
                  (old.fencings if old else 0) + 1)
        self.lags[device] = lag
        return lag


def test_a_host_fence_reads_and_teaches_each_power_device_s_lag():
    clock = FakeClock()
    book = Book()
    bmc = RestartingBmc(clock, delay=12.0)
    assert bmc.device_key() == "fake bmc"
    book.lags["fake bmc"] = Lag(11.0, 11.0, 1)
    storage = StorageDouble("compute-1")
    fence = doubles.fence("compute-1", [bmc])
    proof = fence.power_off(clock, lags=book)
    assert bmc.requests == [0.0]
    assert "paced by its lag learned over 1 fencing(s)" in proof.text
    assert book.learned == [("fake bmc", "compute-1", 12.0)]
    assert book.lags["fake bmc"] == Lag(12.0, 12.0, 2)
    # A storage device has no lag: it is neither asked nor taught.
    doubles.fence("compute-1", [storage]).power_off(clock, lags=book,
                                                    gate=lambda *_: "ok")
    assert list(book.lags) == ["fake bmc"] and len(book.learned) == 1


def test_a_store_that_cannot_answer_costs_the_pacing_not_the_proof(caplog):
    clock = FakeClock()
    bmc = RestartingBmc(clock, delay=2.0)
    with caplog.at_level(logging.WARNING):
        proof = doubles.fence("compute-1", [bmc]).power_off(
            clock, lags=Book(broken=True))
    assert proof.text.startswith("powered off through fake bmc")
    assert "paced by" not in proof.text
    assert ("cannot read the learned lag of fake bmc (the database is "
            "unavailable): its requests are paced as a new device's"
            in caplog.text)
    assert ("cannot keep the lag of fake bmc (2.0 s): the database is "
            "unavailable" in caplog.text)
