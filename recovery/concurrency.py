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


class Event:
    """A flag threads wait on, with a timeout; green when patched."""

    def __init__(self) -> None:
        # Imported late for the same reason as in ThreadTaskPool.
        import threading

        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)


class Task:
    """A function running on its own (green) thread."""

    def __init__(self, fn: Callable[..., Any], *args: Any):
        import threading

        self._thread = threading.Thread(target=fn, args=args, daemon=True)
        self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the end; True if it ended within ``timeout``."""
        self._thread.join(timeout)
        return not self._thread.is_alive()


def spawn(fn: Callable[..., Any], *args: Any) -> Task:
    """Run ``fn(*args)`` in the background: a green thread in a patched
    process, a real thread otherwise."""
    return Task(fn, *args)



def serve_wsgi(host: str, port: int, app: Any,
               log: Any) -> tuple[Task, int]:
    """Listen on ``host:port`` and serve ``app`` on a green thread; call
    it in a monkey-patched process. Returns the serving task and the bound
    port (``port`` 0 picks a free one). Raises OSError if it cannot bind.
    """
    import eventlet.wsgi

    sock = eventlet.listen((host, port))
    task = spawn(eventlet.wsgi.server, sock, app, log)
    return task, sock.getsockname()[1]
