"""FakeNova: the control object tests use, serving over real HTTP."""

from __future__ import annotations

import copy
import http.server
import re
import socketserver
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any
from wsgiref import simple_server

from tests.fakenova import live_migration
from tests.fakenova import views
from tests.fakenova.app import NovaApp
from tests.fakenova.state import IMAGE_ID
from tests.fakenova.state import Injection
from tests.fakenova.state import State

EVACUATION_OUTCOMES = (None, "ok", "error", "hang")
LIVE_MIGRATION_OUTCOMES = (None, "ok", "error", "failed", "hang")


class _ThreadingWSGIServer(socketserver.ThreadingMixIn,
                           simple_server.WSGIServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's default backlog is 5: a burst of fifty requests (a
    # recovery with fifty threads) overflowed it on a loaded machine, and
    # connections were dropped. A real Nova API's is in the hundreds.
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that gave up (timeouts) are not an error here."""


class _KeepAliveServerHandler(simple_server.ServerHandler):
    # Answers as HTTP/1.1, so the client keeps the connection.
    http_version = "1.1"


class _QuietHandler(simple_server.WSGIRequestHandler):
    """Serves requests on a connection until the client closes it, as a
    real Nova API does (HTTP/1.1 keep-alive): wsgiref's handler serves one
    and closes, which would make every request of a client a new TCP
    connection, and its cost the client's. Every answer has its
    Content-Length (``NovaApp``), so the next request can follow.

    An answer is written whole, in one send: written line by line on a
    connection that stays open, its parts would wait on the client's
    delayed acknowledgements (Nagle), 40 ms each."""

    protocol_version = "HTTP/1.1"
    wbufsize = -1

    def handle(self) -> None:
        http.server.BaseHTTPRequestHandler.handle(self)

    def handle_one_request(self) -> None:
        """wsgiref's ``handle``, as one request of the connection's loop."""
        self.raw_requestline = self.rfile.readline(65537)
        if not self.raw_requestline or len(self.raw_requestline) > 65536:
            self.close_connection = True
            return
        if not self.parse_request():
            self.wfile.flush()
            return
        handler = _KeepAliveServerHandler(
            self.rfile, self.wfile, self.get_stderr(), self.get_environ(),
            multithread=False)
        handler.request_handler = self
        handler.run(self.server.get_app())

    def log_message(self, format: str, *args: Any) -> None:
        """No access log on stderr."""

    def get_environ(self) -> dict[str, Any]:
        """With the client's socket, which an injected reset drops."""
        environ = super().get_environ()
        environ["fakenova.socket"] = self.connection
        return environ


class FakeNova:
    """A fake Nova compute API on 127.0.0.1 with a Python control API."""

    def __init__(self, evacuation_latency: float = 0.05,
                 host_move_lag: float = 0.0, max_limit: int = 1000,
                 report_interval: float = 0.0,
                 service_down_time: float = 60.0,
                 request_latency: tuple[float, float] = (0.0, 0.0),
                 evacuation_jitter: float = 0.0,
                 seed: int | None = None) -> None:
        """``report_interval`` > 0: each service heartbeats as Nova's do,
        every ``report_interval`` seconds at its own phase (``updated_at``
        is its last heartbeat), and is down once that is older than
        ``service_down_time``. 0 (the default): ``updated_at`` is now
        while it runs, and a failed host is down at once.

        Random latency (none by default): each request waits a time drawn
        uniformly from ``request_latency`` (seconds, low and high) before
        it is served; each evacuation takes ``evacuation_latency`` times a
        factor drawn from 1 +/- ``evacuation_jitter``. ``seed`` makes the
        draws repeatable."""
        if report_interval < 0 or service_down_time < 0:
            raise ValueError("report_interval and service_down_time are "
                             "seconds, >= 0")
        low, high = request_latency
        if not 0 <= low <= high or not 0 <= evacuation_jitter < 1:
            raise ValueError("request_latency is (low, high) seconds, "
                             "0 <= low <= high; evacuation_jitter is in "
                             "[0, 1)")
        self._state = State(evacuation_latency, host_move_lag, max_limit,
                            report_interval, service_down_time,
                            request_latency=request_latency,
                            evacuation_jitter=evacuation_jitter, seed=seed)
        self._httpd: _ThreadingWSGIServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------
    def start(self) -> FakeNova:
        httpd = _ThreadingWSGIServer(("127.0.0.1", 0), _QuietHandler)
        httpd.set_app(NovaApp(self._state))
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.01},
            name="fakenova-http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._state.shutdown()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> FakeNova:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    @property
    def endpoint(self) -> str:
        if self._httpd is None:
            raise RuntimeError("FakeNova is not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v2.1"

    # -- knobs -----------------------------------------------------------
    @property
    def microversion_max(self) -> str:
        return self._state.microversion_max

    @microversion_max.setter
    def microversion_max(self, value: str) -> None:
        self._state.microversion_max = value

    @property
    def max_limit(self) -> int:
        """Nova's [api]max_limit: the default and largest page size."""
        return self._state.max_limit

    @max_limit.setter
    def max_limit(self, value: int) -> None:
        self._state.max_limit = value

    # -- building the world ---------------------------------------------
    def add_compute(self, host: str, up: bool = True,
                    status: str = "enabled", forced_down: bool = False,
                    disabled_reason: str | None = None,
                    capacity: int | None = None) -> str:
        return self._state.add_compute(host, up, status, forced_down,
                                       disabled_reason, capacity)

    def add_server(self, name: str, host: str, vm_state: str = "active",
                   task_state: str | None = None, project_id: str = "demo",
                   user_id: str = "demo-user",
                   metadata: dict[str, str] | None = None,
                   locked_by: str | None = None,
                   locked_reason: str | None = None,
                   extra_specs: dict[str, str] | None = None,
                   image_id: str | None = IMAGE_ID,
                   volumes: tuple[str, ...] = (), ephemeral_gb: int = 0,
                   swap_mb: int = 0) -> str:
        """``extra_specs``: its flavor's (hw:tpm_version: a vTPM, which
        Nova refuses to evacuate); ``image_id``: one of ``add_image``'s,
        whose properties Nova keeps from now on (hw_tpm_version: a vTPM
        too), or None for a server booted from a volume (its "image" is
        "", as Nova shows it); ``volumes``: the Cinder volumes attached;
        ``ephemeral_gb`` and ``swap_mb``: its flavor's ephemeral and swap
        disks."""
        return self._state.add_server(
            name, host, vm_state, task_state, project_id, user_id, metadata,
            locked_by, locked_reason, extra_specs, image_id,
            disks=dict(volumes=tuple(volumes), ephemeral_gb=ephemeral_gb,
                       swap_mb=swap_mb))

    def add_image(self, properties: dict[str, str]) -> str:
        """An image in Glance, with ``properties``; its id."""
        image_id = str(uuid.uuid4())
        with self._state.lock:
            self._state.images[image_id] = dict(properties)
        return image_id

    def delete_image(self, image_id: str) -> None:
        """Gone from Glance; instances booted from it keep its
        properties, as Nova saved them."""
        with self._state.lock:
            del self._state.images[image_id]

    def add_aggregate(self, name: str, hosts: list[str],
                      availability_zone: str | None = None,
                      metadata: dict[str, str] | None = None) -> int:
        return self._state.add_aggregate(name, hosts, availability_zone,
                                         metadata or {})

    def set_capacity(self, host: str, capacity: int | None) -> None:
        """How many instances the host holds before NoValidHost."""
        with self._state.lock:
            self._compute(host).capacity = capacity

    # -- host failures ---------------------------------------------------
    def fail_host(self, host: str) -> None:
        """Heartbeats stop: the service is reported down at once, or
        (report_interval) once its last heartbeat is service_down_time
        old."""
        with self._state.lock:
            self._compute(host).stop_heartbeats()

    def restore_host(self, host: str) -> None:
        """nova-compute restarts: heartbeats again, evacuated guests are
        cleaned up ("done" evacuations become "completed") and the
        COMPUTE_STATUS_DISABLED trait is synchronised."""
        with self._state.lock:
            service = self._compute(host)
            service.start_heartbeats()
            service.trait_disabled = service.disabled
            for migration in self._state.migrations:
                if (migration.source_compute == host
                        and migration.migration_type == "evacuation"
                        and migration.status == "done"):
                    self._state.set_migration_status(migration,
                                                     "completed")

    def _compute(self, host: str) -> Any:
        service = self._state.computes.get(host)
        if service is None:
            raise KeyError(f"unknown compute host {host}")
        return service

    def set_evacuation_outcome(self, uuid: str, outcome: str | None) -> None:
        """"error": the rebuild fails; "hang": it never finishes;
        None or "ok": evacuations of this server succeed again."""
        if outcome not in EVACUATION_OUTCOMES:
            raise ValueError(f"bad outcome {outcome!r}")
        with self._state.lock:
            server = self._state.servers[uuid]
            server.evacuation_outcome = None if outcome == "ok" else outcome

    def set_live_migration_outcome(self, uuid: str,
                                   outcome: str | None) -> None:
        """"error": the destination's pre-check fails; "failed": it fails
        while running and rolls back; "hang": it stays running; None or
        "ok": live migrations of this server succeed again."""
        if outcome not in LIVE_MIGRATION_OUTCOMES:
            raise ValueError(f"bad outcome {outcome!r}")
        with self._state.lock:
            server = self._state.servers[uuid]
            server.live_migration_outcome = (None if outcome == "ok"
                                             else outcome)

    def set_max_concurrent_live_migrations(self, host: str,
                                           limit: int) -> None:
        """The host's nova.conf [DEFAULT]max_concurrent_live_migrations
        (1 unless set): how many live migrations from it run at once, the
        others queued; 0 (deprecated) is 5, as in nova-compute's native
        threading mode. Queued ones start at once if there is room."""
        if limit < 0:
            raise ValueError(f"bad limit {limit!r}")
        with self._state.lock:
            self._compute(host)
            self._state.max_live_migrations[host] = limit
            live_migration.start_queued(self._state, host)

    def inject(self, method: str | None, path_regex: str, *,
               action: str | None = None, status: int | None = None,
               delay: float = 0.0, times: int = 1,
               after: bool = False, reset: bool = False) -> None:
        """Fault the next `times` requests matching method + path (re.search
        on the full path, e.g. /v2.1/servers/detail) + server action.

        Before Nova acts (``after`` false) or after (``after`` true), wait
        ``delay`` seconds, then answer ``status`` instead of Nova's answer,
        or drop the connection with no answer (``reset``). The faults of
        an overloaded cloud, with ``delay`` past the client's timeout:
        - late delivery: ``delay`` alone; Nova acts after the client
          gave up (a request held in a load balancer's queue);
        - late answer: ``delay`` with ``after``; Nova acts at once, its
          answer comes after the client gave up;
        - reset before execution: ``reset``; Nova never sees it;
        - reset after execution: ``reset`` with ``after``.
        """
        rule = Injection(method, re.compile(path_regex), action, status,
                         delay, times, after, reset)
        with self._state.lock:
            self._state.injections.append(rule)

    # -- snapshots -------------------------------------------------------
    def server(self, uuid: str) -> dict[str, Any]:
        with self._state.lock:
            server = self._state.servers[uuid]
            return {
                "id": server.uuid, "name": server.name,
                "host": server.host, "node": server.node,
                "vm_state": server.vm_state,
                "task_state": server.task_state,
                "power_state": server.power_state,
                "status": views.server_status(server),
                "locked": server.locked, "locked_by": server.locked_by,
                "locked_reason": server.locked_reason,
                "metadata": dict(server.metadata),
                "project_id": server.project_id,
                "user_id": server.user_id,
                "fault": server.fault["message"] if server.fault else None,
            }

    def servers(self) -> list[dict[str, Any]]:
        with self._state.lock:
            ids = [s.uuid for s in sorted(self._state.servers.values(),
                                          key=lambda s: s.seq)]
            return [self.server(ident) for ident in ids]

    def service(self, host: str) -> dict[str, Any]:
        with self._state.lock:
            service = self._compute(host)
            return {
                "id": service.uuid, "host": service.host,
                "state": "up" if service.up else "down",
                "status": "disabled" if service.disabled else "enabled",
                "forced_down": service.forced_down,
                "disabled_reason": service.disabled_reason,
                "running": service.running,
                "updated_at": service.updated_at,
                "placement_disabled": service.trait_disabled,
            }

    def migrations(self) -> list[dict[str, Any]]:
        with self._state.lock:
            return [{"id": m.id, "uuid": m.uuid,
                     "instance_uuid": m.instance_uuid,
                     "source_compute": m.source_compute,
                     "dest_compute": m.dest_compute, "status": m.status,
                     "migration_type": m.migration_type,
                     "created_at": m.created_at,
                     "updated_at": m.updated_at}
                    for m in self._state.migrations]

    @property
    def evacuate_calls(self) -> list[dict[str, Any]]:
        return self._records(self._state.evacuate_calls)

    @property
    def live_migrate_calls(self) -> list[dict[str, Any]]:
        return self._records(self._state.live_migrate_calls)

    def peak_live_migrations(self) -> dict[str, dict[str, int]]:
        """The most live migrations seen preparing or running at once,
        by "source" and by "dest" host."""
        with self._state.lock:
            return copy.deepcopy(self._state.live_migration_peaks)

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self._records(self._state.requests)

    @property
    def lock_events(self) -> list[dict[str, Any]]:
        return self._records(self._state.lock_events)

    def _records(self, records: list[dict[str, Any]]) -> list[dict]:
        with self._state.lock:
            return copy.deepcopy(records)

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 5.0,
                 interval: float = 0.005) -> Any:
        """Poll predicate() until it returns something truthy."""
        return wait_until(predicate, timeout, interval=interval)


def wait_until(predicate: Callable[[], Any], timeout: float, *,
               interval: float = 0.01, what: str = "condition") -> Any:
    """Poll ``predicate`` until truthy (a test helper, not recovery code)."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not met within {timeout} s")
        time.sleep(interval)
