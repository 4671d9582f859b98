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

    @classmethod
    def from_nova(cls, data: dict[str, Any]) -> "ComputeService":
        return cls(id=data["id"], host=data["host"], state=data["state"],
                   status=data["status"],
                   forced_down=bool(data.get("forced_down")),
                   disabled_reason=data.get("disabled_reason"),
                   binary=data.get("binary", "nova-compute"),
                   updated_at=parse_time(data.get("updated_at")))


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
                   fault=(data.get("fault") or {}).get("message"))


@dataclasses.dataclass(frozen=True)
class Migration:
    id: int
    uuid: str
    instance_uuid: str
    status: str
    source_compute: str
    dest_compute: str | None

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
                   dest_compute=data.get("dest_compute"))


@dataclasses.dataclass(frozen=True)
class Aggregate:
    id: int
    name: str
