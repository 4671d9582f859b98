"""Waiting on a condition, with a deadline and a clear error."""

from collections.abc import Callable
from typing import TypeVar

from recovery.concurrency import Clock
from recovery.exception import WaitTimeout

T = TypeVar("T")


def wait_for(check: Callable[[], T | None], *, what: str, timeout: float,
             interval: float, clock: Clock) -> T:
    """Call ``check`` until it returns a truthy value, and return that.

    ``check`` may raise to stop waiting at once (fail fast). Raises
    ``WaitTimeout`` naming ``what`` when ``timeout`` seconds pass first.
    """
    deadline = clock.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        remaining = deadline - clock.monotonic()
        if remaining <= 0:
            raise WaitTimeout(
                f"gave up after {timeout:g}s waiting for {what}")
        clock.sleep(min(interval, remaining))
