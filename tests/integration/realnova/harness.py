"""Start and drive the real Nova of ``server.py`` from a test process.

    with RealNova(hosts=4) as nova:
        server_id = nova.create("vm-1", host="compute-1")
        nova.settle(server_id, state="stopped")
        nova.fail_host("compute-1")
        nova.wait_service("compute-1", state="down")

Nova's heartbeat settings are the harness's (stack.REPORT_INTERVAL, 1 s,
and SERVICE_DOWN_TIME, 3 s) unless a start asks for others, such as
Nova's defaults: ``RealNova(hosts=4, report_interval=10,
service_down_time=60)``.

Tokens are ``user:project[:roles]`` (see ``stack.context_from_token``).
Test servers belong to the project ``demo``, not to the engine's
(``admin``), so that a lock the engine takes is an admin lock.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.fakenova.server import wait_until

REPO = Path(__file__).resolve().parents[3]
IMAGE = "155d900f-4e14-4e4c-a73d-069cbf4541e6"  # Nova's fake glance image
FLAVOR = "1"  # m1.tiny
MICROVERSION = "2.94"

ENGINE_TOKEN = "admin:admin:admin"
OWNER_TOKEN = "demo:demo:member,reader"
OWNER_ADMIN_TOKEN = "demo-admin:demo:admin,member,reader"
OWNER_LOCK_REASON = "owner's lock"

#: How ``boot`` leaves a server: the status it waits for after acting.
STATES = ("active", "stopped", "error", "paused")


class NovaError(Exception):
    """A Nova or control request answered with an HTTP error."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


class RealNova:
    """A real Nova in a child process, with hosts compute-1..N.

    ``report_interval`` and ``service_down_time`` (seconds, Nova's
    options) default to the harness's short ones (stack.py)."""

    def __init__(self, hosts: int = 4, start_timeout: float = 90.0,
                 python: str = sys.executable,
                 report_interval: int | None = None,
                 service_down_time: int | None = None) -> None:
        self.hosts = [f"compute-{i}" for i in range(1, hosts + 1)]
        self._heartbeats = {"--report-interval": report_interval,
                            "--service-down-time": service_down_time}
        self._start_timeout = start_timeout
        self._python = python
        self._dir = Path(tempfile.mkdtemp(prefix="realnova-"))
        self.log_path = self._dir / "nova.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._info: dict[str, Any] = {}

    # -- lifecycle ------------------------------------------------------
    def start(self) -> RealNova:
        ready = self._dir / "ready.json"
        heartbeats = [arg for option, value in self._heartbeats.items()
                      if value is not None for arg in (option, str(value))]
        with open(self.log_path, "wb") as log:
            self._proc = subprocess.Popen(
                [self._python, "-m", "tests.integration.realnova.server",
                 "--hosts", str(len(self.hosts)), "--port", "0",
                 "--ready-file", str(ready), *heartbeats],
                cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": str(REPO)})
        deadline = time.monotonic() + self._start_timeout
        while not ready.exists():
            if self._proc.poll() is not None:
                raise RuntimeError(f"Nova exited {self._proc.returncode} at "
                                   f"start-up; see {self.log_path}")
            if time.monotonic() > deadline:
                self._proc.kill()
                self._proc.wait()
                raise TimeoutError(f"Nova not ready in {self._start_timeout}"
                                   f" s; see {self.log_path}")
            time.sleep(0.1)
        self._info = json.loads(ready.read_text())
        return self

    def stop(self) -> None:
        """Stop Nova and remove its files. A Nova that died on its own
        keeps its log, to be read."""
        if self._proc is None or self._proc.poll() is not None:
            return
        try:
            self.control("stop")
            self._proc.wait(timeout=10)
        except (OSError, NovaError, subprocess.TimeoutExpired):
            self._proc.kill()
            self._proc.wait()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> RealNova:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def endpoint(self) -> str:
        """The compute endpoint for novaclient: ``http://127.0.0.1:P/v2.1``."""
        return str(self._info["endpoint"])

    # -- HTTP -----------------------------------------------------------
    def _request(self, method: str, url: str, body: Any,
                 headers: dict[str, str]) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method, headers={
            "Content-Type": "application/json", **headers})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raise NovaError(exc.code, exc.read().decode()) from None
        return json.loads(raw) if raw else None

    def control(self, command: str, **body: Any) -> Any:
        return self._request("POST", f"{self._info['control']}/{command}",
                             body, {})

    def api(self, method: str, path: str, body: Any = None,
            token: str = ENGINE_TOKEN,
            microversion: str = MICROVERSION) -> Any:
        """One compute API call; ``path`` is relative to ``endpoint``."""
        return self._request(method, self.endpoint + path, body, {
            "X-Auth-Token": token,
            "OpenStack-API-Version": f"compute {microversion}"})

    # -- hosts ----------------------------------------------------------
    def fail_host(self, host: str) -> None:
        """Stop the host's nova-compute: Nova sees it down once its last
        heartbeat is service_down_time old (3 s by default)."""
        self.control("fail_host", host=host)

    def restore_host(self, host: str) -> None:
        """Start a new nova-compute for the host (its guests are kept)."""
        self.control("restore_host", host=host)

    def service(self, host: str) -> dict[str, Any]:
        services = self.api(
            "GET", f"/os-services?binary=nova-compute&host={host}")
        return dict(services["services"][0])

    def wait_service(self, host: str, state: str,
                     timeout: float = 30.0) -> dict[str, Any]:
        return wait_until(
            lambda: (found := self.service(host))["state"] == state
            and found, timeout, interval=0.1, what=f"{host} {state}")

    # -- servers --------------------------------------------------------
    def server(self, server_id: str) -> dict[str, Any]:
        return dict(self.api("GET", f"/servers/{server_id}")["server"])

    def wait_status(self, server_id: str, status: str,
                    timeout: float = 30.0) -> dict[str, Any]:
        return wait_until(
            lambda: (found := self.server(server_id))["status"] == status
            and found, timeout, interval=0.1,
            what=f"server {server_id} {status}")

    def action(self, server_id: str, body: dict[str, Any],
               token: str = ENGINE_TOKEN) -> None:
        self.api("POST", f"/servers/{server_id}/action", body, token=token)

    def create(self, name: str, host: str,
               metadata: dict[str, str] | None = None,
               flavor: str = FLAVOR) -> str:
        """Ask for a server of project ``demo`` on ``host``; its id."""
        created = self.api("POST", "/servers", {"server": {
            "name": name, "imageRef": IMAGE, "flavorRef": flavor,
            "networks": "none", "availability_zone": f"nova:{host}",
            "metadata": metadata or {}}}, token=OWNER_ADMIN_TOKEN)
        return str(created["server"]["id"])

    def settle(self, server_id: str, state: str = "active",
               locked_by_owner: bool = False,
               task_state: str | None = None) -> dict[str, Any]:
        """Wait for a created server to be ACTIVE, then set it up.

        ``state``: active, stopped, error or paused; ``locked_by_owner``
        locks it from its own project; ``task_state`` leaves a task stuck.
        """
        if state not in STATES:
            raise ValueError(f"state must be one of {STATES}")
        self.wait_status(server_id, "ACTIVE")
        if state == "stopped":
            self.action(server_id, {"os-stop": None}, token=OWNER_TOKEN)
            self.wait_status(server_id, "SHUTOFF")
        elif state == "error":
            self.action(server_id, {"os-resetState": {"state": "error"}})
        elif state == "paused":
            self.action(server_id, {"pause": None}, token=OWNER_TOKEN)
            self.wait_status(server_id, "PAUSED")
        if locked_by_owner:
            self.action(server_id,
                        {"lock": {"locked_reason": OWNER_LOCK_REASON}},
                        token=OWNER_TOKEN)
        if task_state is not None:
            self.control("set_task_state", server=server_id,
                         task_state=task_state)
        return self.server(server_id)

    def servers(self) -> list[dict[str, Any]]:
        """Every instance (id, host, vm_state, task_state) from Nova's
        database, not through its API."""
        return list(self.control("servers")["result"])

    def calls(self) -> list[dict[str, Any]]:
        """The compute API requests Nova has served, in arrival order."""
        return list(self.control("calls")["result"])
