"""The child process of ``test_engine_server``: recovery-engine's
``Server`` on the backend RECOVERY_CONCURRENCY_BACKEND names, around a
stand-in engine, store and app that note what happens, in order; the
notes go to stdout as JSON, the backend first.

``python -m tests.functional.server_child SCENARIO``, where SCENARIO is

- ``stop``: serve, then send itself SIGTERM;
- ``slow-request``: the same with a request in flight that takes 0.3 s;
- ``hung-request``: the same with a request that never ends;
- ``taken-port``: the API's port is taken.

Like the entry points, it imports the project only once started.
"""

import json
import logging
import os
import signal
import socket
import sys
import urllib.request

from recovery import concurrency

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# How long the slow and the hung requests take.
REQUEST_SECONDS = {"slow-request": 0.3, "hung-request": 30.0}


def get(port: int, path: str = "/") -> bool:
    """True if the API answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}",
                                    timeout=60) as response:
            return response.read() == b"ok"
    except OSError:
        return False


class App:
    def __init__(self, scenario: str):
        self.seconds = REQUEST_SECONDS.get(scenario)
        self.entered = concurrency.Event()

    def __call__(self, environ, start_response):
        if environ["PATH_INFO"] == "/slow":
            self.entered.set()
            concurrency.Clock().sleep(self.seconds)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]


class Engine:
    def __init__(self, notes: list[str], app: App):
        self.notes = notes
        self.app = app
        self.server = None
        self._stopped = concurrency.Event()

    def serve(self) -> None:
        port = self.server.port
        self.notes.append(f"serving; API answers: {get(port)}")
        if self.app.seconds is not None:
            concurrency.spawn(self._slow_request, port)
            self.app.entered.wait(10)
        os.kill(os.getpid(), signal.SIGTERM)
        self.notes.append(f"drained: {self._stopped.wait(10)}")

    def _slow_request(self, port: int) -> None:
        answered = get(port, "/slow")
        self.notes.append(f"request in flight answered: {answered}")

    def stop(self) -> None:
        self.notes.append("engine takes no new work")
        self._stopped.set()


class Store:
    def __init__(self, notes: list[str]):
        self.notes = notes
        self.server = None

    def close(self) -> None:
        port = self.server.port
        self.notes.append(f"store closed; API answers: "
                          f"{port is not None and get(port)}")


class Notifier:
    def __init__(self, notes: list[str]):
        self.notes = notes

    def ready(self, status: str) -> None:
        self.notes.append("READY")

    def stopping(self, status: str) -> None:
        self.notes.append("STOPPING")


class Warnings(logging.Handler):
    def __init__(self, notes: list[str]):
        super().__init__(logging.WARNING)
        self.notes = notes

    def emit(self, record: logging.LogRecord) -> None:
        self.notes.append(f"warning: {record.getMessage()}")


def main(scenario: str) -> list[str]:
    # The backend the test names (RECOVERY_CONCURRENCY_BACKEND).
    concurrency.start([], "server_child")
    from oslo_config import cfg

    from recovery import conf as recovery_conf
    from recovery import exception
    from recovery.engine.server import Server

    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf(args=[])
    conf.set_override("graceful_shutdown_timeout", 1, "engine")
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1] if scenario == "taken-port" else 0
    conf.set_override("port", port, "api")
    notes: list[str] = [f"backend: {concurrency.backend()}"]
    logging.getLogger("recovery.engine").addHandler(Warnings(notes))

    def previous(signum, frame):
        """Whoever handled the signals before the server."""

    for signum in SIGNALS:
        signal.signal(signum, previous)
    app = App(scenario)
    engine, store = Engine(notes, app), Store(notes)
    server = Server(conf, store, engine, app, Notifier(notes))
    engine.server = store.server = server
    try:
        server.run()
    except exception.ConfigError as exc:
        notes.append(f"ConfigError: {exc}")
    restored = all(signal.getsignal(s) is previous for s in SIGNALS)
    notes.append(f"signal handlers restored: {restored}")
    return notes


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])), flush=True)
