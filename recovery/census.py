"""Which compute hosts Nova still hears from, from one service listing.

Nova's ``state`` says ``down`` for a forced-down service whatever its
heartbeats, so a forced-down host is judged by its last heartbeat
(``updated_at``, which keeps moving while the service runs). Its age is
measured against the newest heartbeat of any Nova service, Nova's own
notion of now, so the clocks of recovery and Nova need not agree.

It sits beside the Nova facade: the engine's safety gates and the flows
both read it, and neither imports the other.
"""

import dataclasses
import datetime

from recovery.hostnames import unknown_host
from recovery.models import ComputeService
from recovery.nova import Nova


@dataclasses.dataclass(frozen=True)
class Census:
    services: tuple[ComputeService, ...]
    down_after: float       # Nova's service_down_time

    @classmethod
    def take(cls, nova: Nova, down_after: float) -> "Census":
        return cls(tuple(nova.list_services()), down_after)

    @property
    def nova_now(self) -> datetime.datetime | None:
        stamps = [s.updated_at for s in self.services if s.updated_at]
        return max(stamps, default=None)

    @property
    def computes(self) -> list[ComputeService]:
        return [s for s in self.services if s.binary == "nova-compute"]

    def compute(self, host: str) -> ComputeService:
        for service in self.computes:
            if service.host == host:
                return service
        raise unknown_host(host)

    def heartbeats(self, service: ComputeService) -> bool:
        """Nova still hears from ``service``: its host may be alive."""
        if service.state == "up" and not service.forced_down:
            return True
        if not service.forced_down or service.updated_at is None:
            return False
        age = self.nova_now - service.updated_at
        return age < datetime.timedelta(seconds=self.down_after)

    def describe(self, service: ComputeService) -> str:
        """Why ``heartbeats`` said what it said, for an operator."""
        if not service.forced_down:
            return f"Nova reports it {service.state}"
        if service.updated_at is None:
            return "it is forced down and has never reported"
        age = (self.nova_now - service.updated_at).total_seconds()
        return (f"it is forced down, but its last heartbeat is only "
                f"{age:.0f} s old by Nova's clock")

    def down_hosts(self) -> set[str]:
        return {s.host for s in self.computes if not self.heartbeats(s)}
