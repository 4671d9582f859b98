"""Test doubles for unit tests: a clock that never sleeps, a pool that
runs tasks one after the other, and an in-memory stand-in for the project's
own Nova facade (``recovery.nova.Nova``), driven by the fake clock.

Behaviour against real HTTP is tested in tests/functional with the fake
Nova server; these keep each step's unit test small and deterministic.
"""

import dataclasses
import datetime
import itertools
from typing import Any

from oslo_config import cfg

from recovery import conf as recovery_conf
from recovery import exception
from recovery.concurrency import TaskOutcome
from recovery.events import News
from recovery.fencing import Proof
from recovery.flows.context import Env
from recovery.flows.context import Settings
from recovery.flows.watcher import EvacuationWatcher
from recovery.models import Aggregate
from recovery.models import ComputeService
from recovery.models import Migration
from recovery.models import Need
from recovery.models import Server
from recovery.results import InstanceResult


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds

    def wait(self, event, seconds) -> bool:
        """A wait that is not ended by the event lasts all ``seconds``,
        at once; with no limit it blocks on the event (another thread
        sets it)."""
        if event.is_set():
            return True
        if seconds is None:
            return event.wait()
        self.sleep(seconds)
        return event.is_set()

    def now(self) -> datetime.datetime:
        return (datetime.datetime(2026, 11, 22, tzinfo=datetime.timezone.utc)
                + datetime.timedelta(seconds=self.t))


class SyncPool:
    """Runs tasks in order; records the size it was made with."""

    def __init__(self, size: int) -> None:
        self.size = size

    def run(self, fn, items):
        outcomes = []
        for item in items:
            try:
                outcomes.append(TaskOutcome(item, value=fn(item)))
            except Exception as exc:
                outcomes.append(TaskOutcome(item, error=exc))
        return outcomes


class ListRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str | None]] = []
        self.steps: list[tuple[str, str]] = []
        # The news each step change brought, if any.
        self.news: list[tuple[str, str, News]] = []
        # The instances a step said it starts on.
        self.instances: list[tuple[str, int]] = []

    def step_changed(self, step: str, state: str, message: str, *,
                     news: News | None = None,
                     instances: int | None = None) -> None:
        self.steps.append((step, state))
        if news is not None:
            self.news.append((step, state, news))
        if instances is not None:
            self.instances.append((step, instances))

    def instance_changed(self, result: InstanceResult) -> None:
        outcome = result.outcome.value if result.outcome else None
        self.events.append((result.uuid, result.phase.value, outcome))


def settings(**overrides: Any) -> Settings:
    """The options' own defaults, with the values these tests rely on."""
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf([], project="recovery", default_config_files=[])
    values = dict(threads=3, evacuate_all_instances=True,
                  ha_metadata_key="HA_Enabled", ignore_error_instances=False,
                  disable_reason="host down", lock_reason="recovery lock",
                  evacuation_timeout=30.0, state_change_timeout=10.0,
                  poll_interval=1.0, service_down_time=60.0,
                  host_return_timeout=60.0)
    values.update(overrides)
    return dataclasses.replace(Settings.from_conf(conf), **values)


@dataclasses.dataclass
class SegmentRecord:
    """A segment or host row, as ``recovery.flows.placement`` reads it
    from the store (reserved hosts and their claims)."""

    uuid: str
    name: str
    claimed_by: str | None = None
    recovery_method: str = "reserved_host"


@dataclasses.dataclass
class FakeServer:
    id: str
    name: str
    host: str
    vm_state: str = "active"
    task_state: str | None = None
    locked: bool = False
    locked_reason: str | None = None
    metadata: dict[str, str] = dataclasses.field(default_factory=dict)
    fault: str | None = None
    need: Need | None = None
    # Its root disk's image (None: booted from a volume).
    image_id: str | None = None

    def snapshot(self) -> Server:
        status = {"active": "ACTIVE", "stopped": "SHUTOFF",
                  "error": "ERROR"}.get(self.vm_state, self.vm_state.upper())
        return Server(id=self.id, name=self.name, host=self.host,
                      vm_state=self.vm_state, task_state=self.task_state,
                      status=status, locked=self.locked,
                      locked_reason=self.locked_reason,
                      metadata=dict(self.metadata), fault=self.fault,
                      need=self.need, image_id=self.image_id)


# Nova's time: the newest heartbeat, the conductor's.
NOVA_NOW = datetime.datetime(2026, 11, 22, 12, tzinfo=datetime.timezone.utc)
CONDUCTOR = ComputeService(id="svc-conductor", host="controller",
                           state="up", status="enabled", forced_down=False,
                           disabled_reason=None, binary="nova-conductor",
                           updated_at=NOVA_NOW)


class FakeFencer:
    """A host's fencing (a ``HostFence``) that powers off on request, or
    fails."""

    driver = "fake"

    def __init__(self, nova: "MemoryNova", error: Exception | None = None):
        self.nova, self.error = nova, error

    def describe(self) -> str:
        return "fake power-off"

    @property
    def storage(self):
        return ()

    def power_off(self, clock, tell=None, gate=None, lags=None) -> Proof:
        self.nova.calls.append(("power_off", ""))
        if self.error is not None:
            raise self.error
        return Proof("powered off, verified Off")


class MemoryNova:
    """An in-memory Nova facade. An evacuation advances one migration
    status per poll of ``list_evacuations``: accepted -> pre-migrating ->
    done (the host moves to its target, or to ``dest``). A target holding
    ``capacity[host]`` instances refuses more: "No valid host"."""

    STEPS = ("accepted", "pre-migrating", "done")

    def __init__(self, dest: str = "compute-2",
                 active_ends_stopped: bool = False) -> None:
        self.dest = dest
        self.active_ends_stopped = active_ends_stopped   # microversion 2.95
        self.retries = 1
        self.services: dict[str, ComputeService] = {}
        self.servers: dict[str, FakeServer] = {}
        self.migrations: list[dict[str, Any]] = []
        self.calls: list[tuple] = []
        self.errors: dict[tuple[str, str], list[Exception]] = {}
        self.outcomes: dict[str, str] = {}   # uuid -> "error" | "hang"
        self.acted_then_failed: set[str] = set()
        self.capacity: dict[str, int] = {}
        # Placement's view, by host: None, no Placement to ask.
        self.room: dict[str, Need] | None = None
        self.aggregates: list[Aggregate] = []
        self.aggregate_hosts: dict[int, list[str]] = {}
        self.aggregate_metadata: dict[int, dict[str, str]] = {}
        self.clock: FakeClock | None = None
        # Requests that reach Nova later, by the clock: (when, method,
        # uuid, lock reason).
        self.late: list[tuple[float, str, str, str | None]] = []
        self._ids = itertools.count(1)

    def check(self) -> None:
        """No lease: the run may always act."""

    @property
    def evacuated_active_vm_state(self) -> str:
        return "stopped" if self.active_ends_stopped else "active"

    # -- set-up ------------------------------------------------------------
    def add_service(self, host: str, state: str = "down",
                    status: str = "enabled", forced_down: bool = False,
                    heartbeat_age: float | None = None):
        """``heartbeat_age``: seconds since its last heartbeat, as Nova
        sees it (default: 0 when up, an hour when down)."""
        if heartbeat_age is None:
            heartbeat_age = 0 if state == "up" else 3600
        self.services[host] = ComputeService(
            id=f"svc-{host}", host=host, state=state, status=status,
            forced_down=forced_down, disabled_reason=None,
            updated_at=NOVA_NOW - datetime.timedelta(seconds=heartbeat_age))

    def add_server(self, uuid: str, host: str = "compute-1", **fields):
        self.servers[uuid] = FakeServer(id=uuid, name=f"vm-{uuid}",
                                        host=host, **fields)
        return self.servers[uuid]

    def fail(self, method: str, key: str, *errors: Exception) -> None:
        self.errors[(method, key)] = list(errors)

    def deliver_late(self, method: str, uuid: str, after: float) -> None:
        """The next ``method`` ("lock" or "evacuate") of ``uuid`` times
        out, and reaches Nova ``after`` seconds later (by ``self.clock``,
        which the test sets): a request held in a load balancer."""
        self.fail(method, uuid, exception.NovaUnreachable("timed out"))
        self.arrives(after, method, uuid)

    def arrives(self, at: float, method: str, uuid: str,
                reason: str = "recovery lock") -> None:
        """``method`` of ``uuid`` reaches Nova at ``at`` (by the clock),
        unasked: one sent before a crash, or someone else's lock."""
        self.late.append((at, method, uuid, reason))

    def _arrive(self) -> None:
        """The late requests whose time has come reach Nova."""
        due = [r for r in self.late if r[0] <= self.clock.t]
        self.late = [r for r in self.late if r[0] > self.clock.t]
        for _, method, uuid, reason in due:
            self.calls.append((f"late_{method}", uuid))
            server = self.servers[uuid]
            if method == "lock":
                server.locked, server.locked_reason = True, reason
            else:
                self._begin_evacuation(server)

    def _record(self, method: str, key: str, *args: Any) -> None:
        if self.clock is not None:
            self._arrive()
        self.calls.append((method, key, *args))
        pending = self.errors.get((method, key))
        if pending:
            raise pending.pop(0)

    def names(self) -> list[str]:
        return [call[0] for call in self.calls]

    # -- the facade ----------------------------------------------------------
    def free_room(self) -> dict[str, Need]:
        if self.room is None:
            raise exception.ConfigError("no Placement endpoint configured")
        self._record("free_room", "")
        return dict(self.room)

    def list_services(self) -> list[ComputeService]:
        """The conductor's heartbeat is Nova's time: NOVA_NOW, moving on
        with ``self.clock`` when a test sets one."""
        self._record("list_services", "")
        elapsed = self.clock.t if self.clock else 0
        conductor = dataclasses.replace(
            CONDUCTOR, updated_at=NOVA_NOW + datetime.timedelta(
                seconds=elapsed))
        return [conductor, *self.services.values()]

    def get_compute_service(self, host: str) -> ComputeService:
        self._record("get_compute_service", host)
        if host not in self.services:
            raise exception.UnknownHost(f"no service {host}")
        return self.services[host]

    def force_down(self, service: ComputeService,
                   forced: bool) -> ComputeService:
        self._record("force_down", service.host, forced)
        state = "down" if forced else service.state
        self.services[service.host] = dataclasses.replace(
            self.services[service.host], forced_down=forced, state=state)
        return self.services[service.host]

    def isolate(self, service: ComputeService,
                reason: str | None) -> ComputeService:
        self._record("isolate", service.host, reason)
        changes = {"forced_down": True, "state": "down"}
        if reason is not None:
            changes.update(status="disabled", disabled_reason=reason)
        self.services[service.host] = dataclasses.replace(
            self.services[service.host], **changes)
        return self.services[service.host]

    def disable(self, service: ComputeService, reason: str) -> None:
        self._record("disable", service.host, reason)
        self.services[service.host] = dataclasses.replace(
            self.services[service.host], status="disabled",
            disabled_reason=reason)

    def enable(self, service: ComputeService) -> None:
        self._record("enable", service.host)
        self.services[service.host] = dataclasses.replace(
            self.services[service.host], status="enabled",
            disabled_reason=None)

    def list_servers(self, host: str) -> list[Server]:
        self._record("list_servers", host)
        return [s.snapshot() for s in self.servers.values() if s.host == host]

    def get_server(self, uuid: str) -> Server:
        self._record("get_server", uuid)
        return self.servers[uuid].snapshot()

    def lock(self, uuid: str, reason: str, in_flight=None) -> None:
        """Retried as the facade retries it; each error the test set up
        that may still reach Nova is told to ``in_flight``."""
        for attempt in range(self.retries + 1):
            try:
                self._record("lock", uuid, reason)
                break
            except exception.NovaError as exc:
                if in_flight is not None and exc.in_flight:
                    in_flight(exc)
                if not exc.uncertain or attempt == self.retries:
                    raise
        server = self.servers[uuid]
        server.locked, server.locked_reason = True, reason

    def list_locked_servers(self) -> list[Server]:
        self._record("list_locked_servers", "")
        return [s.snapshot() for s in self.servers.values() if s.locked]

    def unlock(self, uuid: str) -> None:
        self._record("unlock", uuid)
        server = self.servers[uuid]
        server.locked, server.locked_reason = False, None

    def reset_state(self, uuid: str, state: str) -> None:
        self._record("reset_state", uuid, state)
        server = self.servers[uuid]
        server.vm_state, server.task_state = state, None

    def stop(self, uuid: str) -> None:
        self._record("stop", uuid)
        self.servers[uuid].vm_state = "stopped"

    def start(self, uuid: str) -> None:
        self._record("start", uuid)
        self.servers[uuid].vm_state = "active"

    def pause(self, uuid: str) -> None:
        self._record("pause", uuid)
        self._from_active(uuid, "pause", "paused")

    def suspend(self, uuid: str) -> None:
        self._record("suspend", uuid)
        self._from_active(uuid, "suspend", "suspended")

    def confirm_resize(self, uuid: str) -> None:
        """Nova confirms only VERIFY_RESIZE; the resize's source host (up
        here) frees the old flavor and the instance is active again."""
        self._record("confirm_resize", uuid)
        server = self.servers[uuid]
        if server.vm_state != "resized":
            raise exception.NovaConflict(
                f"Cannot 'confirmResize' instance {uuid} while it is in "
                f"vm_state {server.vm_state} (HTTP 409)", status=409)
        server.vm_state = "active"

    def _from_active(self, uuid: str, action: str, vm_state: str) -> None:
        """Nova pauses and suspends only an active instance."""
        server = self.servers[uuid]
        if server.vm_state != "active":
            raise exception.NovaConflict(
                f"Cannot '{action}' instance {uuid} while it is in "
                f"vm_state {server.vm_state} (HTTP 409)", status=409)
        server.vm_state = vm_state

    def evacuate(self, uuid: str, host: str | None = None) -> None:
        server = self.servers[uuid]
        self._check_evacuable(server)
        if uuid in self.acted_then_failed:
            self.acted_then_failed.discard(uuid)
            self._begin_evacuation(server, host)
            self.calls.append(("evacuate", uuid))
            raise exception.NovaError("lost answer", status=502)
        self._record("evacuate", uuid, *([host] if host else []))
        self._begin_evacuation(server, host)

    def _check_evacuable(self, server: FakeServer) -> None:
        """Nova's refusals (see the contract tests)."""
        source = self.services.get(server.host)
        if source is not None and source.state == "up":
            raise exception.NovaConflict(
                f"Nova refused to evacuate: Compute service of "
                f"{server.host} is still in use. (HTTP 400)", status=400)
        if server.vm_state not in ("active", "stopped", "error"):
            raise exception.NovaConflict(
                f"Nova refused to evacuate: Cannot 'evacuate' instance "
                f"{server.id} while it is in vm_state {server.vm_state} "
                f"(HTTP 409)", status=409)

    def _begin_evacuation(self, server: FakeServer,
                          host: str | None = None) -> None:
        server.task_state = "rebuilding"
        dest = host or self.dest
        full = dest in self.capacity and self.capacity[dest] <= sum(
            1 for s in self.servers.values() if s.host == dest) + sum(
            1 for m in self.migrations
            if m["dest"] == dest and m.get("status") not in ("done",
                                                             "error"))
        self.migrations.append({"id": next(self._ids), "uuid": server.id,
                                "source": server.host, "step": 0,
                                "dest": dest, "full": full})

    def list_aggregates(self) -> list[Aggregate]:
        self._record("list_aggregates", "")
        return [dataclasses.replace(
            a, hosts=tuple(self.aggregate_hosts[a.id]),
            metadata=tuple(sorted(self.aggregate_metadata.get(
                a.id, {}).items()))) for a in self.aggregates]

    def aggregates_of(self, host: str) -> list[Aggregate]:
        self._record("aggregates_of", host)
        return [a for a in self.aggregates
                if host in self.aggregate_hosts[a.id]]

    def add_to_aggregate(self, aggregate: Aggregate, host: str) -> None:
        self._record("add_to_aggregate", aggregate.name, host)
        if host not in self.aggregate_hosts[aggregate.id]:
            self.aggregate_hosts[aggregate.id].append(host)

    def list_evacuations(self, source_host: str | None = None,
                         changes_since=None, instance_uuid=None):
        self._record("list_evacuations", source_host or instance_uuid or "")
        found = []
        for record in self.migrations:
            if source_host not in (None, record["source"]):
                continue
            if instance_uuid not in (None, record["uuid"]):
                continue
            self._advance(record)
            found.append(Migration(
                id=record["id"], uuid=f"mig-{record['id']}",
                instance_uuid=record["uuid"], status=record["status"],
                source_compute=record["source"],
                dest_compute=record["dest"]))
        return found

    def _advance(self, record: dict[str, Any]) -> None:
        server = self.servers[record["uuid"]]
        outcome = self.outcomes.get(server.id)
        if outcome == "hang" or record.get("status") in ("done", "error"):
            record.setdefault("status", "accepted")
            return
        record["step"] = min(record["step"] + 1, len(self.STEPS) - 1)
        record["status"] = self.STEPS[record["step"]]
        if record["full"]:
            record["status"] = "error"
            server.vm_state, server.task_state = "error", None
            server.fault = ("No valid host was found. There are not "
                            "enough hosts available.")
        elif outcome == "error" and record["status"] == "done":
            record["status"] = "error"
            server.vm_state, server.task_state = "error", None
        elif record["status"] == "done":
            server.host, server.task_state = record["dest"], None
            if server.vm_state == "error" or (
                    server.vm_state == "active" and not
                    self.active_ends_stopped):
                server.vm_state = "active"
            elif server.vm_state == "active":
                server.vm_state = "stopped"


def make_env(nova: MemoryNova, clock: FakeClock | None = None,
             recorder: ListRecorder | None = None, **overrides: Any) -> Env:
    clock = clock or FakeClock()
    return Env(nova=nova, clock=clock, settings=settings(**overrides),
               recorder=recorder or ListRecorder(),
               watcher=EvacuationWatcher(clock))
