"""What the flows know of Nova's resources: plain, typed snapshots.

Nova's states (vm_state, task_state, a service's state and status, a
migration's status) are parsed here, once, into the enums below, and the
flows decide on those. Each is an ``enum.StrEnum``: a member is the very
string Nova sent, so what is stored, printed, logged or compared with
Nova's text stays byte for byte what it was.
"""

import dataclasses
import datetime
import enum
from typing import Any


def parse_time(text: str | None) -> datetime.datetime | None:
    """A Nova timestamp (naive UTC, ISO 8601) as an aware datetime."""
    if not text:
        return None
    value = datetime.datetime.fromisoformat(text)
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    return value


class NovaState(enum.StrEnum):
    """A state Nova names, open to the ones this release does not know.

    Nova gains states (a newer Nova, a task of an extension) and recovery
    must still hold, show and skip such an instance by the name Nova gave
    it, never fail to read it. So parsing an unknown value gives a value
    of the same enum, not a member: its name and value are Nova's text,
    ``known`` is False, and it equals no member. Every field then has one
    type, and a decision on it is an ``is``/``in`` against members, with
    an unknown state falling through to the "not known" branch.
    """

    @classmethod
    def _missing_(cls, value: object) -> "NovaState | None":
        if not isinstance(value, str):
            return None
        unknown = str.__new__(cls, value)
        unknown._name_ = value
        unknown._value_ = value
        return unknown

    @property
    def known(self) -> bool:
        """Whether this release knows the state (it is a member)."""
        return type(self).__members__.get(self._name_) is self

    def __repr__(self) -> str:
        # Messages say ``vm_state 'x'``, as they did with Nova's string.
        return repr(self._value_)


class VmState(NovaState):
    """Nova's vm_state (nova.compute.vm_states)."""

    ACTIVE = "active"
    BUILDING = "building"
    PAUSED = "paused"
    SUSPENDED = "suspended"
    STOPPED = "stopped"
    RESCUED = "rescued"
    RESIZED = "resized"
    SOFT_DELETED = "soft-delete"
    DELETED = "deleted"
    ERROR = "error"
    SHELVED = "shelved"
    SHELVED_OFFLOADED = "shelved_offloaded"


class TaskState(NovaState):
    """The task_states recovery decides on (nova.compute.task_states has
    many more, each held as an unknown one)."""

    REBUILDING = "rebuilding"
    REBUILD_BLOCK_DEVICE_MAPPING = "rebuild_block_device_mapping"
    REBUILD_SPAWNING = "rebuild_spawning"
    POWERING_OFF = "powering-off"
    POWERING_ON = "powering-on"
    MIGRATING = "migrating"     # a live migration's, from the request on

    @property
    def rebuilding(self) -> bool:
        """A rebuild's, which an evacuation is."""
        return self in _REBUILD


_REBUILD = frozenset({TaskState.REBUILDING,
                      TaskState.REBUILD_BLOCK_DEVICE_MAPPING,
                      TaskState.REBUILD_SPAWNING})


class ServiceState(NovaState):
    """A service's state: from heartbeats (and forced_down)."""

    UP = "up"
    DOWN = "down"


class ServiceStatus(NovaState):
    """A service's status: in scheduling or out of it."""

    ENABLED = "enabled"
    DISABLED = "disabled"


class MigrationStatus(NovaState):
    """The statuses of a migration (an evacuation's, a live one's) that
    recovery reads (Nova's others are held as unknown ones: still in
    flight)."""

    ACCEPTED = "accepted"
    PRE_MIGRATING = "pre-migrating"
    MIGRATING = "migrating"
    DONE = "done"
    COMPLETED = "completed"
    FAILED = "failed"
    ERROR = "error"
    CANCELLED = "cancelled"

    @property
    def failed(self) -> bool:
        return self in (MigrationStatus.ERROR, MigrationStatus.FAILED)

    @property
    def finished(self) -> bool:
        """Nova does nothing more on the target after it."""
        return self.failed or self in (MigrationStatus.DONE,
                                       MigrationStatus.COMPLETED,
                                       MigrationStatus.CANCELLED)


COMPUTE_BINARY = "nova-compute"


def _optional(kind: type[NovaState], value: str | None) -> Any:
    return None if value is None else kind(value)


@dataclasses.dataclass(frozen=True)
class ComputeService:
    id: str
    host: str
    state: ServiceState    # from heartbeats (and forced_down)
    status: ServiceStatus
    forced_down: bool
    disabled_reason: str | None
    binary: str = COMPUTE_BINARY
    # The last heartbeat; it keeps moving while forced down.
    updated_at: datetime.datetime | None = None
    zone: str | None = None     # its availability zone

    def __post_init__(self) -> None:
        # Parsed once, whoever builds it (the facade, a test's fake).
        object.__setattr__(self, "state", ServiceState(self.state))
        object.__setattr__(self, "status", ServiceStatus(self.status))

    @property
    def is_down(self) -> bool:
        """Nova reports it down: no heartbeat within its
        service_down_time, or forced down. Nova's only other state is
        "up"."""
        return self.state is ServiceState.DOWN

    @property
    def is_up(self) -> bool:
        return self.state is ServiceState.UP

    @property
    def is_disabled(self) -> bool:
        """Out of scheduling, for whatever reason. Nova's only other
        status is "enabled"."""
        return self.status is ServiceStatus.DISABLED

    @property
    def is_enabled(self) -> bool:
        return self.status is ServiceStatus.ENABLED

    @property
    def is_compute(self) -> bool:
        return self.binary == COMPUTE_BINARY

    @property
    def running(self) -> bool:
        """A compute Nova reports up and nobody forced down."""
        return self.is_compute and self.is_up and not self.forced_down

    @property
    def schedulable(self) -> bool:
        """A compute the scheduler may choose: running and enabled."""
        return self.running and self.is_enabled

    @classmethod
    def from_nova(cls, data: dict[str, Any]) -> "ComputeService":
        return cls(id=data["id"], host=data["host"], state=data["state"],
                   status=data["status"],
                   forced_down=bool(data.get("forced_down")),
                   disabled_reason=data.get("disabled_reason"),
                   binary=data.get("binary", COMPUTE_BINARY),
                   updated_at=parse_time(data.get("updated_at")),
                   zone=data.get("zone"))


@dataclasses.dataclass(frozen=True)
class Need:
    """Resources in Placement's classes: what an instance takes of a
    host, or what a host has free."""

    vcpus: int
    ram_mb: int
    disk_gb: int

    @classmethod
    def of(cls, server: dict[str, Any]) -> "Need | None":
        """A server's, from the flavor Nova embeds (microversion 2.47+);
        a server booted from a volume takes no root disk of the host."""
        flavor = server.get("flavor")
        if not isinstance(flavor, dict) or "vcpus" not in flavor:
            return None
        root = flavor.get("disk", 0) if server.get("image") else 0
        swap_gb = -(-int(flavor.get("swap") or 0) // 1024)
        return cls(int(flavor["vcpus"]), int(flavor.get("ram", 0)),
                   int(root) + int(flavor.get("ephemeral", 0)) + swap_gb)

    def fits(self, room: "Need") -> bool:
        return (self.vcpus <= room.vcpus and self.ram_mb <= room.ram_mb
                and self.disk_gb <= room.disk_gb)

    def __sub__(self, other: "Need") -> "Need":
        return Need(self.vcpus - other.vcpus, self.ram_mb - other.ram_mb,
                    self.disk_gb - other.disk_gb)

    def __str__(self) -> str:
        return f"{self.vcpus} VCPU, {self.ram_mb} MB, {self.disk_gb} GB"


@dataclasses.dataclass(frozen=True)
class Server:
    id: str
    name: str
    host: str | None
    vm_state: VmState
    task_state: TaskState | None
    status: str
    locked: bool
    locked_reason: str | None
    metadata: dict[str, str]
    # Why the last action failed (shown while vm_state is error).
    fault: str | None = None
    # What its flavor takes of a host, as Placement counts it.
    need: "Need | None" = None
    # Its owner: the project and user Nova names (its owner's events).
    project_id: str | None = None
    user_id: str | None = None
    # Its disks, as Nova tells them: the image of an image-backed root
    # disk (None: booted from a volume), the volumes attached, and the
    # flavor's ephemeral and swap disks (which live where the host keeps
    # ephemeral disks). What a storage fence covers is judged on these.
    image_id: str | None = None
    volume_ids: tuple[str, ...] = ()
    ephemeral_gb: int = 0
    swap_mb: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "vm_state", VmState(self.vm_state))
        object.__setattr__(self, "task_state",
                           _optional(TaskState, self.task_state))

    @property
    def idle(self) -> bool:
        """No task of Nova's runs on it."""
        return self.task_state is None

    @property
    def rebuilding(self) -> bool:
        """A rebuild, which an evacuation is, runs on it."""
        return self.task_state is not None and self.task_state.rebuilding

    @classmethod
    def from_nova(cls, data: dict[str, Any]) -> "Server":
        return cls(id=data["id"], name=data.get("name", ""),
                   host=data.get("OS-EXT-SRV-ATTR:host"),
                   vm_state=data.get("OS-EXT-STS:vm_state") or "",
                   task_state=data.get("OS-EXT-STS:task_state"),
                   status=data.get("status", ""),
                   locked=bool(data.get("locked")),
                   locked_reason=data.get("locked_reason"),
                   metadata=dict(data.get("metadata") or {}),
                   fault=(data.get("fault") or {}).get("message"),
                   need=Need.of(data), project_id=data.get("tenant_id"),
                   user_id=data.get("user_id"),
                   image_id=(data.get("image") or {}).get("id") or None,
                   volume_ids=tuple(
                       volume["id"] for volume in
                       data.get("os-extended-volumes:volumes_attached")
                       or ()),
                   ephemeral_gb=int(_flavor(data).get("ephemeral") or 0),
                   swap_mb=int(_flavor(data).get("swap") or 0))


def _flavor(server: dict[str, Any]) -> dict[str, Any]:
    """The flavor Nova embeds in a server (microversion 2.47+), or {}."""
    flavor = server.get("flavor")
    return flavor if isinstance(flavor, dict) else {}


@dataclasses.dataclass(frozen=True)
class Migration:
    id: int
    uuid: str
    instance_uuid: str
    status: MigrationStatus
    source_compute: str
    dest_compute: str | None
    # Nova's stamps: accepted, and last changed (for a done one, when it
    # ended).
    created_at: datetime.datetime | None = None
    updated_at: datetime.datetime | None = None
    # Nova's migration_type: evacuation, live-migration, migration, resize.
    type: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", MigrationStatus(self.status))

    @property
    def failed(self) -> bool:
        return self.status.failed

    @property
    def finished(self) -> bool:
        return self.status.finished

    @property
    def done(self) -> bool:
        return self.status is MigrationStatus.DONE

    @classmethod
    def from_nova(cls, data: dict[str, Any]) -> "Migration":
        return cls(id=int(data["id"]), uuid=data["uuid"],
                   instance_uuid=data["instance_uuid"],
                   status=data["status"],
                   source_compute=data["source_compute"],
                   dest_compute=data.get("dest_compute"),
                   type=data.get("migration_type", ""),
                   created_at=parse_time(data.get("created_at")),
                   updated_at=parse_time(data.get("updated_at")))

    @property
    def duration(self) -> float | None:
        """Seconds from accepted to done, by Nova's clock; None until it
        is done."""
        if (not self.done or self.created_at is None
                or self.updated_at is None):
            return None
        return (self.updated_at - self.created_at).total_seconds()


@dataclasses.dataclass(frozen=True)
class Aggregate:
    id: int
    name: str
    hosts: tuple[str, ...] = ()
    metadata: tuple[tuple[str, str], ...] = ()

    def property(self, key: str) -> str | None:
        """The value of metadata ``key``, or None."""
        return dict(self.metadata).get(key)
