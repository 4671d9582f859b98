"""What the flows know of Nova's resources: plain, typed snapshots."""

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class ComputeService:
    id: str
    host: str
    state: str          # "up" / "down", from heartbeats (and forced_down)
    status: str         # "enabled" / "disabled"
    forced_down: bool
    disabled_reason: str | None

    @property
    def heartbeats(self) -> bool:
        """Nova still hears from this service: the host may be alive."""
        return self.state == "up" and not self.forced_down

    @classmethod
    def from_nova(cls, data: dict[str, Any]) -> "ComputeService":
        return cls(id=data["id"], host=data["host"], state=data["state"],
                   status=data["status"],
                   forced_down=bool(data.get("forced_down")),
                   disabled_reason=data.get("disabled_reason"))


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

    @classmethod
    def from_nova(cls, data: dict[str, Any]) -> "Server":
        return cls(id=data["id"], name=data.get("name", ""),
                   host=data.get("OS-EXT-SRV-ATTR:host"),
                   vm_state=data.get("OS-EXT-STS:vm_state") or "",
                   task_state=data.get("OS-EXT-STS:task_state"),
                   status=data.get("status", ""),
                   locked=bool(data.get("locked")),
                   locked_reason=data.get("locked_reason"),
                   metadata=dict(data.get("metadata") or {}))


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
