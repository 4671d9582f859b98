import pytest

from recovery.ratelimit import RateLimiter
from tests.unit.fakes import FakeClock


def test_requests_are_spaced_by_the_rate():
    clock = FakeClock()
    limiter = RateLimiter(4, clock)
    waits = [limiter.acquire() for _ in range(5)]
    assert waits == [0.0, 0.25, 0.25, 0.25, 0.25]
    assert clock.t == pytest.approx(1.0)


def test_an_idle_limiter_lets_the_next_request_through_at_once():
    clock = FakeClock()
    limiter = RateLimiter(2, clock)
    limiter.acquire()
    clock.t += 10
    assert limiter.acquire() == 0.0


def test_waiters_take_the_slots_in_order():
    """Slots are reserved before sleeping: three callers arriving at once
    (no time passes between them) get 0, 1/r and 2/r."""
    clock = FakeClock()
    clock.sleep = lambda seconds: None      # callers arrive together
    limiter = RateLimiter(10, clock)
    assert [limiter.acquire() for _ in range(3)] == pytest.approx(
        [0.0, 0.1, 0.2])


def test_zero_means_no_cap():
    clock = FakeClock()
    limiter = RateLimiter(0, clock)
    assert [limiter.acquire() for _ in range(100)] == [0.0] * 100
    assert clock.sleeps == []


def test_negative_rate_is_refused():
    with pytest.raises(ValueError, match="rate must be >= 0"):
        RateLimiter(-1, FakeClock())
