"""``recovery-engine``: the notification API and the recovery engine in
one service, meant to run under systemd (``Type=notify``).

- READY once the store is open and the API listens; STATUS says what the
  engine is doing; the watchdog is pinged from the main loop.
- SIGTERM (or Ctrl-C): take no new work, let runs in flight reach a
  journaled point (``[engine] graceful_shutdown_timeout``), exit 0. A
  second SIGTERM exits at once with 1; the journal stays consistent.
- SIGHUP: reload the mutable options (threads, timeouts, retry policy,
  log levels) from the config files.
"""

import logging
import os
import signal
import sys

from oslo_config import cfg
from oslo_log import log

from recovery import concurrency
from recovery import conf as recovery_conf
from recovery import exception
from recovery.api import auth
from recovery.api.app import NotificationAPI
from recovery.db.store import open_conf_store
from recovery.engine.service import Engine
from recovery.engine.systemd import Notifier
from recovery.fencing import load_fencing
from recovery.nova import load_nova

LOG = logging.getLogger("recovery.engine")
EXIT_OK, EXIT_FORCED, EXIT_CONFIG = 0, 1, 2


class Heartbeat:
    """What the engine's main loop calls each turn: watchdog and STATUS."""

    def __init__(self, notifier: Notifier):
        self._notifier = notifier
        self._last: str | None = None

    def __call__(self, status: str) -> None:
        if self._notifier.watchdog_interval is not None:
            self._notifier.watchdog()
        if status != self._last:
            self._notifier.status(status)
            self._last = status


def load_conf(argv: list[str] | None) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    log.register_options(conf)
    conf(args=argv, project="recovery", prog="recovery-engine")
    log.setup(conf, "recovery")
    return conf


def build(conf: cfg.ConfigOpts, notifier: Notifier) -> tuple[Engine, int]:
    """Open the store, check the Nova config, start the API. Returns the
    engine and the port the API listens on."""
    clock = concurrency.Clock()
    store = open_conf_store(conf)
    # One session and one rate limit for every recovery; a config error
    # stops here. The intake check answers quickly, outside the queue.
    nova = load_nova(conf, clock)
    engine = Engine(conf, store, nova, load_fencing(conf), clock,
                    heartbeat=Heartbeat(notifier))
    checker = load_nova(conf, clock, timeout=conf.api.nova_check_timeout,
                        retries=0, rate=0)
    api = NotificationAPI(
        store, lambda host: checker.get_compute_service(host).id, clock,
        max_body=conf.api.max_request_body_size,
        duplicate_window=conf.api.duplicate_notification_detection_interval,
        on_stored=engine.wake.set)
    app = auth.protect(api, conf)
    try:
        _, port = concurrency.serve_wsgi(
            conf.api.host, conf.api.port, app,
            logging.getLogger("recovery.api.access"))
    except OSError as exc:
        raise exception.ConfigError(
            f"cannot listen on {conf.api.host}:{conf.api.port}: "
            f"{exc.strerror or exc}") from exc
    return engine, port


def install_signal_handlers(conf: cfg.ConfigOpts, engine: Engine,
                            notifier: Notifier) -> None:
    terms = []

    def terminate(signum: int, frame: object) -> None:
        terms.append(signum)
        if len(terms) > 1:
            LOG.warning("Second stop signal: exiting now; unfinished runs "
                        "resume from the journal at the next start")
            os._exit(EXIT_FORCED)
        LOG.info("Stop signal: taking no new work, letting instances in "
                 "flight finish (up to %s s)",
                 conf.engine.graceful_shutdown_timeout)
        notifier.stopping("stopping: letting runs in flight finish")
        engine.stop()

    def reload(signum: int, frame: object) -> None:
        conf.mutate_config_files()
        LOG.info("Reloaded the mutable options from the config files")

    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, terminate)
    signal.signal(signal.SIGHUP, reload)


def main(argv: list[str] | None = None) -> int:
    try:
        conf = load_conf(argv)
    except cfg.Error as exc:
        print(f"recovery-engine: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    notifier = Notifier()
    try:
        engine, port = build(conf, notifier)
    except exception.ConfigError as exc:
        LOG.error("%s", exc)
        print(f"recovery-engine: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    install_signal_handlers(conf, engine, notifier)
    LOG.info("Listening on %s:%d (auth: %s); store open", conf.api.host,
             port, conf.api.auth_strategy)
    notifier.ready(f"listening on {conf.api.host}:{port}")
    engine.serve()
    engine.store.close()
    LOG.info("Stopped")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
