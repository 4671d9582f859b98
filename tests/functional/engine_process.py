"""``recovery-engine`` as a real subprocess (green, as under systemd),
with a fake NOTIFY_SOCKET that records what it tells systemd."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from typing import Any

from recovery.db.store import Store
from recovery.db.store import open_store
from recovery.notification import Notification
from tests.fakenova import server as fakenova_server
from tests.fakenova.placement import endpoint_for
from tests.functional.cli_process import LOCK_REASON
from tests.functional.cli_process import run_cli

__all__ = ["LOCK_REASON", "EngineProcess", "create_schema",
           "owning_engine", "start_engines", "wait_until"]


def wait_until(predicate, timeout: float = 30.0, what: str = "condition"):
    return fakenova_server.wait_until(predicate, timeout, what=what)


class EngineProcess:
    """One engine. Its store is SQLite in ``workdir`` unless ``database``
    names a shared one, whose schema ``create_schema`` makes first."""

    def __init__(self, workdir, nova_endpoint: str, threads: int = 5,
                 extra: str = "", poll_interval: float = 0.05,
                 database: str | None = None, lease_seconds: float = 30,
                 netns: str | None = None,
                 env: dict[str, str] | None = None, api: bool = True):
        """``api``: whether it serves its own API (``[api] enabled``).
        ``netns``: run it in that network namespace (tests.netlab),
        with ``nova_endpoint`` and ``database`` as reached from there.
        Its API is then reachable only from inside it. ``env``: variables
        set for the process on top of the test's environment (e.g.
        RECOVERY_CONCURRENCY_BACKEND)."""
        self.workdir = workdir
        self.env = dict(env or {})
        self.netns = netns
        self.poll_interval = poll_interval
        self.database = database or f"sqlite:///{workdir}/r.sqlite"
        self.lease_seconds = lease_seconds
        self.api = api
        self.config = workdir / "recovery.conf"
        self.log = workdir / "engine.log"
        self.write_config(nova_endpoint, threads, extra)
        # AF_UNIX paths are short: keep the socket out of pytest's tmp.
        self._sockdir = tempfile.mkdtemp(prefix="nfy", dir="/tmp")
        self.notify_path = os.path.join(self._sockdir, "notify")
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(self.notify_path)
        self.messages: list[dict[str, str]] = []
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None

    def write_config(self, endpoint: str, threads: int, extra: str,
                     retry_backoff: float = 0.2) -> None:
        self.config.write_text(
            f"[DEFAULT]\nhost_failure_recovery_threads = {threads}\n"
            f"log_file = {self.log}\n\n"
            f"[host_failure]\npoll_interval = {self.poll_interval}\n"
            f"evacuation_timeout = 60\n\n"
            f"[safety]\nservice_down_time = 3\n\n"
            f"[nova]\nauth_type = admin_token\nendpoint = {endpoint}\n"
            f"placement_endpoint_override = {endpoint_for(endpoint)}\n"
            f"token = admin:admin:admin\ntimeout = 5\n"
            # No load balancer queues requests here: a request may reach
            # Nova at most 1 s past its timeout.
            f"late_request_margin = 1\n\n"
            f"[database]\nconnection = {self.database}\n\n"
            f"[api]\nauth_strategy = noauth\nport = 0\n"
            f"enabled = {self.api}\n\n"
            f"[engine]\nretry_backoff = {retry_backoff:g}\n"
            f"lease_seconds = {self.lease_seconds:g}\n"
            f"graceful_shutdown_timeout = 20\n{extra}")

    # -- process -----------------------------------------------------------
    def start(self, watchdog_usec: int | None = None,
              ready_timeout: float | None = 30.0) -> None:
        """Start it and wait ``ready_timeout`` seconds for READY=1 (None:
        do not wait; then ``wait_ready``)."""
        env = {**os.environ, **self.env, "NOTIFY_SOCKET": self.notify_path,
               "PYTHONWARNINGS": "ignore"}
        if watchdog_usec:
            env["WATCHDOG_USEC"] = str(watchdog_usec)
        command = [sys.executable, "-m", "recovery.cmd.engine",
                   "--config-file", str(self.config)]
        if self.netns:
            # ip execs the command: proc.pid is still the engine's.
            command = ["ip", "netns", "exec", self.netns, *command]
        self.proc = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL,
            stderr=open(self.workdir / "stderr.log", "ab"))
        if ready_timeout is not None:
            self.wait_ready(ready_timeout)

    def wait_ready(self, timeout: float = 30.0) -> dict[str, str]:
        """READY=1, once the engine sends it; its API port (if it serves
        one) is then known."""
        ready = self.wait_message(lambda m: m.get("READY") == "1",
                                  timeout=timeout, what="READY=1")
        if self.api:
            self.port = int(ready["STATUS"].rsplit(":", 1)[1])
        return ready

    @property
    def owner(self) -> str:
        """The owner name its leases carry (recovery.db.store's
        ``this_process``), and its Nova requests' User-Agent."""
        return f"{socket.gethostname()}:{self.proc.pid}"

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def wait_exit(self, timeout: float = 30.0) -> int:
        return self.proc.wait(timeout)

    def close(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.kill()
        self.notify.close()
        shutil.rmtree(self._sockdir, ignore_errors=True)

    # -- systemd notify ------------------------------------------------------
    def drain(self) -> None:
        self.notify.setblocking(False)
        while True:
            try:
                data = self.notify.recv(4096)
            except BlockingIOError:
                return
            fields = dict(line.split("=", 1)
                          for line in data.decode().splitlines())
            self.messages.append(fields)

    def wait_message(self, predicate, timeout: float = 30.0,
                     what: str = "message") -> dict[str, str]:
        seen = len(self.messages)

        def found():
            self.drain()
            if self.proc.poll() is not None:
                raise RuntimeError(f"engine exited {self.proc.returncode}: "
                                   f"{self.stderr()}")
            return next((m for m in self.messages[seen:] if predicate(m)),
                        None)

        return wait_until(found, timeout, what)

    def stderr(self) -> str:
        return (self.workdir / "stderr.log").read_text()[-3000:]

    # -- the API -------------------------------------------------------------
    def request(self, method: str, path: str, body: Any = None,
                timeout: float = 10.0) -> tuple[int, Any]:
        """At the latest microversion, as python-masakariclient asks."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
            headers={"Content-Type": "application/json",
                     "OpenStack-API-Version": "instance-ha latest"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, _body(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, _body(exc.read())

    def post(self, type: str, host: str, payload: dict,
             generated: str = "2026-11-22T10:00:00") -> str:
        """Send a notification; its uuid (it must be accepted)."""
        status, body = self.request("POST", "/v1/notifications", {
            "notification": {"type": type, "hostname": host,
                             "generated_time": generated,
                             "payload": payload}})
        assert status == 202, body
        return body["notification"]["notification_uuid"]

    def post_host_down(self, host: str, generated: str = "2026-11-22T10:00:00",
                       event: str = "STOPPED") -> str:
        cluster = "ONLINE" if event == "STARTED" else "OFFLINE"
        return self.post("COMPUTE_HOST", host, {
            "event": event, "host_status": "NORMAL",
            "cluster_status": cluster}, generated)

    def post_vm(self, uuid: str, host: str,
                generated: str = "2026-11-22T10:00:00") -> str:
        return self.post("VM", host, {
            "instance_uuid": uuid, "event": "LIFECYCLE",
            "vir_domain_event": "STOPPED_FAILED"}, generated)

    def post_process(self, event: str, host: str,
                     generated: str = "2026-11-22T10:00:00") -> str:
        return self.post("PROCESS", host, {
            "process_name": "nova-compute", "event": event}, generated)

    def store(self) -> Store:
        """The engine's store, to read (and seed) what it records."""
        return open_store(self.database)

    def stored(self, **filters: Any) -> list[Notification]:
        """The notifications in the engine's store, newest first."""
        store = self.store()
        try:
            return store.list_notifications(filters=filters)
        finally:
            store.close()

    def wait_only(self, status: str, timeout: float = 60.0) -> Notification:
        """The store's one notification (nobody posted it: the detector
        did), once it is ``status``."""
        return wait_until(
            lambda: len(found := self.stored()) == 1
            and found[0].status.value == status and found[0],
            timeout, f"the one notification {status}")

    def notification(self, uuid: str) -> dict[str, Any]:
        return self.request("GET", f"/v1/notifications/{uuid}")[1][
            "notification"]

    def wait_status(self, uuid: str, *statuses: str,
                    timeout: float = 60.0) -> dict[str, Any]:
        return wait_until(
            lambda: (n := self.notification(uuid))["status"] in statuses
            and n, timeout, f"notification {uuid} in {statuses}")


def _body(raw: bytes) -> Any:
    """An answer's JSON; its text when it is not JSON (a server error's
    traceback), to show in an assertion."""
    try:
        return json.loads(raw or b"null")
    except ValueError:
        return raw.decode(errors="replace")


def create_schema(config) -> None:
    """Create a shared database's schema, as an operator does once before
    starting the engines (they refuse a database without it)."""
    done = run_cli(str(config), "db", "upgrade")
    assert done.returncode == 0, done.stderr


def start_engines(count: int, root, nova_endpoint: str, database: str,
                  lease_seconds: float = 5,
                  **options: Any) -> list[EngineProcess]:
    """``count`` engines on one shared database, each with its own
    directory (config, log) under ``root`` and its own API port; the
    schema is created first. The caller closes them. The shortest lease
    ([engine] lease_seconds' minimum) keeps takeovers quick."""
    engines = []
    for n in range(1, count + 1):
        workdir = root / f"engine-{n}"
        workdir.mkdir()
        engines.append(EngineProcess(
            workdir, nova_endpoint, database=database,
            lease_seconds=lease_seconds, **options))
    try:
        create_schema(engines[0].config)
        for engine in engines:
            engine.start()
    except BaseException:
        for engine in engines:
            engine.close()
        raise
    return engines


def owning_engine(engines: list[EngineProcess], store: Store,
                  uuid: str) -> EngineProcess:
    """The engine whose name is in the notification's owner column, once
    one has claimed it."""
    owner = wait_until(lambda: store.get(uuid).owner,
                       what=f"an owner for {uuid}")
    [engine] = [e for e in engines if e.owner == owner]
    return engine
