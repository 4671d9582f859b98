"""The detector: recovery-engine sees host failures by itself.

Each poll is one request to Nova, the list of its services (the census).
A watched host whose nova-compute Nova reports down, or that is forced
down with its heartbeat stopped, is a *suspect*; once it has been one
for ``[detector] grace_period`` without a heartbeat in between, it has
*failed*. A host that flaps is cleared at each heartbeat and never fails.

A failure is stored as a notification with origin ``detector``, through
the API's intake, and the engine runs it like any other (the gates, the
journal, the results). What it becomes depends on what can prove the
host off, because Nova's heartbeat is one process's, not the machine's:

- a liveness probe that the host answers: not a dead host. A PROCESS
  STOPPED notification disables its nova-compute as a process failure,
  with an alarm; the host is never evacuated nor powered off for it;
- a fencing driver (it powers the host off before anything moves), or a
  probe the host does not answer: a COMPUTE_HOST STOPPED notification;
- neither: the notification is stored ``ignored``, saying what to
  configure, unless ``trust_nova_heartbeat`` is set.

Any number of engines may run the detector. A failure is named by the
host and the last heartbeat Nova holds for it, the same for every
engine; the store keeps one notification per name (a unique index), so
one failure gives one notification, with no leader to elect.
"""

import dataclasses
import fnmatch
import logging

from oslo_config import cfg

from recovery import concurrency
from recovery import exception
from recovery import intake
from recovery import probe
from recovery.census import Census
from recovery.db.events import Decision
from recovery.db.events import EventKind
from recovery.db.store import Store
from recovery.fencing import Fencing
from recovery.metrics import METRICS
from recovery.models import ComputeService
from recovery.notification import DETECTOR
from recovery.nova import Nova

LOG = logging.getLogger(__name__)

HOST_DOWN = {"event": "STOPPED", "host_status": "NORMAL",
             "cluster_status": "OFFLINE"}
PROCESS_DOWN = {"event": "STOPPED", "process_name": "nova-compute"}
HOST_UP = {"event": "STARTED", "host_status": "NORMAL",
           "cluster_status": "ONLINE"}


@dataclasses.dataclass(frozen=True)
class Cycle:
    """What one poll saw, for the decision line."""

    watched: int
    up: int
    suspects: tuple[tuple[str, float], ...]     # host, seconds suspect
    decisions: tuple[str, ...]                  # one per failed host
    returns: tuple[str, ...] = ()               # one per returning host

    def line(self) -> str:
        parts = [f"{self.watched} hosts", f"{self.up} up"]
        if self.suspects:
            parts.append(f"{len(self.suspects)} suspect (" + ", ".join(
                f"{host}, {age:.0f} s" for host, age in self.suspects) + ")")
        if self.decisions:
            parts.append(f"{len(self.decisions)} failed -> "
                         + "; ".join(self.decisions))
        if self.returns:
            parts.append(f"{len(self.returns)} back -> "
                         + "; ".join(self.returns))
        return "detector: " + ", ".join(parts)

    def shape(self) -> tuple:
        """What makes a line worth writing: not the ages."""
        return (self.watched, self.up,
                tuple(host for host, _ in self.suspects), self.decisions,
                self.returns)


class Detector:
    def __init__(self, conf: cfg.ConfigOpts, store: Store, nova: Nova,
                 fencing: Fencing, clock: concurrency.Clock,
                 connect: probe.Connect = probe.tcp_connect):
        """``connect``: how the liveness probe opens a TCP connection."""
        self.conf = conf
        self.connect = connect
        self.store = store
        self.nova = nova
        self.fencing = fencing
        self.clock = clock
        # host -> monotonic time it was first seen down, this episode.
        self._suspects: dict[str, float] = {}
        # Recovered host -> when it was first seen heartbeating again.
        self._returning: dict[str, float] = {}
        # Failures this engine has dealt with (stored, or found stored).
        self._handled: set[str] = set()
        self._next_poll = 0.0
        self._last_shape: tuple | None = None

    def poll(self) -> None:
        """Look at Nova if a poll is due, and store what failed."""
        group = self.conf.detector
        if not group.enabled:
            if self._last_shape is not None:
                LOG.warning("detector: switched off")
                self._suspects.clear()
                self._returning.clear()
                self._last_shape = None
            return
        now = self.clock.monotonic()
        if now < self._next_poll:
            return
        self._next_poll = now + group.poll_interval
        try:
            census = Census.take(self.nova, self.conf.safety.service_down_time)
        except exception.RecoveryError as exc:
            LOG.warning("detector: cannot list Nova's services: %s", exc)
            return
        cycle = self._judge(census, now)
        suspect = len(cycle.suspects)
        for state, count in (("up", cycle.up), ("suspect", suspect),
                             ("down", cycle.watched - cycle.up - suspect)):
            METRICS.detector_hosts.labels(state).set(count)
        if cycle.shape() != self._last_shape:
            LOG.info("%s", cycle.line())
            self._last_shape = cycle.shape()

    def _watched(self, census: Census) -> list[ComputeService]:
        patterns = self.conf.detector.hosts
        in_segments = self.store.segment_host_names()
        return [s for s in census.computes if s.host in in_segments
                or any(fnmatch.fnmatchcase(s.host, p) for p in patterns)]

    def _judge(self, census: Census, now: float) -> Cycle:
        watched = self._watched(census)
        grace = self.conf.detector.grace_period
        recovered = self.conf.host_failure.service_disable_reason
        ours = (recovered, self.conf.process_failure.disable_reason)
        up, suspects, decisions, returns = 0, [], [], []
        down, returning = set(), set()
        for service in watched:
            host = service.host
            disabled = service.status == "disabled"
            if disabled and service.disabled_reason not in ours:
                # An operator's: planned maintenance is not a failure.
                continue
            if disabled and service.disabled_reason == recovered:
                # Recovered already: it waits for its host return.
                if census.heartbeats(service):
                    returning.add(host)
                    returns.extend(self._returned(host, now))
                continue
            if census.heartbeats(service):
                up += 1
                if host in self._suspects:
                    self._tell(host, EventKind.CLEARED, (
                        f"nova-compute heartbeats again, "
                        f"{now - self._suspects[host]:.0f} s after it was "
                        f"seen down"))
                continue
            down.add(host)
            if host not in self._suspects:
                self._tell(host, EventKind.SUSPECT, (
                    f"nova-compute seen down ({census.describe(service)}); "
                    f"failed if no heartbeat comes within grace_period "
                    f"{grace:g} s"))
            since = self._suspects.setdefault(host, now)
            if now - since < grace:
                suspects.append((host, now - since))
                continue
            detection = _name(service)
            if detection in self._handled:
                continue
            decisions.append(self._report(census, service, detection,
                                          now - since))
        # A heartbeat (or the host leaving the watch) ends the episode.
        for host in set(self._suspects) - down:
            del self._suspects[host]
        for host in set(self._returning) - returning:
            del self._returning[host]
        return Cycle(len(watched), up, tuple(suspects), tuple(decisions),
                     tuple(returns))

    def _tell(self, host: str, kind: EventKind, message: str) -> None:
        """Record what the detector saw of ``host``, before any
        notification."""
        self.store.add_event(Decision(DETECTOR, host, kind, message),
                             self.clock.now())

    def _returned(self, host: str, now: float) -> list[str]:
        """A recovered host heartbeats again: once it has for the grace
        period, its host return (with ``auto_host_return``)."""
        group = self.conf.detector
        if not group.auto_host_return:
            return []
        since = self._returning.setdefault(host, now)
        if now - since < group.grace_period:
            return []
        failure = self.store.last_host_failure(host)
        if failure is None:
            return []       # not recovered by recovery: not its to return
        detection = f"{host}@return-after@{failure}"
        if detection in self._handled:
            return []
        return [self._store(
            host, "COMPUTE_HOST", HOST_UP, detection,
            note=f"detected: nova-compute on {host}, recovered by "
                 f"notification {failure}, heartbeats again for "
                 f"{now - since:.0f} s")]

    def _report(self, census: Census, service: ComputeService,
                detection: str, seconds: float) -> str:
        """Store what the failure of ``service``'s host becomes; return
        the decision."""
        host = service.host
        seen = (f"detected: nova-compute on {host} down for {seconds:.0f} s "
                f"past Nova's service_down_time ({census.describe(service)})")
        liveness = probe.Probe.from_conf(self.conf, self.connect)
        answer = unprobed = None
        if liveness is not None:
            try:
                answer = liveness.answer(host)
            except exception.ProbeFailed as exc:
                LOG.warning("detector: %s", exc)
                unprobed = str(exc)
        if answer is not None:
            # Its own name: the host failure that may follow is another.
            alive = f"{detection}@answers"
            if alive in self._handled or (
                    service.status == "disabled" and service.disabled_reason
                    == self.conf.process_failure.disable_reason):
                # A process failure already, and alive still: probed
                # again at each poll, until it falls silent.
                return f"{host} still answers: a process failure"
            LOG.error("ALARM detector: nova-compute on %s is down but the "
                      "host answers (%s): its guests run unmanaged. Not "
                      "evacuated; nova-compute is disabled as a process "
                      "failure. Repair nova-compute on %s", host, answer,
                      host)
            return self._store(
                host, "PROCESS", {**PROCESS_DOWN, "liveness": answer},
                alive,
                note=f"{seen}; but {answer}: not a dead host, so it is not "
                     f"evacuated; its nova-compute is disabled as a "
                     f"process failure")
        silent = liveness is not None and unprobed is None
        missing = self._missing_proof(host, silent, unprobed)
        return self._store(host, "COMPUTE_HOST", HOST_DOWN, detection,
                           note=seen, ignore=missing and f"{seen}; {missing}")

    def _missing_proof(self, host: str, silent: bool,
                       unprobed: str | None) -> str | None:
        """Why nothing proves ``host`` off, or None when something does:
        fencing, the probe's silence (``silent``), or trust in Nova."""
        if silent or self.conf.detector.trust_nova_heartbeat:
            return None
        try:
            if self.fencing.for_host(host) is not None:
                return None
        except exception.ConfigError as exc:
            return f"not evacuated: its fencing is misconfigured: {exc}"
        if unprobed is not None:
            return f"not evacuated: {unprobed}"
        return (f"not evacuated: nothing proves {host} is off, and Nova's "
                f"heartbeat is one process's, not the host's. Configure "
                f"fencing for it ([fencing], credentials_file) or [detector] "
                f"liveness_probe; or check that it is off and run "
                f"'recovery host-failure {host}'")

    def _store(self, host: str, type: str, payload: dict, detection: str,
               *, note: str, ignore: str | None = None) -> str:
        try:
            stored = intake.accept(
                self.store, type=type, hostname=host,
                generated_time=self.clock.now(), payload=payload,
                origin=DETECTOR, now=self.clock.now(), note=note,
                detection=detection, ignore=ignore)
        except exception.Duplicate as exc:
            # Another engine stored it, or a monitor reported it.
            self._handled.add(detection)
            return f"{host}: {exc}"
        self._handled.add(detection)
        LOG.warning("detector: %s: notification %s (%s %s, %s): %s",
                    host, stored.uuid, type, payload["event"],
                    stored.status.value, stored.message)
        return f"{host}: notification {stored.uuid} ({stored.status.value})"


def _name(service: ComputeService) -> str:
    """The failure's name: the host and the last heartbeat Nova holds for
    it, the same for every engine that sees it."""
    heartbeat = (service.updated_at.isoformat() if service.updated_at
                 else "never")
    return f"{service.host}@{heartbeat}"
