"""Time and concurrency for the whole project.

This is the only module that imports eventlet. Entry points call
``monkey_patch()`` before anything else; every other module asks this one
for a clock and a task pool. A process that was not monkey-patched (the
unit tests) gets plain threads, and moving away from eventlet means
changing this file only.
"""

import dataclasses
import datetime
import time
import warnings
from collections.abc import Callable
from collections.abc import Iterable
from typing import Any
from typing import Protocol

# The project is built on eventlet on purpose (see README); its deprecation
# notice would print on every operator command.
warnings.filterwarnings("ignore", message=r"(?s).*Eventlet is deprecated")

import eventlet  # noqa: E402
import eventlet.patcher  # noqa: E402


def monkey_patch() -> None:
    """Make the process green. Call it first thing in an entry point."""
    eventlet.monkey_patch()


def is_green() -> bool:
    return eventlet.patcher.is_monkey_patched("thread")


class Clock:
    """Monotonic time, sleeping and wall-clock timestamps.

    Recovery code never calls ``time`` directly, so tests can inject a
    clock that advances without sleeping.
    """

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        # Green when the process is monkey-patched.
        time.sleep(seconds)

    def now(self) -> datetime.datetime:
        return datetime.datetime.now(datetime.timezone.utc)


@dataclasses.dataclass
class TaskOutcome:
    """What one task returned, or the exception it raised."""

    item: Any
    value: Any = None
    error: BaseException | None = None


class TaskPool(Protocol):
    size: int

    def run(self, fn: Callable[[Any], Any],
            items: Iterable[Any]) -> list[TaskOutcome]:
        """Run ``fn(item)`` for each item, at most ``size`` at once.

        Blocks until every task has ended. An exception in a task is
        captured in its outcome; it never escapes and never stops the
        other tasks.
        """


class GreenTaskPool:
    def __init__(self, size: int):
        self.size = size

    def run(self, fn: Callable[[Any], Any],
            items: Iterable[Any]) -> list[TaskOutcome]:
        pool = eventlet.GreenPool(self.size)
        # spawn() blocks while the pool is full, which is the bound.
        spawned = [(item, pool.spawn(fn, item)) for item in items]
        return [_outcome(item, thread.wait) for item, thread in spawned]


class ThreadTaskPool:
    def __init__(self, size: int):
        self.size = size

    def run(self, fn: Callable[[Any], Any],
            items: Iterable[Any]) -> list[TaskOutcome]:
        # Imported here: at module level it would create threading locks
        # before an entry point monkey-patches.
        import concurrent.futures

        with concurrent.futures.ThreadPoolExecutor(self.size) as executor:
            submitted = [(item, executor.submit(fn, item)) for item in items]
            return [_outcome(item, future.result)
                    for item, future in submitted]


def _outcome(item: Any, wait: Callable[[], Any]) -> TaskOutcome:
    try:
        return TaskOutcome(item, value=wait())
    except Exception as exc:  # a worker's failure is recorded, never lost
        return TaskOutcome(item, error=exc)


def task_pool(size: int) -> TaskPool:
    """A pool of ``size``: green in a monkey-patched process, else threads."""
    return GreenTaskPool(size) if is_green() else ThreadTaskPool(size)
