"""Time and concurrency for the whole project.

This is the only module that imports eventlet. Entry points call
``monkey_patch()`` first thing in ``main()``; every other module asks this
one for a clock, a task pool, locks and events. A process that was not
monkey-patched (the unit tests) gets plain threads, and moving away from
eventlet means changing this file only.
"""

import dataclasses
import datetime
import functools
import os
import time
import types
import warnings
from collections.abc import Callable
from collections.abc import Iterable
from typing import Any
from typing import Protocol

# The system resolver, not eventlet's green DNS (dnspython): names then
# resolve as every other tool on the host resolves them (nsswitch,
# /etc/hosts, systemd-resolved), as Nova's own services chose, and the
# import of dnspython (some 0.15 s) leaves every command's start.
# The price: a lookup blocks the process's green threads while it runs.
# Lookups are rare here (a new connection to Nova, Keystone, a database
# server or a BMC; kept-alive connections are reused) and answered by the
# local resolver. Set before eventlet is imported, which reads it then;
# EVENTLET_NO_GREENDNS=no in the environment brings green DNS back.
os.environ.setdefault("EVENTLET_NO_GREENDNS", "yes")

# The project is built on eventlet on purpose (see README); its deprecation
# notice, given once when eventlet is imported, would print on every
# operator command. Silenced for that import only: the process's own
# warning filters stay as they were.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r"(?s).*Eventlet is deprecated")
    import eventlet
    import eventlet.patcher
    import eventlet.tpool
    from eventlet.support import greenlets


def monkey_patch() -> None:
    """Make the process green. Call it first thing in an entry point."""
    eventlet.monkey_patch()
    # psycopg waits on its socket in C unless told otherwise (it detects
    # gevent, not eventlet): every query would stop every green thread.
    os.environ.setdefault("PSYCOPG_WAIT_FUNC", "wait_select")


def is_green() -> bool:
    return eventlet.patcher.is_monkey_patched("thread")


class Clock:
    """Monotonic time, sleeping and wall-clock timestamps.

    The flows, the engine and the API never call ``time`` directly, so
    tests can inject a clock that advances without sleeping. (Leases are
    judged by the database's clock, in the store.)
    """

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        # Green when the process is monkey-patched.
        time.sleep(seconds)

    def now(self) -> datetime.datetime:
        return datetime.datetime.now(datetime.timezone.utc)

    def wait(self, event: "Event", seconds: float | None) -> bool:
        """Wait until ``event`` is set or ``seconds`` have passed (None:
        no limit); True if it is set."""
        return event.wait(seconds)


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
        # spawn() blocks while the pool is full, which is the bound. The
        # outcome is taken inside the green thread: an exception that
        # left it would also reach eventlet's hub, which prints it to
        # stderr as a raw traceback.
        spawned = [pool.spawn(_outcome, item, functools.partial(fn, item))
                   for item in items]
        return [thread.wait() for thread in spawned]


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


class TaskLocal:
    """A value of the running task alone (its green thread's when
    patched)."""

    def __init__(self) -> None:
        # Imported late for the same reason as in ThreadTaskPool.
        import threading

        self._local = threading.local()

    def get(self) -> Any:
        return getattr(self._local, "value", None)

    def set(self, value: Any) -> None:
        self._local.value = value


class Lock:
    """Mutual exclusion between tasks, as a context manager; green when
    patched. A real lock in a green process would block every green
    thread while one waits on it."""

    def __init__(self) -> None:
        # Imported late for the same reason as in ThreadTaskPool.
        import threading

        self._lock = threading.Lock()

    def __enter__(self) -> "Lock":
        self._lock.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._lock.release()


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


def native(module: str) -> types.ModuleType:
    """``module`` (``socket``, ``selectors``) as Python made it, even in a
    patched process: for code that ``offload`` runs on a native thread,
    where a green socket or selector would need the hub."""
    return eventlet.patcher.original(module)


def offload(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` on a native thread, and its result (or exception).
    In a patched process the other green threads run meanwhile
    (eventlet's tpool); otherwise it is a plain call, already on a thread
    of its own. For a loop of many sockets at once: green ``select``
    returns one ready socket per call, and would cost a call per socket
    over every socket."""
    if is_green():
        return eventlet.tpool.execute(fn, *args)
    return fn(*args)


def cooperate() -> None:
    """Let every other task that is ready to run go first (a green
    thread runs until it waits on something)."""
    time.sleep(0)


def spawn(fn: Callable[..., Any], *args: Any) -> Task:
    """Run ``fn(*args)`` in the background: a green thread in a patched
    process, a real thread otherwise."""
    return Task(fn, *args)


class WSGIServer:
    """A running HTTP server (``serve_wsgi``'s), to stop when done."""

    def __init__(self, sock: Any, thread: Any):
        self._sock = sock
        self._thread = thread
        self.port: int = sock.getsockname()[1]

    def stop(self, timeout: float) -> bool:
        """Stop listening, then let the requests in flight end, up to
        ``timeout`` seconds. True if they all ended."""
        # The server stops accepting, closes its idle connections and
        # waits for the busy ones; closing the socket here refuses new
        # connections at once, even while it waits.
        self._thread.kill()
        self._sock.close()
        with eventlet.Timeout(timeout, False):
            try:
                self._thread.wait()
            except greenlets.GreenletExit:
                pass    # how kill() ends it: a normal end
            return True
        return False


def serve_wsgi(host: str, port: int, app: Any, log: Any) -> WSGIServer:
    """Listen on ``host:port`` and serve ``app`` on a green thread; call
    it in a monkey-patched process. ``port`` 0 picks a free one (the
    server's ``port``). Raises OSError if it cannot bind.
    """
    import eventlet.wsgi

    sock = eventlet.listen((host, port))
    return WSGIServer(sock, eventlet.spawn(eventlet.wsgi.server, sock, app,
                                           log))
