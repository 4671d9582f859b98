"""A cap on the rate of Nova API requests, shared by every task.

A rack failure starts many recoveries at once; without a cap their
requests would all land on the Nova API together. Requests over the cap
wait their turn, in the order they asked; none is refused or dropped.
"""

from recovery.concurrency import Clock
from recovery.concurrency import Lock
from recovery.metrics import METRICS


class RateLimiter:
    """Spaces requests at least ``1 / rate`` seconds apart.

    ``rate`` 0 means no cap. Each caller reserves the next free slot under
    a lock and then sleeps until it, outside the lock, so waiting callers
    do not hold each other up beyond their own slot.
    """

    def __init__(self, rate: float, clock: Clock) -> None:
        if rate < 0:
            raise ValueError(f"rate must be >= 0, not {rate}")
        self._interval = 1.0 / rate if rate else 0.0
        self._clock = clock
        self._lock = Lock()
        self._next_slot: float | None = None

    def acquire(self) -> float:
        """Wait for this request's turn; return how long it waited."""
        if not self._interval:
            return 0.0
        with self._lock:
            now = self._clock.monotonic()
            slot = now if self._next_slot is None else max(self._next_slot,
                                                           now)
            self._next_slot = slot + self._interval
        delay = slot - now
        if delay > 0:
            METRICS.rate_limited.inc()
            try:
                self._clock.sleep(delay)
            finally:
                METRICS.rate_limited.dec()
                METRICS.rate_limit_wait.inc(delay)
        return delay
