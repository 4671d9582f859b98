"""The fake Nova's model. One re-entrant lock guards all of it."""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import random
import re
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

# nova.compute.power_state
RUNNING, PAUSED, SHUTDOWN, SUSPENDED, NOSTATE = 1, 3, 4, 7, 0
POWER_FOR_VM_STATE = {"active": RUNNING, "stopped": SHUTDOWN,
                      "error": NOSTATE, "paused": PAUSED,
                      "suspended": SUSPENDED, "rescued": RUNNING,
                      "resized": RUNNING, "shelved": SHUTDOWN,
                      "soft-delete": SHUTDOWN}
# migration statuses after which nothing happens any more
FINAL_MIGRATION_STATUSES = ("done", "completed", "failed", "error")

# The image every instance boots from unless told otherwise.
IMAGE_ID = "70a599e0-31e7-49b7-b260-868f441e862b"


def utcnow() -> datetime.datetime:
    """Naive UTC, the way Nova stores timestamps."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return now.replace(tzinfo=None)


def node_name(host: str) -> str:
    """hypervisor_hostname differs from the service host on purpose."""
    return f"{host}.localdomain"


@dataclasses.dataclass
class Server:
    uuid: str
    name: str
    host: str
    project_id: str
    user_id: str
    vm_state: str
    task_state: str | None
    power_state: int
    metadata: dict[str, str]
    locked_by: str | None
    locked_reason: str | None
    seq: int
    created_at: datetime.datetime
    updated_at: datetime.datetime
    node: str = ""
    fault: dict[str, Any] | None = None
    evacuation_outcome: str | None = None
    evacuation: Any = None      # the evacuation in flight, if any
    live_migration_outcome: str | None = None
    # Its flavor's extra specs (hw:tpm_version: a vTPM, never evacuated).
    extra_specs: dict[str, str] = dataclasses.field(default_factory=dict)
    # The image it booted from (None: booted from a volume), and that
    # image's properties as Nova saved them at boot (hw_tpm_version: a
    # vTPM too).
    image_id: str | None = IMAGE_ID
    image_properties: dict[str, str] = dataclasses.field(
        default_factory=dict)
    # The volumes attached (Cinder ids), and its flavor's ephemeral (GB)
    # and swap (MB) disks.
    volumes: tuple[str, ...] = ()
    ephemeral_gb: int = 0
    swap_mb: int = 0

    @property
    def has_vtpm(self) -> bool:
        # As Nova's get_vtpm_constraint: the version asks for one.
        return ("hw:tpm_version" in self.extra_specs
                or "hw_tpm_version" in self.image_properties)

    @property
    def locked(self) -> bool:
        return self.locked_by is not None


@dataclasses.dataclass
class Service:
    uuid: str
    id: int
    host: str
    binary: str
    zone: str
    running: bool
    disabled: bool
    disabled_reason: str | None
    forced_down: bool
    trait_disabled: bool
    last_seen: datetime.datetime
    ip: str = "192.0.2.1"
    # How many instances the host holds (placement's inventory); None:
    # unlimited. The scheduler refuses a full host (NoValidHost).
    capacity: int | None = None
    # Heartbeats as Nova's (report_interval > 0): one every
    # report_interval seconds from beat_epoch on, while running; up while
    # the last one is at most service_down_time old. 0: updated_at is
    # always now while running, and a stopped service is down at once.
    report_interval: float = 0.0
    service_down_time: float = 0.0
    beat_epoch: datetime.datetime | None = None

    @property
    def up(self) -> bool:
        """servicegroup service_is_up(): heartbeats and not forced down."""
        if self.forced_down:
            return False
        if not self.report_interval:
            return self.running
        age = (utcnow() - self.updated_at).total_seconds()
        return age <= self.service_down_time

    @property
    def updated_at(self) -> datetime.datetime:
        """The last heartbeat."""
        if not self.running:
            return self.last_seen
        now = utcnow()
        if not self.report_interval or self.beat_epoch is None:
            return now
        beats = (now - self.beat_epoch).total_seconds() // self.report_interval
        return self.beat_epoch + datetime.timedelta(
            seconds=beats * self.report_interval)

    def stop_heartbeats(self) -> None:
        if self.running:
            self.last_seen = self.updated_at
            self.running = False

    def start_heartbeats(self) -> None:
        """nova-compute (re)starts: a heartbeat now, then one every
        report_interval."""
        self.running = True
        self.last_seen = self.beat_epoch = utcnow()


@dataclasses.dataclass
class Migration:
    id: int
    uuid: str
    instance_uuid: str
    source_compute: str
    source_node: str
    dest_compute: str | None
    dest_node: str | None
    dest_host: str | None
    status: str
    migration_type: str
    user_id: str
    project_id: str
    created_at: datetime.datetime
    updated_at: datetime.datetime | None = None


@dataclasses.dataclass
class Aggregate:
    id: int
    uuid: str
    name: str
    availability_zone: str | None
    hosts: list[str]
    created_at: datetime.datetime
    updated_at: datetime.datetime | None = None
    # Its metadata other than the availability zone.
    metadata: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Injection:
    method: str | None
    pattern: re.Pattern[str]
    action: str | None
    status: int | None
    delay: float
    remaining: int
    after: bool
    # Drop the connection, answering nothing (before or after Nova acts).
    reset: bool = False

    def matches(self, method: str, path: str, action: str | None) -> bool:
        if self.remaining <= 0:
            return False
        if self.method and self.method.upper() != method.upper():
            return False
        if self.action is not None and self.action != action:
            return False
        return self.pattern.search(path) is not None


class State:
    """Servers, services, migrations, aggregates and the call records."""

    def __init__(self, evacuation_latency: float,
                 host_move_lag: float, max_limit: int,
                 report_interval: float = 0.0,
                 service_down_time: float = 0.0,
                 request_latency: tuple[float, float] = (0.0, 0.0),
                 evacuation_jitter: float = 0.0,
                 seed: int | None = None) -> None:
        self.lock = threading.RLock()
        self.request_latency = request_latency
        self.evacuation_jitter = evacuation_jitter
        self._random = random.Random(seed)
        self.report_interval = report_interval
        self.service_down_time = service_down_time
        self.stopping = threading.Event()
        self.evacuation_latency = evacuation_latency
        self.host_move_lag = host_move_lag
        self.max_limit = max_limit
        self.microversion_max = "2.96"
        self.servers: dict[str, Server] = {}
        self.computes: dict[str, Service] = {}
        self.other_services: list[Service] = []
        self.migrations: list[Migration] = []
        self.aggregates: dict[int, Aggregate] = {}
        # Glance's images, by id: their properties.
        self.images: dict[str, dict[str, str]] = {IMAGE_ID: {}}
        self.evacuate_calls: list[dict[str, Any]] = []
        self.live_migrate_calls: list[dict[str, Any]] = []
        # Live migrations: each source compute's
        # [DEFAULT]max_concurrent_live_migrations (1 unless set), those
        # waiting for a slot of their source's executor, and the most seen
        # holding a slot at once, per source and per destination host.
        self.max_live_migrations: dict[str, int] = {}
        self.live_migration_queue: list[Any] = []
        self.live_migration_peaks: dict[str, dict[str, int]] = {
            "source": {}, "dest": {}}
        self.requests: list[dict[str, Any]] = []
        self.lock_events: list[dict[str, Any]] = []
        self.injections: list[Injection] = []
        self._ids = itertools.count(1)
        self._timers: list[threading.Timer] = []
        self._add_control_plane_services()

    # -- time and background work ---------------------------------------
    def request_delay(self) -> float:
        """How long the next request waits before it is served."""
        low, high = self.request_latency
        if not high:
            return 0.0
        with self.lock:
            return self._random.uniform(low, high)

    def one_evacuation_latency(self) -> float:
        """The latency of the next evacuation."""
        if not self.evacuation_jitter:
            return self.evacuation_latency
        with self.lock:
            factor = self._random.uniform(1 - self.evacuation_jitter,
                                          1 + self.evacuation_jitter)
        return self.evacuation_latency * factor

    def call_later(self, delay: float, func: Callable[..., None],
                   *args: Any) -> None:
        """Run func(*args) under the lock after delay seconds."""
        def run() -> None:
            with self.lock:
                if not self.stopping.is_set():
                    func(*args)
        timer = threading.Timer(max(delay, 0.0), run)
        timer.daemon = True
        with self.lock:
            self._timers = [t for t in self._timers if t.is_alive()]
            self._timers.append(timer)
        timer.start()

    def shutdown(self) -> None:
        self.stopping.set()
        with self.lock:
            timers, self._timers = self._timers, []
        for timer in timers:
            timer.cancel()

    def next_id(self) -> int:
        return next(self._ids)

    # -- building the world ---------------------------------------------
    def _add_control_plane_services(self) -> None:
        for binary in ("nova-conductor", "nova-scheduler"):
            self.other_services.append(self._new_service(
                "controller", binary, "internal"))

    def _new_service(self, host: str, binary: str, zone: str) -> Service:
        ident = self.next_id()
        now = utcnow()
        # Each service heartbeats at its own phase, the same every run.
        phase = random.Random(f"{host} {binary}").random()
        epoch = now - datetime.timedelta(
            seconds=phase * self.report_interval)
        return Service(str(uuid.uuid4()), ident, host, binary, zone,
                       running=True, disabled=False, disabled_reason=None,
                       forced_down=False, trait_disabled=False,
                       last_seen=now, ip=f"192.0.2.{ident % 250 + 1}",
                       report_interval=self.report_interval,
                       service_down_time=self.service_down_time,
                       beat_epoch=epoch)

    def add_compute(self, host: str, up: bool, status: str,
                    forced_down: bool, disabled_reason: str | None,
                    capacity: int | None = None) -> str:
        if status not in ("enabled", "disabled"):
            raise ValueError(f"bad status {status!r}")
        with self.lock:
            if host in self.computes:
                raise ValueError(f"compute {host} already exists")
            service = self._new_service(host, "nova-compute", "nova")
            service.running = up
            if not up and self.report_interval:
                # Its heartbeats stopped long ago: down from the start.
                service.last_seen -= datetime.timedelta(
                    seconds=self.service_down_time + self.report_interval)
            service.forced_down = forced_down
            service.disabled = status == "disabled"
            service.trait_disabled = service.disabled
            service.disabled_reason = disabled_reason
            service.capacity = capacity
            self.computes[host] = service
            return service.uuid

    def add_server(self, name: str, host: str, vm_state: str,
                   task_state: str | None, project_id: str, user_id: str,
                   metadata: dict[str, str] | None,
                   locked_by: str | None,
                   locked_reason: str | None,
                   extra_specs: dict[str, str] | None = None,
                   image_id: str | None = IMAGE_ID,
                   disks: dict[str, Any] | None = None) -> str:
        """``disks``: its volumes, ephemeral_gb and swap_mb, if any."""
        if vm_state not in POWER_FOR_VM_STATE:
            raise ValueError(f"unsupported vm_state {vm_state!r}")
        if locked_by not in (None, "owner", "admin"):
            raise ValueError(f"bad locked_by {locked_by!r}")
        with self.lock:
            if host not in self.computes:
                raise ValueError(f"unknown compute host {host}")
            now = utcnow()
            server = Server(
                str(uuid.uuid4()), name, host, project_id, user_id,
                vm_state, task_state, POWER_FOR_VM_STATE[vm_state],
                dict(metadata or {}), locked_by,
                locked_reason if locked_by else None, self.next_id(),
                now, now, node=node_name(host),
                extra_specs=dict(extra_specs or {}), image_id=image_id,
                image_properties=dict(self.images.get(image_id) or {}),
                **(disks or {}))
            self.servers[server.uuid] = server
            return server.uuid

    def add_aggregate(self, name: str, hosts: list[str],
                      availability_zone: str | None,
                      metadata: dict[str, str]) -> int:
        with self.lock:
            for host in hosts:
                if host not in self.computes:
                    raise ValueError(f"unknown compute host {host}")
            ident = self.next_id()
            self.aggregates[ident] = Aggregate(
                ident, str(uuid.uuid4()), name, availability_zone,
                list(hosts), utcnow(), metadata=dict(metadata))
            return ident

    # -- lookups and small updates --------------------------------------
    def all_services(self) -> list[Service]:
        return self.other_services + list(self.computes.values())

    def service_by_id(self, ident: str) -> Service | None:
        for service in self.all_services():
            if ident in (service.uuid, str(service.id)):
                return service
        return None

    def zone_of(self, host: str) -> str:
        for aggregate in self.aggregates.values():
            if host in aggregate.hosts and aggregate.availability_zone:
                return aggregate.availability_zone
        return "nova"

    def touch(self, server: Server) -> None:
        server.updated_at = utcnow()

    def set_migration_status(self, migration: Migration,
                             status: str) -> None:
        migration.status = status
        migration.updated_at = utcnow()

    def record_lock_event(self, server: Server, event: str, by: str,
                          reason: str | None) -> None:
        self.lock_events.append({"time": time.time(), "uuid": server.uuid,
                                 "event": event, "by": by,
                                 "reason": reason})

    def take_injection(self, method: str, path: str,
                       action: str | None) -> Injection | None:
        with self.lock:
            for rule in self.injections:
                if rule.matches(method, path, action):
                    rule.remaining -= 1
                    return rule
        return None
