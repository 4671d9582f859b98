"""Is there room for a failed host's instances? A prediction made before
they are evacuated, from Placement's view of the other hosts; never a
gate: Nova's scheduler still decides each destination.

Each instance, in recovery order (the most important first), takes room
on a host its recovery method would use: for ``auto``, the enabled, up
compute hosts of the failed host's availability zone, the one with the
most free memory first (as Nova's default weighers spread); for
``reserved_host``, the reserved hosts in the order they are taken, each
filled before the next. An instance the first method has no room for is
placed by the next one of its chain. What does not fit anywhere gets a
``capacity_warning``; the run logs one warning line and goes on in
order, so the most important instances take the room first.
"""

import dataclasses
import logging
from collections.abc import Iterable
from collections.abc import Sequence

from recovery import exception
from recovery import hostnames
from recovery.events import EventKind
from recovery.events import News
from recovery.flows.context import Env
from recovery.flows.placement import AUTO
from recovery.flows.placement import Placement
from recovery.models import ComputeService
from recovery.models import Need
from recovery.models import Server
from recovery.results import InstanceResult
from recovery.results import StepName
from recovery.results import StepState

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Forecast:
    # Instance uuid -> the host it is predicted to go to; None: no room.
    destinations: dict[str, str | None]
    summary: str
    # The instances predicted to find no room, in recovery order (those
    # whose flavor is unknown are not predicted either way).
    short: tuple[str, ...] = ()


class Room:
    """What each compute host has free, by Nova's host name, as one
    prediction uses it up: the run's forecast, the failures tolerated and
    the simulation take from it the same way (``predict``)."""

    def __init__(self, free: dict[str, Need]):
        self.free = free

    @classmethod
    def of(cls, services: Sequence[ComputeService],
           room: dict[str, Need]) -> "Room":
        """Placement's ``room`` (by resource provider) for each compute
        host of ``services`` that has a provider."""
        free = {}
        for service in services:
            if service.is_compute:
                found = _room_of(service.host, room)
                if found is not None:
                    free[service.host] = found
        return cls(free)

    def without(self, hosts: Iterable[str]) -> "Room":
        """The room left once ``hosts`` have failed."""
        gone = set(hosts)
        return Room({h: n for h, n in self.free.items() if h not in gone})

    def largest(self) -> Need | None:
        return max(self.free.values(), key=lambda r: r.ram_mb, default=None)

    def take(self, hosts: Sequence[str], need: Need,
             pack: bool) -> str | None:
        """Take ``need`` on one of ``hosts``: the first with room
        (``pack``, a reserved host filled before the next) or the one
        with the most memory free (the scheduler's spread); None when
        none has room."""
        free = self.free
        best, most = None, None
        for host in hosts:
            left = free.get(host)
            if left is None or not need.fits(left):
                continue
            if pack:
                best = host
                break
            if most is None or (left.ram_mb, left.vcpus) > most:
                best, most = host, (left.ram_mb, left.vcpus)
        if best is not None:
            free[best] = free[best] - need
        return best


def forecast(env: Env, failed_host: str,
             selected: Sequence[tuple[Server, InstanceResult]],
             placement: Placement,
             services: Sequence[ComputeService]) -> Forecast | None:
    """Predict where ``selected`` (in recovery order) go; mark those with
    no room, and report it as the ``capacity-check`` step. None when
    Placement cannot say (the run goes on).

    ``services``: Nova's, as the census that checked the host down saw
    them (which hosts are up and enabled): moments before in the first
    round, longer in a later one. A prediction, not a placement, needs no
    newer view, and it saves asking again."""
    try:
        room = env.nova.free_room()
    except exception.RecoveryError as exc:
        LOG.warning("Capacity not checked before evacuating %s's "
                    "instances (%s); Nova's scheduler decides",
                    failed_host, exc)
        return None
    predicted = predict(failed_host, selected, placement, services,
                        Room.of(services, room))
    if predicted.short:
        LOG.warning("Capacity of the hosts left for %s: %s; going on in "
                    "recovery order, Nova's scheduler decides",
                    failed_host, predicted.summary)
    env.recorder.step_changed(StepName.CAPACITY_CHECK, StepState.SUCCESS,
                              predicted.summary,
                              news=News(EventKind.CAPACITY))
    return predicted


def predict(failed_host: str,
            selected: Sequence[tuple[Server, InstanceResult]],
            placement: Placement, services: Sequence[ComputeService],
            room: Room) -> Forecast:
    """Where ``selected`` (in recovery order) go, taken from ``room``;
    each one with no room gets a ``capacity_warning``. Nothing is asked
    of Nova: the caller read ``room`` and ``services``."""
    destinations: dict[str, str | None] = {
        server.id: None for server, _ in selected}
    largest = room.largest()
    for method in placement.methods:
        pack = method.name != AUTO
        hosts = (auto_hosts(services, failed_host) if not pack
                 else method.destinations())
        for server, _ in selected:
            if destinations[server.id] is None and server.need is not None:
                destinations[server.id] = room.take(hosts, server.need,
                                                    pack)
    short = [(server, result) for server, result in selected
             if destinations[server.id] is None and server.need is not None]
    for server, result in short:
        result.capacity_warning = (
            f"predicted no room: needs {server.need}; the most any host "
            f"has free is {largest or 'nothing'}")
    fit = len(selected) - len(short)
    summary = f"{fit} of {len(selected)} instance(s) fit"
    if short:
        summary += ("; no room predicted for, in recovery order: "
                    + ", ".join(s.name or s.id for s, _ in short))
    return Forecast(destinations, summary, tuple(s.id for s, _ in short))


def auto_hosts(services: Sequence[ComputeService],
               failed_host: str) -> list[str]:
    """The hosts the scheduler may choose: enabled and up, in the failed
    host's availability zone."""
    zone = next((s.zone for s in services if s.host == failed_host), None)
    return [s.host for s in services
            if s.schedulable and s.host != failed_host
            and (zone is None or s.zone == zone)]


def _room_of(host: str, room: dict[str, Need]) -> Need | None:
    """A compute host's room: its resource provider is named after its
    hypervisor, usually the host's name or its FQDN."""
    if host in room:
        return room[host]
    named = [name for name in room
             if hostnames.short(name) == hostnames.short(host)]
    return room[named[0]] if len(named) == 1 else None
