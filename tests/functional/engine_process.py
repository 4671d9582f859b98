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
from tests.fakenova import server as fakenova_server
from tests.functional.cli_process import LOCK_REASON

__all__ = ["LOCK_REASON", "EngineProcess", "wait_until"]


def wait_until(predicate, timeout: float = 30.0, what: str = "condition"):
    return fakenova_server.wait_until(predicate, timeout, what=what)


class EngineProcess:
    def __init__(self, workdir, nova_endpoint: str, threads: int = 5,
                 extra: str = "", poll_interval: float = 0.05):
        self.workdir = workdir
        self.poll_interval = poll_interval
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

    def write_config(self, endpoint: str, threads: int, extra: str) -> None:
        self.config.write_text(
            f"[DEFAULT]\nhost_failure_recovery_threads = {threads}\n"
            f"log_file = {self.log}\n\n"
            f"[host_failure]\npoll_interval = {self.poll_interval}\n"
            f"evacuation_timeout = 60\n\n"
            f"[safety]\nservice_down_time = 3\n\n"
            f"[nova]\nauth_type = admin_token\nendpoint = {endpoint}\n"
            f"token = admin:admin:admin\ntimeout = 5\n\n"
            f"[database]\nconnection = sqlite:///{self.workdir}/r.sqlite\n\n"
            f"[api]\nauth_strategy = noauth\nport = 0\n\n"
            f"[engine]\nretry_backoff = 0.2\nlease_seconds = 30\n"
            f"graceful_shutdown_timeout = 20\n{extra}")

    # -- process -----------------------------------------------------------
    def start(self, watchdog_usec: int | None = None) -> None:
        env = {**os.environ, "NOTIFY_SOCKET": self.notify_path,
               "PYTHONWARNINGS": "ignore"}
        if watchdog_usec:
            env["WATCHDOG_USEC"] = str(watchdog_usec)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "recovery.cmd.engine", "--config-file",
             str(self.config)], env=env, stdout=subprocess.DEVNULL,
            stderr=open(self.workdir / "stderr.log", "ab"))
        ready = self.wait_message(lambda m: m.get("READY") == "1",
                                  what="READY=1")
        self.port = int(ready["STATUS"].rsplit(":", 1)[1])

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
    def request(self, method: str, path: str,
                body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
            headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")

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
        return open_store(f"sqlite:///{self.workdir}/r.sqlite")

    def notification(self, uuid: str) -> dict[str, Any]:
        return self.request("GET", f"/v1/notifications/{uuid}")[1][
            "notification"]

    def wait_status(self, uuid: str, *statuses: str,
                    timeout: float = 60.0) -> dict[str, Any]:
        return wait_until(
            lambda: (n := self.notification(uuid))["status"] in statuses
            and n, timeout, f"notification {uuid} in {statuses}")
