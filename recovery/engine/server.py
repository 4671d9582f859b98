"""``recovery-engine``'s process: the notification API and the engine,
their signals and the order of shutdown, owned by one ``Server`` (as
uvicorn's ``Server`` owns its app's).

The API listens before the store opens: while a server database does
not answer yet, ``/healthcheck`` and every request answer 503, so that
monitors and health probes see an engine that is starting, not one that
is gone.

The order matters: what the engine runs uses the store, and so does what
the API receives; the store closes only once both have stopped.
"""

import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable
from collections.abc import Iterator
from typing import Any

from oslo_config import cfg
from oslo_log import log

from recovery import concurrency
from recovery import conf as recovery_conf
from recovery import exception
from recovery.api import app
from recovery.api import auth
from recovery.api import health
from recovery.api import starting
from recovery.confirming import Liveness
from recovery.db.store import Store
from recovery.db.store import Unreachable
from recovery.db.store import open_conf_store
from recovery.domains import FailureDomains
from recovery.engine import runner
from recovery.engine.detector import Detector
from recovery.engine.gates import Gates
from recovery.engine.lease import LeaseKeeper
from recovery.engine.service import Engine
from recovery.engine.systemd import Notifier
from recovery.identity import this_process
from recovery.metrics import METRICS
from recovery.nova import load_nova

LOG = logging.getLogger("recovery.engine")
EXIT_OK, EXIT_FORCED, EXIT_CONFIG = 0, 1, 2
# The database did not answer within [database] max_retries: sysexits.h's
# EX_TEMPFAIL, "try again later" (systemd's Restart=on-failure does).
EXIT_UNAVAILABLE = 75
# How long one attempt to open the store may take past the wait before
# it, in [database] statement_timeouts: the connect, then the schema's
# check (a few reads), each bounded by it; then a margin in seconds.
ATTEMPT_TIMEOUTS, ATTEMPT_MARGIN = 4, 30
METRICS_PATH = "/metrics"


class StopWhileStarting(KeyboardInterrupt):
    """SIGTERM before the engine runs (waiting for the database, say).
    A KeyboardInterrupt, so that eventlet's hub passes it to the main
    greenlet as it does Ctrl-C's, and the start unwinds the same way."""


@contextlib.contextmanager
def stop_while_starting() -> Iterator[None]:
    """From here until ``Server.run`` installs its own handlers, SIGTERM
    ends the start: nothing runs yet, so there is nothing to drain.
    Without a handler, an engine that is a container's PID 1 would not
    hear it at all (the kernel drops a signal PID 1 does not handle),
    and its stop would end in SIGKILL."""
    def stop(signum: int, frame: object) -> None:
        raise StopWhileStarting
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Heartbeat:
    """What the engine's main loop calls each turn: watchdog and STATUS."""

    def __init__(self, notifier: Notifier):
        self._notifier = notifier
        self._last: str | None = None

    def __call__(self, status: str) -> None:
        METRICS.heartbeat.set_to_current_time()
        if self._notifier.watchdog_interval is not None:
            self._notifier.watchdog()
        if status != self._last:
            self._notifier.status(status)
            self._last = status


class Server:
    """Serve the API and run the engine until a stop signal, then stop in
    order: the engine takes no new work, its runs drain, the API stops
    listening, the store closes, the previous signal handlers return.

    SIGTERM or SIGINT starts that; a second one exits at once with
    ``EXIT_FORCED`` (unfinished runs resume from the journal). SIGHUP
    reloads the mutable options.
    """

    def __init__(self, conf: cfg.ConfigOpts, store: Store, engine: Engine,
                 app: Any, notifier: Notifier, metrics: Any = None,
                 api: concurrency.WSGIServer | None = None):
        """``app``: the API's, or None when ``[api] enabled`` is false.
        ``metrics``: the app of ``/metrics`` on its own address
        (``[metrics] host`` and ``port``), if it has one. ``api``: the
        server already listening with ``app`` (``build``'s), if any."""
        self.conf = conf
        self.store = store
        self.engine = engine
        self.app = app
        self.metrics = metrics
        self.notifier = notifier
        self._api = api
        self.port: int | None = None
        self._stop_signals = 0

    def run(self) -> None:
        """Serve until a stop signal, then stop in order: each part is
        stopped by the block that opened it, innermost first. Raises
        ConfigError if the API cannot listen (when ``build`` has not
        made it listen already)."""
        with self._signals():
            try:
                self._serve()
            finally:
                self.store.close()

    def _serve(self) -> None:
        api = self._api
        if api is None and self.app is not None:
            api = _listen(self.conf.api.host, self.conf.api.port, self.app)
        try:
            with self._metrics():
                if api is None:
                    LOG.info("Store open; no API here ([api] enabled = "
                             "false): notifications come through the "
                             "shared database")
                    ready = "store open, no API"
                else:
                    self.port = api.port
                    LOG.info("Serving on %s:%d (auth: %s); store open",
                             self.conf.api.host, self.port,
                             self.conf.api.auth_strategy)
                    ready = f"listening on {self.conf.api.host}:{self.port}"
                # The loop's first turn follows at once; a scrape that
                # comes first (the API answers on its own threads) sees
                # it alive, not a loop that never turned.
                METRICS.heartbeat.set_to_current_time()
                self.notifier.ready(ready)
                self.engine.serve()     # returns once drained after stop()
        finally:
            if api is not None:
                self._stop_api(api)

    @contextlib.contextmanager
    def _metrics(self) -> Iterator[None]:
        if self.metrics is None:
            yield
            return
        group = self.conf.metrics
        server = _listen(group.host, group.port, self.metrics)
        LOG.info("Serving /metrics on %s:%d", group.host, server.port)
        try:
            yield
        finally:
            server.stop(0)

    def _stop_api(self, api: concurrency.WSGIServer) -> None:
        # Requests in flight write to the store: let them end first.
        if not api.stop(self.conf.engine.graceful_shutdown_timeout):
            LOG.warning("Stopping with API requests unanswered")

    @contextlib.contextmanager
    def _signals(self) -> Iterator[None]:
        handlers = {signal.SIGTERM: self._terminate,
                    signal.SIGINT: self._terminate,
                    signal.SIGHUP: self._reload}
        previous = {signum: signal.signal(signum, handler)
                    for signum, handler in handlers.items()}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _terminate(self, signum: int, frame: object) -> None:
        self._stop_signals += 1
        if self._stop_signals > 1:
            LOG.warning("Second stop signal: exiting now; unfinished runs "
                        "resume from the journal at the next start")
            os._exit(EXIT_FORCED)
        LOG.info("Stop signal: taking no new work, letting instances in "
                 "flight finish (up to %s s)",
                 self.conf.engine.graceful_shutdown_timeout)
        self.notifier.stopping("stopping: letting runs in flight finish")
        self.engine.stop()

    def _reload(self, signum: int, frame: object) -> None:
        self.conf.mutate_config_files()
        LOG.info("Reloaded the mutable options from the config files")


def _listen(host: str, port: int, app: Any) -> concurrency.WSGIServer:
    try:
        return concurrency.serve_wsgi(
            host, port, app, logging.getLogger("recovery.api.access"))
    except OSError as exc:
        raise exception.ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}"
        ) from exc


def load_conf(argv: list[str] | None) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    log.register_options(conf)
    conf(args=argv, project="recovery", prog="recovery-engine")
    log.setup(conf, "recovery")
    return conf


def waiting_for_database(conf: cfg.ConfigOpts, notifier: Notifier
                         ) -> Callable[[Unreachable], None]:
    """What the start does after each attempt that found the database
    not answering: one log line, and a STATUS that extends systemd's
    start timeout past the next attempt."""
    def report(failed: Unreachable) -> None:
        of = f" of {failed.attempts}" if failed.attempts else ""
        LOG.warning("Waiting for the database, attempt %d%s: %s. Next "
                    "attempt in %g s; the API answers 503 until then",
                    failed.attempt, of, failed.error, failed.delay)
        notifier.extend_timeout(
            failed.delay + ATTEMPT_MARGIN
            + ATTEMPT_TIMEOUTS * conf.database.statement_timeout,
            f"waiting for the database: attempt {failed.attempt}{of} "
            f"failed, next in {failed.delay:g} s")
    return report


def build(conf: cfg.ConfigOpts, notifier: Notifier) -> Server:
    """Check the config (a config error stops here), listen (unless
    ``[api] enabled`` is false), then open the store, waiting for a
    server database that does not answer yet: the API answers 503 until
    it opens."""
    clock = concurrency.Clock()
    # One session and one rate limit for every recovery. The intake check
    # (the API's) answers quickly, outside the queue.
    means = runner.Means.load(conf, clock, "recovery-engine")
    deferred = starting.Deferred(conf.database.retry_interval)
    served, metrics = _apps(conf, health.route(deferred, conf))
    api = None
    if served is not None:
        api = _listen(conf.api.host, conf.api.port, served)
        LOG.info("Listening on %s:%d (auth: %s); opening the store",
                 conf.api.host, api.port, conf.api.auth_strategy)
    try:
        store = open_conf_store(
            conf, on_unreachable=waiting_for_database(conf, notifier),
            clock=clock)
    except BaseException:
        if api is not None:
            api.stop(0)
        raise
    engine = engine_for(conf, store, means, heartbeat=Heartbeat(notifier))
    if conf.metrics.enabled:
        METRICS.watch_store(store)
        METRICS.in_flight.set_function(engine.in_flight)
    engine.open_bus()
    if served is not None:
        checker = load_nova(conf, clock, timeout=conf.api.nova_check_timeout,
                            retries=0, rate=0)
        deferred.serve(app.from_conf(
            conf, store, checker.match_compute_host, clock,
            on_stored=engine.wake.set,
            liveness=Liveness.from_conf(conf, checker)))
    return Server(conf, store, engine, served, notifier, metrics=metrics,
                  api=api)


def _apps(conf: cfg.ConfigOpts, api: Any) -> tuple[Any, Any]:
    """What the API's address serves, behind ``[api] auth_strategy`` (None
    when ``[api] enabled`` is false), and the app of ``/metrics`` on its
    own address (None: none, or on the API's)."""
    served = auth.protect(api, conf) if conf.api.enabled else None
    if not conf.metrics.enabled:
        return served, None
    if conf.metrics.host:
        return served, auth.guard(
            METRICS.wsgi_app(), conf, conf.metrics.host)
    if served is None:
        LOG.warning("No /metrics: [api] enabled is false and [metrics] "
                    "host is not set; set it to serve /metrics on an "
                    "address of its own")
        return None, None
    public = frozenset({METRICS_PATH} if auth.is_loopback(conf.api.host)
                       else ())
    return auth.protect(_with_metrics(api), conf, public), None


def engine_for(conf: cfg.ConfigOpts, store: Store, means: runner.Means,
               heartbeat: Callable[[str], None] = lambda status: None
               ) -> Engine:
    """The engine, with its parts made from the config: the detector and
    the safety gates on ``means``' Nova, one lease keeper for all its
    runs, and each claimed notification run with ``means``."""
    clock = means.clock
    domains = FailureDomains(conf, means.nova, clock)
    return Engine(
        conf, store, clock,
        detector=Detector(conf, store, means.nova, means.fencing, clock,
                          name=this_process(), domains=domains),
        gates=Gates(conf, store, means.nova, clock, domains),
        keeper=LeaseKeeper(store, clock, conf.engine.lease_seconds),
        attempt=lambda run: run.attempt(means), heartbeat=heartbeat)


def _with_metrics(api: Any) -> Any:
    """``api``, with ``/metrics`` on its address."""
    metrics = METRICS.wsgi_app()

    def route(environ: dict, start_response: Any) -> Any:
        target = metrics if environ.get("PATH_INFO") == METRICS_PATH else api
        return target(environ, start_response)
    return route


def _log_backend(conf: cfg.ConfigOpts) -> None:
    running = concurrency.backend()
    if (running != conf.concurrency_backend
            and not os.environ.get(concurrency.BACKEND_VARIABLE)):
        # The start read the config files itself, before oslo.config:
        # one it did not find can only be a bug, never silent.
        LOG.warning("[DEFAULT] concurrency_backend is %s, but this process "
                    "started on %s: set RECOVERY_CONCURRENCY_BACKEND to "
                    "choose", conf.concurrency_backend, running)
    LOG.info("Concurrency backend: %s", running)


def main(argv: list[str] | None = None) -> int:
    """``recovery-engine``, in a process ready for its backend."""
    try:
        conf = load_conf(argv)
    except cfg.Error as exc:
        print(f"recovery-engine: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    _log_backend(conf)
    try:
        # Server.run swaps its handlers in for this one, with no moment
        # between them when SIGTERM is unhandled.
        with stop_while_starting():
            build(conf, Notifier()).run()
    except exception.ConfigError as exc:
        failure, status = exc, EXIT_CONFIG
    except exception.StoreUnavailable as exc:
        failure, status = exc, EXIT_UNAVAILABLE
    except StopWhileStarting:
        LOG.info("Stop signal while starting: nothing runs yet; stopped")
        return EXIT_OK
    except KeyboardInterrupt:
        # Ctrl-C before the stop signals are handled (waiting for the
        # database): nothing runs yet.
        failure, status = "interrupted while starting", 130
    else:
        LOG.info("Stopped")
        return EXIT_OK
    # One line, outside the handler: a line logged in it would carry the
    # exception a second time.
    LOG.error("%s", failure)
    print(f"recovery-engine: error: {failure}", file=sys.stderr)
    return status
