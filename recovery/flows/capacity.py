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
from recovery.results import StepState

LOG = logging.getLogger(__name__)

STEP = "capacity-check"


@dataclasses.dataclass(frozen=True)
class Forecast:
    # Instance uuid -> the host it is predicted to go to; None: no room.
    destinations: dict[str, str | None]
    summary: str


def forecast(env: Env, failed_host: str,
             selected: Sequence[tuple[Server, InstanceResult]],
             placement: Placement) -> Forecast | None:
    """Predict where ``selected`` (in recovery order) go; mark those with
    no room, and report it as the ``capacity-check`` step. None when
    Nova or Placement cannot say (the run goes on)."""
    try:
        room = env.nova.free_room()
        services = env.nova.list_services()
    except exception.RecoveryError as exc:
        LOG.warning("Capacity not checked before evacuating %s's "
                    "instances (%s); Nova's scheduler decides",
                    failed_host, exc)
        return None
    destinations: dict[str, str | None] = {
        server.id: None for server, _ in selected}
    for method in placement.methods:
        pack = method.name != AUTO
        hosts = (_auto_hosts(services, failed_host) if not pack
                 else method.destinations())
        free = {host: found for host in hosts
                if (found := _room_of(host, room)) is not None}
        for server, _ in selected:
            if destinations[server.id] is None and server.need is not None:
                destinations[server.id] = _take(free, server.need, pack)
    short = [(server, result) for server, result in selected
             if destinations[server.id] is None and server.need is not None]
    largest = max(room.values(), key=lambda r: r.ram_mb, default=None)
    for server, result in short:
        result.capacity_warning = (
            f"predicted no room: needs {server.need}; the most any host "
            f"has free is {largest or 'nothing'}")
    fit = len(selected) - len(short)
    summary = f"{fit} of {len(selected)} instance(s) fit"
    if short:
        summary += ("; no room predicted for, in recovery order: "
                    + ", ".join(s.name or s.id for s, _ in short))
        LOG.warning("Capacity of the hosts left for %s: %s; going on in "
                    "recovery order, Nova's scheduler decides",
                    failed_host, summary)
    env.recorder.step_changed(STEP, StepState.SUCCESS, summary,
                              news=News(EventKind.CAPACITY))
    return Forecast(destinations, summary)


def _auto_hosts(services: list[ComputeService],
                failed_host: str) -> list[str]:
    """The hosts the scheduler may choose: enabled and up, in the failed
    host's availability zone."""
    zone = next((s.zone for s in services if s.host == failed_host), None)
    return [s.host for s in services
            if s.binary == "nova-compute" and s.host != failed_host
            and s.status == "enabled" and s.state == "up"
            and not s.forced_down and (zone is None or s.zone == zone)]


def _room_of(host: str, room: dict[str, Need]) -> Need | None:
    """A compute host's room: its resource provider is named after its
    hypervisor, usually the host's name or its FQDN."""
    if host in room:
        return room[host]
    named = [name for name in room
             if hostnames.short(name) == hostnames.short(host)]
    return room[named[0]] if len(named) == 1 else None


def _take(free: dict[str, Need], need: Need, pack: bool) -> str | None:
    fitting = [host for host, left in free.items() if need.fits(left)]
    if not fitting:
        return None
    host = fitting[0] if pack else max(
        fitting, key=lambda h: (free[h].ram_mb, free[h].vcpus))
    free[host] = free[host] - need
    return host
