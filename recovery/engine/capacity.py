"""The failures tolerated, wired to Nova and the store.

One look at the cloud (``look``) costs three requests to Nova and
Placement, and one more per 1,000 instances, whatever the number of
hosts: the services, Placement's providers and their room, and every
instance (with its flavor). The segments are read from the store once
per look. The flows then plan each failure as a run would
(``recovery.flows.failures_tolerated``, ``simulate``), without asking
Nova again.

``CapacityWatch`` refreshes the figure in recovery-engine every
``[capacity] refresh_interval``: the metric of each segment, and an
event when a segment falls below ``failures_to_tolerate`` (and when it is
back). Of several engines on one database, the first live one by name
looks; the others export no figure.

'recovery simulate' plans its failures with the same look
(``recovery.engine.simulation``).
"""

import dataclasses
import datetime
import fnmatch
import logging
from collections.abc import Callable
from collections.abc import Collection
from typing import Protocol

from oslo_config import cfg

from recovery import concurrency
from recovery import exception
from recovery.db.control import EngineRecord
from recovery.db.segments import Host
from recovery.db.segments import Segment
from recovery.events import Decision
from recovery.events import Event
from recovery.events import EventKind
from recovery.fencing import HostFence
from recovery.fencing import load_fencing
from recovery.flows import Cloud
from recovery.flows import Env
from recovery.flows import EvacuationWatcher
from recovery.flows import Group
from recovery.flows import Plan
from recovery.flows import Settings
from recovery.flows import Tolerance
from recovery.flows import failures_tolerated
from recovery.flows import if_each_failed
from recovery.flows import placement_for_host
from recovery.metrics import METRICS
from recovery.nova import Nova

LOG = logging.getLogger(__name__)

# The group of the detector's watched hosts, when there are no segments.
WATCHED = "(watched hosts)"


class _Silent:
    """A plan's recorder: a look records nothing."""

    def step_changed(self, step, state, message, *, news=None,
                     instances=None) -> None:
        """Not recorded."""

    def instance_changed(self, result) -> None:
        """Not recorded."""


class SegmentSource(Protocol):
    """The failover segments and their hosts, all of them."""
    def list_segments(self) -> list[Segment]: ...
    def list_hosts(self, segment_uuid: str) -> list[Host]: ...


class EventLog(Protocol):
    """The decision log: past evacuations and capacity news."""
    def events(self, *, limit: int | None = None, host: str | None = None,
               kinds: Collection[str] | None = None) -> list[Event]: ...
    def add_event(self, decision: Decision,
                  now: datetime.datetime) -> None: ...


class CapacityStore(SegmentSource, EventLog, Protocol):
    """What the engine's refresh (``CapacityWatch``) needs."""
    def engines(self) -> list[EngineRecord]: ...


class Segments:
    """The failover segments and their hosts, read from the store once:
    the recovery methods of every host of a look (``placement.for_host``
    asks it, as it asks the store in a run), with no query per host."""

    def __init__(self, store: SegmentSource):
        self.segments: list[Segment] = store.list_segments()
        self.hosts: dict[str, list[Host]] = {
            s.uuid: store.list_hosts(s.uuid) for s in self.segments}
        self._by_name = {h.name: (h, s) for s in self.segments
                         for h in self.hosts[s.uuid]}

    def host_record(self, name: str) -> tuple[Host, Segment] | None:
        return self._by_name.get(name)

    def reserved_hosts(self, segment_uuid: str,
                       notification_uuid: str) -> list[Host]:
        """As the store answers a new recovery: the reserved hosts not on
        maintenance, by name."""
        return sorted((h for h in self.hosts.get(segment_uuid, [])
                       if h.reserved and not h.on_maintenance),
                      key=lambda h: h.name)

    def claim_reserved(self, host_uuid, notification_uuid, now) -> bool:
        raise AssertionError("a look takes no reserved host")

    def release_reserved(self, host_uuid, notification_uuid, now) -> None:
        raise AssertionError("a look takes no reserved host")


def look(nova: Nova) -> Cloud:
    """Nova's services, Placement's room and every instance, now."""
    return Cloud.of(nova.list_services(), nova.free_room(),
                    nova.list_all_servers())


def groups(conf: cfg.ConfigOpts, segments: Segments,
           cloud: Cloud) -> list[Group]:
    """Each enabled segment's hosts that may fail (not reserved); without
    segments, the compute hosts the detector watches ([detector]
    hosts)."""
    if segments.segments:
        return [Group(s.name, tuple(sorted(
                    h.name for h in segments.hosts[s.uuid]
                    if not h.reserved)))
                for s in segments.segments if s.enabled]
    patterns = conf.detector.hosts
    return [Group(WATCHED, tuple(sorted(
        s.host for s in cloud.services if s.binary == "nova-compute"
        and any(fnmatch.fnmatchcase(s.host, p) for p in patterns))))]


def plan_env(conf: cfg.ConfigOpts, nova: Nova,
             clock: concurrency.Clock) -> Env:
    """What a look plans with: the options of a run, nothing recorded
    (a plan changes nothing)."""
    return Env(nova=nova, clock=clock, settings=Settings.from_conf(conf),
               recorder=_Silent(), watcher=EvacuationWatcher(clock))


def fences(conf: cfg.ConfigOpts) -> Callable[[str], HostFence | None]:
    """Each host's fencing, for what a plan says its storage fence would
    cover; None for a host whose fencing is not set up right (its runs
    say why)."""
    fencing = load_fencing(conf)

    def fence_of(host: str) -> HostFence | None:
        try:
            return fencing.for_host(host)
        except exception.ConfigError:
            return None

    return fence_of


@dataclasses.dataclass(frozen=True)
class View:
    """'recovery capacity': each group's figure, and each host's plan
    if it failed alone."""

    target: int
    groups: list[tuple[Tolerance, list[Plan]]]


def capacity_view(conf: cfg.ConfigOpts, store: SegmentSource, nova: Nova,
                  clock: concurrency.Clock) -> View:
    env, cloud = plan_env(conf, nova, clock), look(nova)
    segments = Segments(store)
    fence_of = fences(conf)
    found = []
    for group in groups(conf, segments, cloud):
        def methods(host):
            return placement_for_host(env, segments, host, "")
        found.append((failures_tolerated(env, cloud, group, methods),
                      if_each_failed(env, cloud, group, methods, fence_of)))
    return View(conf.capacity.failures_to_tolerate, found)


def first_live_engine(engines: list[EngineRecord], name: str,
                      live_within: float) -> bool:
    """Whether ``name`` is the first by name of the ``engines`` seen
    within ``live_within`` seconds (itself counted live): the one engine
    of a shared store that does a cloud-wide look."""
    live = {e.name for e in engines if e.silent_for <= live_within}
    return name == min(live | {name})


class CapacityWatch:
    """recovery-engine's refresh of the failures tolerated."""

    def __init__(self, conf: cfg.ConfigOpts, store: CapacityStore,
                 nova: Nova,
                 clock: concurrency.Clock, name: str,
                 busy: Callable[[], int] = lambda: 0):
        """``busy``: the recoveries this engine runs; while there are any,
        a refresh waits for the next interval, leaving Nova's request
        budget to them."""
        self.conf, self.store, self.nova, self.clock = conf, store, nova, clock
        self.name = name
        self._busy = busy
        # Whether each group was short at the last look (its event said);
        # its keys are the groups the metric has a series of. A group
        # this engine has not looked at yet goes on from the last event
        # about it: another engine's, or this one's before a restart.
        self._short: dict[str, bool] = {}

    def run(self, stopping: concurrency.Event) -> None:
        """Refresh every ``refresh_interval`` until ``stopping``; the
        first look one interval after the start, when the engine's own
        start has settled."""
        while True:
            interval = self.conf.capacity.refresh_interval
            # Switched off: look at the option again in a minute.
            if self.clock.wait(stopping, interval or 60.0):
                return
            if self.conf.capacity.refresh_interval <= 0 or self._busy():
                continue
            try:
                if self.first_engine():
                    self.refresh()
                else:
                    self.forget()
            except exception.RecoveryError as exc:
                LOG.warning("Failures tolerated not refreshed: %s", exc)
            except Exception:
                LOG.exception("Failures tolerated not refreshed")

    def first_engine(self) -> bool:
        """Whether this engine is the first by name of the live ones
        (seen within ``[engine] lease_seconds``): the one that looks, so
        that several engines ask Nova once and say each change once. When
        it stops or falls silent, the next one takes over."""
        return first_live_engine(self.store.engines(), self.name,
                                 self.conf.engine.lease_seconds)

    def forget(self) -> None:
        """Another engine looks: this one exports no figure of its own,
        which would go stale."""
        for name in self._short:
            METRICS.failures_tolerated.remove(name)
        self._short.clear()

    def refresh(self) -> list[Tolerance]:
        """One look: the metric of each group, and an event for each
        group that fell below the target, or is back at it."""
        target = self.conf.capacity.failures_to_tolerate
        env = plan_env(self.conf, self.nova, self.clock)
        cloud = look(self.nova)
        segments = Segments(self.store)

        def methods(host):
            return placement_for_host(env, segments, host, "")

        found = [failures_tolerated(env, cloud, group, methods)
                 for group in groups(self.conf, segments, cloud)]
        METRICS.failures_to_tolerate.set(target)
        # A group gone since (a segment deleted, disabled, renamed) leaves
        # no series behind: its alert would fire for ever.
        for name in set(self._short) - {t.group.name for t in found}:
            METRICS.failures_tolerated.remove(name)
            del self._short[name]
        for tolerance in found:
            name = tolerance.group.name
            METRICS.failures_tolerated.labels(name).set(tolerance.tolerated)
            short = tolerance.tolerated < target
            was_short = self._short.get(name)
            if was_short is None:
                was_short = self._said_short(name)
            self._short[name] = short
            if was_short == short:
                continue
            if short:
                message = (f"tolerates {tolerance.tolerated} host "
                           f"failure(s), fewer than [capacity] "
                           f"failures_to_tolerate = {target}: "
                           f"{tolerance.breaks}")
                LOG.warning("Segment %s %s", name, message)
                kind = EventKind.CAPACITY_SHORT
            else:
                message = (f"tolerates {tolerance.tolerated} host "
                           f"failure(s) again ([capacity] "
                           f"failures_to_tolerate = {target})")
                kind = EventKind.CAPACITY_OK
            self.store.add_event(Decision(self.name, name, kind, message),
                                 self.clock.now())
        return found

    def _said_short(self, group: str) -> bool:
        """Whether the last capacity event about ``group`` said it was
        short, whichever engine said it."""
        said = self.store.events(host=group, limit=1, kinds=(
            EventKind.CAPACITY_SHORT.value, EventKind.CAPACITY_OK.value))
        return bool(said) and said[0].kind == EventKind.CAPACITY_SHORT.value
