"""Time and concurrency for the whole project, on one of two backends.

- ``eventlet`` (the default): the process is monkey-patched; tasks are
  green threads, and a task pool is a GreenPool.
- ``threading``: native threads; eventlet is never imported.

This is the only module that imports eventlet, and it does so only when
that backend is chosen. Entry points call ``start()`` first thing in
``main()``: it picks the backend (``choose``) and patches the process for
eventlet. Every other module asks this one for a clock, a task pool,
locks and events, so that moving away from eventlet means changing this
file only. That rule, not a subject, sets what is here, and so its size:
the backend's choice (read before anything may be imported) and each
primitive on both backends, the WSGI server included. A process that
was not monkey-patched (the unit tests) gets plain threads.

Shared state. On threads a task may be preempted anywhere, not only where
it waits. The rule: a lock guards data only; no I/O (Nova, the store, a
socket) and no callback is made under it: what is to be written or told
is collected under the lock and done once it is released. Every object
that more than one task touches, who touches it, and its guard:

- ``LeaseKeeper`` (engine/lease.py), its leases: the engine's loop
  (track), each run's task (untrack), the keeper's task (renew). Its
  lock; renewals outside it; the leases-held gauge counted up and down.
- ``Lease``: a run's instance tasks (a check before each Nova request,
  each journal write) and the keeper's renewals. Its lock guards the
  deadline (the later one stays), the loss (lost once, told once) and
  the end (``end``: a renewal that the run's last write overtook is no
  loss).
- ``Phases`` (flows/priority.py): a host run's instance tasks. Its lock;
  ``on_timeout`` (a store write) after it; ``leave`` never raises it.
- ``ReservedHosts`` (flows/placement.py): a host run's instance tasks.
  Its lock for the host in use, those left and the failures; one task
  takes the next host (Nova, the store) with no lock held while the
  others wait for its outcome (an ``Event``); reports after the lock.
- ``EvacuationWatcher`` (flows/watcher.py): every instance task of every
  run of the engine. Its lock for the migrations seen and the poll
  count; one poll at a time, made outside the lock by the caller that
  found it due, the others wait for its ``Event``.
- ``RateLimiter`` (ratelimit.py): every Nova request of the process. Its
  lock reserves a slot; the wait for it is outside.
- ``METRICS`` (metrics.py): every task and the scrape. prometheus_client
  locks each value. A run's ``InstanceOutcomes``: its instance tasks;
  its lock makes "counted" one step.
- ``Prober`` (probe.py), the probe histories: the prober's task (record,
  resolve) and the engine's loop (the detector: watch, view). Its lock;
  name resolution and the connects outside it.
- ``Detector`` (engine/detector.py): the engine's loop alone; it shares
  only the prober.
- ``Engine._runs`` (engine/service.py): the engine's loop alone (claim,
  reap, drain, status); the /metrics scrape reads its size only.
- The journal's ``CommitGroup`` (db/journal.py): every instance task's
  journal write. A lock for the pending entries; ``commit_lock`` is the
  turn to commit, held across the transaction by design: the tasks
  waiting on it wait for their own entries, which it commits.
- ``StoreRecorder`` (engine/runner.py), the news told: a run's instance
  tasks, each under its own instance's key.
- The Nova session (nova/transport.py): every task. urllib3's
  connection pool is thread-safe; the guard is per task
  (``TaskLocal``); the proxy lookup cache may compute one entry twice,
  the same.
- The threaded WSGI server's requests in flight: its lock.
"""

import configparser
import dataclasses
import datetime
import functools
import glob
import importlib
import os
import sys
import time
import types
import warnings
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence
from typing import Any
from typing import Protocol

BACKENDS = ("eventlet", "threading")
DEFAULT_BACKEND = "eventlet"
# Wins over the config files, as Nova's OS_NOVA_DISABLE_EVENTLET_PATCHING.
BACKEND_VARIABLE = "RECOVERY_CONCURRENCY_BACKEND"


def start(argv: Sequence[str], prog: str) -> str:
    """Make the process ready for its backend (``choose``); return it.
    Call it first thing in an entry point, before anything else is
    imported: eventlet must patch the process before any lock or socket
    is made."""
    backend = choose(argv, prog)
    if backend == "eventlet":
        monkey_patch()
    return backend


def choose(argv: Sequence[str], prog: str) -> str:
    """The backend: ``$RECOVERY_CONCURRENCY_BACKEND``, else
    ``[DEFAULT] concurrency_backend`` in the config files (those that
    ``--config-file`` and ``--config-dir`` name, else the ones oslo.config
    finds for the project and ``prog``), else eventlet. Read with the
    standard library alone: oslo.config's import makes locks, which must
    come after the patch. A value that is not a backend is left to the
    full parse, which refuses it."""
    chosen = os.environ.get(BACKEND_VARIABLE)
    if chosen:
        return chosen if chosen in BACKENDS else DEFAULT_BACKEND
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read(_config_files(argv, prog), encoding="utf-8")
    except configparser.Error:
        return DEFAULT_BACKEND      # the full parse reports it
    chosen = parser.defaults().get("concurrency_backend", DEFAULT_BACKEND)
    return chosen if chosen in BACKENDS else DEFAULT_BACKEND


def _config_files(argv: Sequence[str], prog: str) -> list[str]:
    """The config files oslo.config reads, in its order (later ones
    win): those the command line names, or else the defaults."""
    files, dirs = _named(argv, "--config-file"), _named(argv, "--config-dir")
    if not files and not dirs:
        homes = [os.path.expanduser("~/.recovery"), os.path.expanduser("~"),
                 "/etc/recovery", "/etc"]
        for name in ("recovery", prog):
            found = [os.path.join(home, f"{name}.conf") for home in homes
                     if os.path.exists(os.path.join(home, f"{name}.conf"))]
            files += found[:1]
            found = [os.path.join(home, f"{name}.conf.d") for home in homes
                     if os.path.isdir(os.path.join(home, f"{name}.conf.d"))]
            dirs += found[:1]
    for directory in dirs:
        files += sorted(glob.glob(os.path.join(directory, "*.conf")))
    return list(dict.fromkeys(files))


def _named(argv: Sequence[str], flag: str) -> list[str]:
    """Every value of ``flag`` on the command line (``--flag X`` or
    ``--flag=X``)."""
    found = []
    for n, arg in enumerate(argv):
        if arg == flag and n + 1 < len(argv):
            found.append(argv[n + 1])
        elif arg.startswith(flag + "="):
            found.append(arg.split("=", 1)[1])
    return found


def _eventlet() -> types.ModuleType:
    """eventlet, imported now (the eventlet backend only)."""
    # The system resolver, not eventlet's green DNS (dnspython): names
    # then resolve as every other tool on the host resolves them
    # (nsswitch, /etc/hosts, systemd-resolved), as Nova's own services
    # chose, and the import of dnspython (some 0.15 s) leaves every
    # command's start. The price: a lookup blocks the process's green
    # threads while it runs. Lookups are rare here (a new connection to
    # Nova, Keystone, a database server or a BMC; kept-alive connections
    # are reused) and answered by the local resolver. Set before eventlet
    # is imported, which reads it then; EVENTLET_NO_GREENDNS=no in the
    # environment brings green DNS back.
    os.environ.setdefault("EVENTLET_NO_GREENDNS", "yes")
    # The project chose eventlet as its default (see README); its
    # deprecation notice, given once when eventlet is imported, would
    # print on every operator command. Silenced for that import only: the
    # process's own warning filters stay as they were.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore",
                                message=r"(?s).*Eventlet is deprecated")
        import eventlet
        import eventlet.patcher
        import eventlet.tpool
    return eventlet


def monkey_patch() -> None:
    """Make the process green (the eventlet backend)."""
    _eventlet().monkey_patch()
    # psycopg waits on its socket in C unless told otherwise (it detects
    # gevent, not eventlet): every query would stop every green thread.
    os.environ.setdefault("PSYCOPG_WAIT_FUNC", "wait_select")


def is_green() -> bool:
    patcher = sys.modules.get("eventlet.patcher")
    return patcher is not None and patcher.is_monkey_patched("thread")


def backend() -> str:
    """The backend this process runs on."""
    return "eventlet" if is_green() else "threading"


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
        pool = _eventlet().GreenPool(self.size)
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
    if not is_green():
        return importlib.import_module(module)
    return _eventlet().patcher.original(module)


def import_library(name: str) -> types.ModuleType:
    """``name``, a library that takes eventlet whenever it is installed,
    imported for this process's backend. On threads (oslo.messaging, which
    loads oslo.service's backend and futurist), oslo.service's default
    backend is its threading one, and eventlet cannot be imported while
    ``name`` loads: futurist then does without it."""
    if name in sys.modules or is_green():
        return importlib.import_module(name)
    backend = importlib.import_module("oslo_service.backend")
    backend.register_backend_default_hook(
        lambda: backend.BackendType.THREADING)
    blocked = "eventlet" not in sys.modules
    if blocked:
        sys.modules["eventlet"] = None  # type: ignore[assignment]
    try:
        return importlib.import_module(name)
    finally:
        if blocked:
            del sys.modules["eventlet"]


def offload(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` on a native thread, and its result (or exception).
    In a patched process the other green threads run meanwhile
    (eventlet's tpool); otherwise it is a plain call, already on a thread
    of its own. For a loop of many sockets at once: green ``select``
    returns one ready socket per call, and would cost a call per socket
    over every socket."""
    if is_green():
        return _eventlet().tpool.execute(fn, *args)
    return fn(*args)


def cooperate() -> None:
    """Let every other task that is ready to run go first (a green
    thread runs until it waits on something)."""
    time.sleep(0)


def spawn(fn: Callable[..., Any], *args: Any) -> Task:
    """Run ``fn(*args)`` in the background: a green thread in a patched
    process, a real thread otherwise."""
    return Task(fn, *args)


class WSGIServer(Protocol):
    """A running HTTP server (``serve_wsgi``'s), to stop when done."""

    port: int

    def stop(self, timeout: float) -> bool:
        """Stop listening, then let the requests in flight end, up to
        ``timeout`` seconds. True if they all ended."""


class _GreenWSGIServer:
    """eventlet.wsgi on a green thread."""

    def __init__(self, sock: Any, thread: Any):
        self._sock = sock
        self._thread = thread
        self.port: int = sock.getsockname()[1]

    def stop(self, timeout: float) -> bool:
        # The server stops accepting, closes its idle connections and
        # waits for the busy ones; closing the socket here refuses new
        # connections at once, even while it waits.
        eventlet = _eventlet()
        from eventlet.support import greenlets

        self._thread.kill()
        self._sock.close()
        with eventlet.Timeout(timeout, False):
            try:
                self._thread.wait()
            except greenlets.GreenletExit:
                pass    # how kill() ends it: a normal end
            return True
        return False


class _ThreadWSGIServer:
    """cheroot's WSGI server: a pool of native threads."""

    # Requests served at once; more wait in the listen queue. The API's
    # requests are short (a notification stored, a listing read).
    THREADS = 16

    def __init__(self, host: str, port: int, app: Any, log: Any):
        import threading

        from cheroot import wsgi

        self._busy = 0
        self._lock = threading.Lock()
        self._log = log
        self._server = wsgi.Server((host, port), self._serve(app),
                                   numthreads=self.THREADS)
        # Binds, or raises OSError; and starts the workers, on a daemon
        # thread so that they are daemons too (a thread inherits it): a
        # request still hung past the graceful shutdown cannot keep the
        # process from exiting.
        _on_daemon_thread(self._server.prepare)
        self.port = self._server.bind_addr[1]
        self._thread = threading.Thread(target=self._server.serve,
                                        name="wsgi", daemon=True)
        self._thread.start()

    def _serve(self, app: Any) -> Callable[..., Any]:
        """``app``, counting the requests in flight, with an access log
        line for each (method, path, status, seconds: never a header)."""
        def counted(environ: dict, start_response: Any) -> Any:
            started, status = time.monotonic(), []

            def start(code: str, headers: Any, *exc_info: Any) -> Any:
                status.append(code.split(" ", 1)[0])
                return start_response(code, headers, *exc_info)

            with self._lock:
                self._busy += 1
            try:
                body = app(environ, start)
                try:
                    return list(body)
                finally:
                    getattr(body, "close", lambda: None)()
            finally:
                with self._lock:
                    self._busy -= 1
                self._log.info(
                    '%s "%s %s" %s %.6f', environ.get("REMOTE_ADDR"),
                    environ.get("REQUEST_METHOD"), environ.get("PATH_INFO"),
                    status[0] if status else "-",
                    time.monotonic() - started)
        return counted

    def stop(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        # cheroot stops accepting, closes the socket (new connections are
        # refused at once), then waits for its workers; past the timeout
        # it waits on without end for a request that hangs: it is left
        # to it, on a daemon thread.
        import threading

        self._server.shutdown_timeout = timeout
        stopping = threading.Thread(target=self._server.stop, daemon=True)
        stopping.start()
        stopping.join(timeout)
        self._thread.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            return not self._busy


def _on_daemon_thread(fn: Callable[[], Any]) -> None:
    """Run ``fn`` on a daemon thread, wait for it, raise what it raised."""
    import threading

    raised: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join()
    if raised:
        raise raised[0]


def serve_wsgi(host: str, port: int, app: Any, log: Any) -> WSGIServer:
    """Listen on ``host:port`` and serve ``app`` on the backend's own
    server: eventlet.wsgi on a green thread, or cheroot's thread pool.
    ``port`` 0 picks a free one (the server's ``port``). Raises OSError
    if it cannot bind.
    """
    if not is_green():
        return _ThreadWSGIServer(host, port, app, log)
    eventlet = _eventlet()
    wsgi = importlib.import_module("eventlet.wsgi")
    sock = eventlet.listen((host, port))
    return _GreenWSGIServer(sock, eventlet.spawn(wsgi.server, sock, app,
                                                 log))
