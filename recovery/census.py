"""Which compute hosts Nova still hears from, from one service listing.

Nova's ``state`` says ``down`` for a forced-down service whatever its
heartbeats, so a forced-down host is judged by its last heartbeat
(``updated_at``, which keeps moving while the service runs). Its age is
measured against the newest heartbeat of any Nova service, Nova's own
notion of now, so the clocks of recovery and Nova need not agree.

It sits beside the Nova facade: the engine's safety gates and the flows
both read it, and neither imports the other.
"""

import collections
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
        if not (service.is_down or service.forced_down):
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


class HeartbeatAges:
    """How old each nova-compute's last heartbeat is, on this engine's
    monotonic clock, whatever Nova's clock says.

    Each heartbeat first seen in a census gives a sample: the time the
    census came back minus the heartbeat's stamp. The heartbeat was
    written before it was seen, so every sample is the clocks' offset
    plus a delay that is never negative; the smallest recent one is the
    closest to the offset. A heartbeat's age is then now, minus that
    offset, minus its stamp: it is never older than it really is (only
    Nova's second-rounded stamps can add up to a second, which
    ``heartbeat_margin`` covers), so a heartbeat is never judged stale
    early because the clocks disagree.
    """

    # Samples older than this are forgotten (clocks drift).
    KEEP = 600.0

    def __init__(self) -> None:
        self._stamps: dict[str, float] = {}
        self._samples: collections.deque[tuple[float, float]] = (
            collections.deque())

    def observe(self, census: Census, seen: float) -> None:
        """Take the heartbeats of ``census``, which came back at
        monotonic time ``seen``."""
        for service in census.computes:
            if service.updated_at is None:
                continue
            stamp = service.updated_at.timestamp()
            if self._stamps.get(service.host) != stamp:
                self._stamps[service.host] = stamp
                self._sample(seen, seen - stamp)
        while self._samples and self._samples[0][0] < seen - self.KEEP:
            self._samples.popleft()
        for host in set(self._stamps) - {s.host for s in census.computes}:
            del self._stamps[host]

    def _sample(self, seen: float, sample: float) -> None:
        """Keep the samples that may yet be the smallest of the window:
        increasing, so the smallest is the first."""
        while self._samples and self._samples[-1][1] >= sample:
            self._samples.pop()
        self._samples.append((seen, sample))

    def age(self, service: ComputeService, now: float) -> float | None:
        """Seconds since ``service``'s last heartbeat, at monotonic
        ``now``; None if it never reported."""
        if service.updated_at is None or not self._samples:
            return None
        offset = self._samples[0][1]
        return max(0.0, now - offset - service.updated_at.timestamp())
