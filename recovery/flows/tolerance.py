"""Before a failure: how many host failures the cloud can absorb, and
what a given failure would do (a game day, with no side effects).

Both ask the run's own plan (``plan.plan_failure``): the same
selection (skipped instances and why, instances Nova cannot evacuate),
priorities and phases, recovery methods, reserved hosts and
availability zones, and the same capacity forecast
(``capacity.predict``) from Placement's free room. There is no second
placement model: what the run would predict is what these say.

From one look at the cloud (``Cloud``: Nova's services, Placement's
room, every instance, read by the caller); nothing here asks Nova.
"""

import dataclasses
from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Sequence

from recovery import concurrency
from recovery.fencing import HostFence
from recovery.flows.capacity import Room
from recovery.flows.context import Env
from recovery.flows.placement import RESERVED_HOST
from recovery.flows.placement import Placement
from recovery.flows.plan import Plan
from recovery.flows.plan import plan_failure
from recovery.flows.selection import skip_reason
from recovery.models import ComputeService
from recovery.models import Need
from recovery.models import Server

NOTHING = Need(0, 0, 0)

# The recovery methods of a failed host: its segment's, as a run takes
# them (``placement.for_host``).
PlacementOf = Callable[[str], Placement]
# A host's fencing, for what its storage fence would cover (None: none).
FenceOf = Callable[[str], HostFence | None]


def _unfenced(host: str) -> HostFence | None:
    return None


@dataclasses.dataclass(frozen=True)
class Cloud:
    """One look at the cloud: Nova's services, Placement's free room by
    resource provider, and every instance by its host."""

    services: tuple[ComputeService, ...]
    room: dict[str, Need]
    servers: dict[str, list[Server]]

    @classmethod
    def of(cls, services: Sequence[ComputeService], room: dict[str, Need],
           servers: Sequence[Server]) -> "Cloud":
        by_host: dict[str, list[Server]] = {}
        for server in servers:
            if server.host:
                by_host.setdefault(server.host, []).append(server)
        return cls(tuple(services), room, by_host)

    def is_up(self, host: str) -> bool:
        return any(s.host == host and s.running for s in self.services)


@dataclasses.dataclass(frozen=True)
class Group:
    """Hosts whose failures are counted together: a failover segment's
    (``name``), or the detector's watched hosts. ``hosts``: those that
    may fail, reserved hosts left out (they hold no instances)."""

    name: str
    hosts: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class HostLoad:
    """A host's HA load: what its instances that recovery would evacuate
    take of a host, and how many they are."""

    host: str
    load: Need
    instances: int


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """How many of ``group``'s host failures the rest absorb, the hosts
    failing in the worst order (``order``: the most HA load first).
    ``free``: the room of the hosts its instances may go to (the
    scheduler's, its reserved hosts), before any fails. ``breaks``: what
    the next failure would leave without room, or None when every host
    of the group may fail."""

    group: Group
    tolerated: int
    order: tuple[HostLoad, ...]
    free: Need
    breaks: str | None


def _plus(a: Need, b: Need) -> Need:
    return Need(a.vcpus + b.vcpus, a.ram_mb + b.ram_mb,
                a.disk_gb + b.disk_gb)


def ha_load(env: Env, host: str, servers: Sequence[Server]) -> HostLoad:
    """What recovery would evacuate from ``host``: its instances that are
    not skipped (the run's selection), their flavors summed."""
    load, count = NOTHING, 0
    for server in servers:
        if server.need is not None and skip_reason(
                server, env.settings) is None:
            load, count = _plus(load, server.need), count + 1
    return HostLoad(host, load, count)


def free_of(room: Room, hosts: Collection[str]) -> Need:
    """The room summed over ``hosts``."""
    total = NOTHING
    for host, need in room.free.items():
        if host in hosts:
            total = _plus(total, need)
    return total


def _targets(cloud: Cloud, group: Group,
             placement_of: PlacementOf) -> set[str]:
    """The hosts the group's instances may go to: the scheduler's (up
    and enabled, in the group's availability zones) and the reserved
    hosts of its recovery methods."""
    zone = {s.host: s.zone for s in cloud.services}
    zones = {zone.get(host) for host in group.hosts}
    found = {host for member in group.hosts[:1]
             for method in placement_of(member).methods
             for host in method.destinations()}
    found.update(s.host for s in cloud.services
                 if s.schedulable and (None in zones or s.zone in zones))
    return found


def failures_tolerated(env: Env, cloud: Cloud, group: Group,
                       placement_of: PlacementOf) -> Tolerance:
    """How many of ``group``'s up hosts may fail before an instance of
    theirs finds no room, in the worst case: the hosts with the most HA
    load (memory, then VCPU, then disk) fail first, one after another;
    what a failed host's recovery moved to a host that fails next moves
    again. Each failure is planned as its run would plan it, taking from
    the room the earlier ones left."""
    loads = sorted((ha_load(env, host, cloud.servers.get(host, []))
                    for host in group.hosts if cloud.is_up(host)),
                   key=lambda h: (-h.load.ram_mb, -h.load.vcpus,
                                  -h.load.disk_gb, h.host))
    room = Room.of(cloud.services, cloud.room)
    free = free_of(room, _targets(cloud, group, placement_of))
    moved: dict[str, list[Server]] = {}
    for count, failing in enumerate(loads):
        # A plan is CPU alone: under eventlet, let the engine's other
        # tasks (its loop, the lease renewals) run between two.
        concurrency.cooperate()
        room.free.pop(failing.host, None)
        servers = [*cloud.servers.get(failing.host, []),
                   *moved.pop(failing.host, [])]
        placement = placement_of(failing.host)
        plan = plan_failure(env, failing.host, servers, cloud.services,
                            placement, room)
        _claim_reserved(room, placement, plan)
        if plan.forecast.short:
            failed = ", ".join(h.host for h in loads[:count + 1])
            names = {s.id: s.name or s.id for s in servers}
            return Tolerance(group, count, tuple(loads), free,
                             f"with {failed} failed, no room for "
                             + ", ".join(names[u]
                                         for u in plan.forecast.short))
        for server in servers:
            dest = plan.forecast.destinations.get(server.id)
            if dest is not None:
                moved.setdefault(dest, []).append(
                    dataclasses.replace(server, host=dest))
    return Tolerance(group, len(loads), tuple(loads), free, None)


def simulate(env: Env, cloud: Cloud, failed: Sequence[str],
             placement_of: PlacementOf,
             fence_of: FenceOf = _unfenced) -> list[Plan]:
    """What ``failed`` failing at once would do: each host's run, in the
    order given, planned on the room the hosts left have, each taking
    what the ones before it took; with what a storage fence of each
    would cover (``fence_of``)."""
    room = Room.of(cloud.services, cloud.room).without(failed)
    plans = []
    for host in failed:
        placement = placement_of(host)
        plans.append(plan_failure(env, host, cloud.servers.get(host, []),
                                  cloud.services, placement, room,
                                  fence_of(host)))
        _claim_reserved(room, placement, plans[-1])
    return plans


def _claim_reserved(room: Room, placement: Placement, plan: Plan) -> None:
    """A run claims each reserved host it evacuates to, and no other
    recovery takes it then, whatever room it has left: the room of the
    next failures is without it."""
    reserved = {host for method in placement.methods
                if method.name == RESERVED_HOST
                for host in method.destinations()}
    for host in set(plan.forecast.destinations.values()) & reserved:
        room.free.pop(host, None)


def if_each_failed(env: Env, cloud: Cloud, group: Group,
                   placement_of: PlacementOf,
                   fence_of: FenceOf = _unfenced) -> list[Plan]:
    """For each host of ``group``, alone: where its instances would go
    if it failed now, and what a storage fence of it would cover."""
    whole = Room.of(cloud.services, cloud.room)
    return [plan_failure(env, host, cloud.servers.get(host, []),
                         cloud.services, placement_of(host),
                         whole.without([host]), fence_of(host))
            for host in group.hosts]
