"""Each host's hardware health, read from its Redfish BMC, and the drains
it starts: before a failing host dies, its guests leave it alive.

Every ``[host_drain] health_interval`` seconds (0: never), the first live
engine by name reads the health of each compute host whose fencing has a
Redfish device: one request per host once its sushy System is made
(sushy closes the TCP connection after each answer, as some BMCs need),
several hosts at once. A change of a host's health is an event.
A host that goes from OK to a state in ``drain_on_health`` gets a drain
(a notification the engine then runs as any other), unless a brake
holds it:

- recovery is disarmed;
- a host failure is being recovered anywhere (its room and Nova's
  requests are the failure's);
- ``max_drains`` drains are already under way.

A held drain is asked for again at the next read while the host stays
degraded; each hold is said once. A host whose BMC does not answer keeps
its last health: the read says nothing new.
"""

import dataclasses
import datetime
import logging
from collections.abc import Callable
from typing import Protocol

from oslo_config import cfg

from recovery import concurrency
from recovery import exception
from recovery import intake
from recovery.census import Census
from recovery.db.control import Arming
from recovery.db.control import EngineRecord
from recovery.engine.capacity import first_live_engine
from recovery.events import Decision
from recovery.events import EventKind
from recovery.fencing import Fencing
from recovery.notification import HEALTH
from recovery.notification import HOST_EVENT
from recovery.notification import Kind
from recovery.nova import Nova

LOG = logging.getLogger(__name__)

OK = "OK"
# Hosts read at once.
READERS = 16


class HardwareStore(intake.AcceptStore, Protocol):
    def engines(self) -> list[EngineRecord]: ...
    def arming(self) -> Arming: ...
    def hosts_acting(self, kind: Kind) -> set[str]: ...
    def add_event(self, decision: Decision,
                  now: datetime.datetime) -> None: ...


class HealthReader(Protocol):
    def read_health(self, seconds: float) -> str: ...


@dataclasses.dataclass
class _Host:
    reader: HealthReader
    health: str | None = None
    # The degraded health a drain is asked for, until it is stored.
    wanted: str | None = None
    held: str | None = None     # the last hold said


class HardwareWatch:
    """recovery-engine's reads of the hosts' health, and their drains."""

    def __init__(self, conf: cfg.ConfigOpts, store: HardwareStore,
                 nova: Nova, fencing: Fencing, clock: concurrency.Clock,
                 name: str,
                 pool_factory: Callable[[int], concurrency.TaskPool] = (
                     concurrency.task_pool)):
        self.conf, self.store, self.nova = conf, store, nova
        self.fencing, self.clock, self.name = fencing, clock, name
        self._pool_factory = pool_factory
        self._hosts: dict[str, _Host] = {}
        # How many hosts the last read read: said when it changes.
        self._watched: int | None = None

    def run(self, stopping: concurrency.Event) -> None:
        """Read every ``health_interval`` until ``stopping``."""
        while True:
            interval = self.conf.host_drain.health_interval
            # Switched off: look at the option again in a minute.
            if self.clock.wait(stopping, interval or 60.0):
                return
            if interval <= 0 or not first_live_engine(
                    self.store.engines(), self.name,
                    self.conf.engine.lease_seconds):
                continue
            try:
                self.look()
            except exception.RecoveryError as exc:
                LOG.warning("Hardware health not read: %s", exc)
            except Exception:
                LOG.exception("Hardware health not read")

    def look(self) -> None:
        """One read of every host's health, and what it decides."""
        census = Census.take(self.nova, self.conf.safety.service_down_time)
        hosts = {s.host: self._host(s.host) for s in census.computes
                 if census.heartbeats(s)}
        watched = [(h, w) for h, w in hosts.items() if w is not None]
        timeout = self.conf.fencing.timeout
        pool = self._pool_factory(READERS)
        for outcome in pool.run(lambda pair: pair[1].reader.read_health(
                timeout), watched):
            host, watch = outcome.item
            if outcome.error is not None:
                LOG.debug("Health of %s not read: %s", host, outcome.error)
                continue
            self._seen(host, watch, outcome.value)
        if len(watched) != self._watched:
            self._watched = len(watched)
            LOG.info("Reading the hardware health of %d host(s) (Redfish) "
                     "every %g s", len(watched),
                     self.conf.host_drain.health_interval)
        wanted = [(h, w) for h, w in watched if w.wanted]
        if wanted:
            self._drain(wanted)

    def _host(self, host: str) -> _Host | None:
        """The host's watch, made once: its first Redfish device."""
        if host not in self._hosts:
            try:
                fence = self.fencing.for_host(host)
            except exception.ConfigError:
                fence = None
            readers = [d.fencer for _, d in (fence.devices if fence else [])
                       if hasattr(d.fencer, "read_health")]
            self._hosts[host] = _Host(readers[0]) if readers else None
        return self._hosts[host]

    def _seen(self, host: str, watch: _Host, health: str) -> None:
        before, watch.health = watch.health, health
        degrade = self.conf.host_drain.drain_on_health
        if health == before:
            return
        if health not in degrade:
            watch.wanted = watch.held = None
        if before is None and health == OK:
            return      # the first read: nothing changed
        said = (f"hardware health {before or 'unknown'} -> {health} "
                f"(Redfish)")
        if health == OK:
            pass
        elif before != OK:
            said += ("; no drain: a drain starts on a change from OK "
                     "(this is the first read since the engine started, "
                     "or it was not OK before)")
        elif health in degrade:
            watch.wanted = health
            said += "; a drain is asked for"
        else:
            said += (f"; no drain: [host_drain] drain_on_health is "
                     f"{', '.join(degrade)}")
        LOG.warning("%s: %s", host, said)
        self.store.add_event(Decision(self.name, host, EventKind.HEALTH,
                                      said), self.clock.now())

    def _drain(self, wanted: list[tuple[str, _Host]]) -> None:
        held = self._brake()
        draining = self.store.hosts_acting(Kind.HOST_DRAIN)
        limit = self.conf.host_drain.max_drains
        under_way = len(draining)
        for host, watch in wanted:
            if host in draining:
                watch.wanted = None
                continue
            why = held or (None if under_way < limit else (
                f"{under_way} drain(s) already under way ([host_drain] "
                f"max_drains = {limit})"))
            if why is not None:
                if watch.held != why:
                    watch.held = why
                    self.store.add_event(Decision(
                        self.name, host, EventKind.HELD,
                        f"drain on health {watch.wanted} held: {why}; "
                        f"asked again at the next read"), self.clock.now())
                continue
            self._store(host, watch)
            under_way += 1

    def _brake(self) -> str | None:
        arming = self.store.arming()
        if not arming.armed:
            return f"recovery is disarmed ({arming.reason})"
        failing = self.store.hosts_acting(Kind.HOST_FAILURE)
        if failing:
            return (f"a host failure is being recovered "
                    f"({', '.join(sorted(failing))})")
        return None

    def _store(self, host: str, watch: _Host) -> None:
        health = watch.wanted
        now = self.clock.now()
        try:
            stored = intake.accept(
                self.store, type=Kind.HOST_DRAIN.type, hostname=host,
                generated_time=now, kind=Kind.HOST_DRAIN,
                payload={"event": HOST_EVENT[Kind.HOST_DRAIN],
                         "health": health},
                origin=HEALTH, now=now,
                note=f"hardware health {health} (Redfish): drained before "
                     f"it fails")
        except exception.Duplicate as exc:
            LOG.info("%s: drain already asked for: %s", host, exc)
        else:
            LOG.warning("%s: health %s: drain %s stored", host, health,
                        stored.uuid)
        watch.wanted = watch.held = None
