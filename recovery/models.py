"""What the flows know of Nova's resources: plain, typed snapshots."""

import dataclasses
import datetime
from typing import Any


def parse_time(text: str | None) -> datetime.datetime | None:
    """A Nova timestamp (naive UTC, ISO 8601) as an aware datetime."""
    if not text:
        return None
    value = datetime.datetime.fromisoformat(text)
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    return value


@dataclasses.dataclass(frozen=True)
class ComputeService:
    id: str
    host: str
    state: str          # "up" / "down", from heartbeats (and forced_down)
    status: str         # "enabled" / "disabled"
    forced_down: bool
    disabled_reason: str | None
    binary: str = "nova-compute"
    # The last heartbeat; it keeps moving while forced down.
    updated_at: datetime.datetime | None = None
    zone: str | None = None     # its availability zone

    @property
    def is_down(self) -> bool:
        """Nova reports it down: no heartbeat within its
        service_down_time, or forced down. Nova's only other state is
        "up"."""
        return self.state == "down"

    @property
    def is_disabled(self) -> bool:
        """Out of scheduling, for whatever reason. Nova's only other
        status is "enabled"."""
        return self.status == "disabled"

    @classmethod
    def from_nova(cls, data: dict[str, Any]) -> "ComputeService":
        return cls(id=data["id"], host=data["host"], state=data["state"],
                   status=data["status"],
                   forced_down=bool(data.get("forced_down")),
                   disabled_reason=data.get("disabled_reason"),
                   binary=data.get("binary", "nova-compute"),
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
    vm_state: str
    task_state: str | None
    status: str
    locked: bool
    locked_reason: str | None
    metadata: dict[str, str]
    # Why the last action failed (shown while vm_state is error).
    fault: str | None = None
    # What its flavor takes of a host, as Placement counts it.
    need: "Need | None" = None

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
                   need=Need.of(data))


@dataclasses.dataclass(frozen=True)
class Migration:
    id: int
    uuid: str
    instance_uuid: str
    status: str
    source_compute: str
    dest_compute: str | None
    # Nova's stamps: accepted, and last changed (for a done one, when it
    # ended).
    created_at: datetime.datetime | None = None
    updated_at: datetime.datetime | None = None

    FAILED = frozenset({"error", "failed"})

    @property
    def failed(self) -> bool:
        return self.status in self.FAILED

    @classmethod
    def from_nova(cls, data: dict[str, Any]) -> "Migration":
        return cls(id=int(data["id"]), uuid=data["uuid"],
                   instance_uuid=data["instance_uuid"],
                   status=data["status"],
                   source_compute=data["source_compute"],
                   dest_compute=data.get("dest_compute"),
                   created_at=parse_time(data.get("created_at")),
                   updated_at=parse_time(data.get("updated_at")))

    @property
    def duration(self) -> float | None:
        """Seconds from accepted to done, by Nova's clock; None until it
        is done."""
        if (self.status != "done" or self.created_at is None
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
