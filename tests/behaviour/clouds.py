"""The two Novas the behaviour suite runs against, behind one interface.

``FakeCloud`` is the project's fake Nova (fast, in the test process);
``RealCloud`` is a real Nova 34 on its fake virt driver, in a child process
(``tests/integration/realnova``). Both serve the compute API over HTTP, so
reads and operator actions go through the same API calls; only building
the world, failing a host and reading the request log differ.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import urllib.error
import urllib.request
from typing import Any

from tests.databases import _skip_or_fail
from tests.fakenova import FakeNova
from tests.fakenova.server import wait_until
from tests.integration.realnova.harness import ENGINE_TOKEN
from tests.integration.realnova.harness import MICROVERSION
from tests.integration.realnova.harness import OWNER_LOCK_REASON
from tests.integration.realnova.harness import RealNova

HOSTS = ("compute-1", "compute-2", "compute-3", "compute-4")
HA_KEY = "HA_Enabled"


NOVA_MISSING = importlib.util.find_spec("nova") is None  # never import it


def require_nova() -> None:
    """Skip a real-Nova test where nova is not installed; under CI
    (CI=true) fail it, so the tier is never lost without a sign."""
    if NOVA_MISSING:
        _skip_or_fail("nova is not installed (tox -e integration installs "
                      "it)")


@dataclasses.dataclass(frozen=True)
class Spec:
    """An instance to put on a host before it fails."""

    name: str
    state: str = "active"           # active, stopped or error
    ha: bool = True                 # metadata HA_Enabled=True
    owner_locked: bool = False      # locked by its own project
    task_state: str | None = None   # a task stuck on the dead host
    # More metadata (e.g. HA_Priority), set at boot.
    metadata: dict[str, str] = dataclasses.field(default_factory=dict)

    def all_metadata(self) -> dict[str, str]:
        return {**({HA_KEY: "True"} if self.ha else {}), **self.metadata}


class Cloud:
    """What the suite needs from a Nova; subclasses build and break it."""

    kind = ""

    def __init__(self) -> None:
        self._mark = 0

    @property
    def endpoint(self) -> str:
        raise NotImplementedError

    # -- building and breaking -----------------------------------------
    def boot(self, host: str, specs: list[Spec]) -> dict[str, str]:
        """Put the instances on ``host``; their ids by name. The request
        log starts afresh afterwards (see ``calls``)."""
        ids = self._boot(host, specs)
        self._mark = len(self._all_calls())
        return ids

    def _boot(self, host: str, specs: list[Spec]) -> dict[str, str]:
        raise NotImplementedError

    def fail_host(self, host: str) -> None:
        """Stop the host's nova-compute and wait until Nova says down."""
        raise NotImplementedError

    def restore_host(self, host: str) -> None:
        """Start the host's nova-compute again, as after a repair."""
        raise NotImplementedError

    def calls(self) -> list[dict[str, Any]]:
        """Compute API requests since the last ``boot``, in arrival
        order: method, path, server action and status."""
        return self._all_calls()[self._mark:]

    def _all_calls(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    # -- the compute API, the same for both ---------------------------
    def api(self, method: str, path: str,
            body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.endpoint + path, data=data, method=method, headers={
                "Content-Type": "application/json",
                "X-Auth-Token": ENGINE_TOKEN,
                "OpenStack-API-Version": f"compute {MICROVERSION}"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                raw = resp.read()
                return resp.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            return exc.code, json.loads(raw) if raw else None

    def failure_domain(self, name: str, hosts: list[str]) -> None:
        """An aggregate named ``name`` of ``hosts``, with the metadata
        ``failure_domain=name``, made as an operator would, through the
        compute API."""
        status, body = self.api("POST", "/os-aggregates",
                                {"aggregate": {"name": name}})
        assert status == 200, (status, body)
        ident = body["aggregate"]["id"]
        actions = [{"set_metadata": {"metadata": {"failure_domain": name}}}]
        actions += [{"add_host": {"host": host}} for host in hosts]
        for action in actions:
            status, body = self.api("POST", f"/os-aggregates/{ident}/action",
                                    action)
            assert status == 200, (action, status, body)

    def _get(self, path: str) -> Any:
        status, body = self.api("GET", path)
        assert status == 200, (path, status, body)
        return body

    def server(self, server_id: str) -> dict[str, Any]:
        s = self._get(f"/servers/{server_id}")["server"]
        return {"id": s["id"], "name": s["name"], "status": s["status"],
                "host": s["OS-EXT-SRV-ATTR:host"],
                "vm_state": s["OS-EXT-STS:vm_state"],
                "task_state": s["OS-EXT-STS:task_state"],
                "locked": s["locked"], "locked_reason": s["locked_reason"]}

    def service(self, host: str) -> dict[str, Any]:
        [service] = self._get(
            f"/os-services?binary=nova-compute&host={host}")["services"]
        return dict(service)

    def wait_service(self, host: str, state: str,
                     timeout: float = 30.0) -> dict[str, Any]:
        return wait_until(
            lambda: (s := self.service(host))["state"] == state and s,
            timeout, interval=0.1, what=f"{host} {state}")

    def evacuation_migrations(self, host: str, changes_since: str = ""
                              ) -> list[dict[str, Any]]:
        query = f"migration_type=evacuation&source_compute={host}"
        if changes_since:
            query += f"&changes-since={changes_since}"
        return list(self._get(f"/os-migrations?{query}")["migrations"])

    def close(self) -> None:
        raise NotImplementedError


class FakeCloud(Cloud):
    kind = "fake"

    def __init__(self) -> None:
        super().__init__()
        self.nova = FakeNova(evacuation_latency=0.3).start()
        for host in HOSTS:
            self.nova.add_compute(host)

    @property
    def endpoint(self) -> str:
        return self.nova.endpoint

    def _boot(self, host: str, specs: list[Spec]) -> dict[str, str]:
        return {spec.name: self.nova.add_server(
            spec.name, host, vm_state=spec.state,
            task_state=spec.task_state,
            metadata=spec.all_metadata(),
            locked_by="owner" if spec.owner_locked else None,
            locked_reason=OWNER_LOCK_REASON) for spec in specs}

    def fail_host(self, host: str) -> None:
        self.nova.fail_host(host)

    def restore_host(self, host: str) -> None:
        self.nova.restore_host(host)

    def _all_calls(self) -> list[dict[str, Any]]:
        return sorted(self.nova.requests, key=lambda r: r["time"])

    def close(self) -> None:
        self.nova.stop()


class RealCloud(Cloud):
    kind = "real"

    def __init__(self) -> None:
        super().__init__()
        self.nova = RealNova(hosts=len(HOSTS)).start()

    @property
    def endpoint(self) -> str:
        return self.nova.endpoint

    def _boot(self, host: str, specs: list[Spec]) -> dict[str, str]:
        # Ask for every server first: Nova builds them concurrently.
        ids = {spec.name: self.nova.create(
            spec.name, host, spec.all_metadata())
            for spec in specs}
        for spec in specs:
            self.nova.settle(ids[spec.name], spec.state, spec.owner_locked,
                             spec.task_state)
        return ids

    def fail_host(self, host: str) -> None:
        self.nova.fail_host(host)
        self.wait_service(host, "down")

    def restore_host(self, host: str) -> None:
        self.nova.restore_host(host)

    def _all_calls(self) -> list[dict[str, Any]]:
        return self.nova.calls()

    def close(self) -> None:
        self.nova.stop()
