"""The detector: recovery-engine sees host failures by itself.

Each poll is one request to Nova, the list of its services (the census).
A host fails by one of two paths.

The fast path, for a host with a fencing driver (and ``liveness_probe``
set), does not wait for Nova's verdict. Its heartbeat is *stale* once it
is older than ``nova_report_interval`` plus ``heartbeat_margin``, judged
on this engine's clock (``census.HeartbeatAges``); the prober
(``probe.Prober``) tries every watched host each ``probe_interval``. A
host whose heartbeat is stale and that has been silent on every probe
for ``silence_window`` fails once a majority of the live engines see it
silent too: each engine records its view of such a host in the store,
by the database's clock. Fencing then powers it off and reads it back
Off before anything moves: the probe's silence never evacuates on its
own. An engine that sees more than ``max_failed_hosts_percent`` of the
hosts silent at once (the mass-failure brake's share) suspects its own
network: it fails none of them, withdraws its views, and alarms.

The slow path, for every watched host: one whose nova-compute Nova
reports down, or that is forced down with its heartbeat stopped, is a
*suspect*; once it has been one for ``[detector] grace_period`` without
a heartbeat in between, it has *failed*. A host that flaps is cleared at
each heartbeat and never fails. A fresh heartbeat clears either path:
the host is alive, whatever its probe says.

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
from recovery.census import HeartbeatAges
from recovery.db.control import Agreement
from recovery.db.store import Store
from recovery.domains import FailureDomains
from recovery.engine.gates import silence_verdict
from recovery.events import Decision
from recovery.events import EventKind
from recovery.fencing import Fencing
from recovery.metrics import METRICS
from recovery.models import ComputeService
from recovery.notification import DETECTOR
from recovery.notification import Kind
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
    suspects: tuple[tuple[str, str], ...]       # host, what is seen
    decisions: tuple[str, ...]                  # one per failed host
    returns: tuple[str, ...] = ()               # one per returning host
    hold: str | None = None                     # the fast path held

    def line(self) -> str:
        parts = [f"{self.watched} hosts", f"{self.up} up"]
        if self.suspects:
            parts.append(f"{len(self.suspects)} suspect (" + "; ".join(
                f"{host}, {seen}" for host, seen in self.suspects) + ")")
        if self.hold:
            parts.append(f"fast path held: {self.hold}")
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
                self.returns, self.hold)


class Detector:
    def __init__(self, conf: cfg.ConfigOpts, store: Store, nova: Nova,
                 fencing: Fencing, clock: concurrency.Clock,
                 connect: probe.Connect = probe.tcp_connect,
                 name: str = DETECTOR,
                 prober: probe.Prober | None = None,
                 domains: FailureDomains | None = None):
        """``connect``: how the slow path's liveness probe opens a TCP
        connection. ``name``: this engine's, in the store's views and
        the events it writes. ``prober``: the fast path's probes (run
        by the engine on a task of its own). ``domains``: the hosts'
        failure domains, for the brake on the probes (read from ``nova``
        when not given)."""
        self.conf = conf
        self.connect = connect
        self.store = store
        self.nova = nova
        self.fencing = fencing
        self.clock = clock
        self.name = name
        self.prober = prober or probe.Prober(conf, clock)
        self.domains = domains or FailureDomains(conf, nova, clock)
        self.ages = HeartbeatAges()
        # host -> monotonic time it was first seen down, this episode.
        self._suspects: dict[str, float] = {}
        # host -> monotonic time its heartbeat was first seen stale (or
        # Nova's down), this episode: the suspect event is written once.
        self._stale: dict[str, float] = {}
        # Recovered host -> when it was first seen heartbeating again.
        self._returning: dict[str, float] = {}
        # Failures this engine has dealt with (stored, or found stored).
        self._handled: set[str] = set()
        # The fast path's holds already told, by host (or "all hosts").
        self._held: dict[str, str] = {}
        # Silent, stale hosts without a majority yet, since when.
        self._waiting: dict[str, float] = {}
        # Whether this engine has views in the store to withdraw.
        self._viewing = False
        self._next_poll = 0.0
        self._last_shape: tuple | None = None

    def due_in(self) -> float | None:
        """Seconds until the next poll is due; None while switched off."""
        if not self.conf.detector.enabled:
            return None
        return max(0.0, self._next_poll - self.clock.monotonic())

    def poll(self) -> None:
        """Look at Nova if a poll is due, and store what failed."""
        group = self.conf.detector
        if not group.enabled:
            if self._last_shape is not None:
                LOG.warning("detector: switched off")
                self._suspects.clear()
                self._stale.clear()
                self._returning.clear()
                self._held.clear()
                self._waiting.clear()
                self.prober.watch(())
                self._record_views({})
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
        now = self.clock.monotonic()
        self.ages.observe(census, now)
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

    def _fast(self) -> bool:
        group = self.conf.detector
        return group.fast_path and bool(group.liveness_probe)

    def _judge(self, census: Census, now: float) -> Cycle:
        group = self.conf.detector
        watched = self._watched(census)
        grace = group.grace_period
        stale_after = group.nova_report_interval + group.heartbeat_margin
        recovered = self.conf.host_failure.service_disable_reason
        ours = (recovered, self.conf.process_failure.disable_reason)
        up, suspects, decisions, returns = 0, [], [], []
        down, returning, probed = set(), set(), set()
        stale: dict[str, tuple[ComputeService, float | None]] = {}
        for service in watched:
            host = service.host
            disabled = service.is_disabled
            if disabled and service.disabled_reason not in ours:
                # An operator's: planned maintenance is not a failure.
                continue
            if disabled and service.disabled_reason == recovered:
                # Recovered already: it waits for its host return.
                if census.heartbeats(service):
                    returning.add(host)
                    returns.extend(self._returned(host, now))
                continue
            probed.add(host)
            age = self.ages.age(service, now)
            nova_hears = census.heartbeats(service)
            if nova_hears and not (self._fast() and age is not None
                                   and age > stale_after):
                up += 1
                self._clear(host, now)
                continue
            stale[host] = (service, age)
            if host not in self._stale:
                self._stale[host] = now
                self._tell(host, EventKind.SUSPECT, self._suspicion(
                    census, service, age, stale_after, grace))
            if nova_hears:
                # Stale by its age alone: the fast path's to judge.
                suspects.append((host, self._seen(host, age)))
                continue
            down.add(host)
            since = self._suspects.setdefault(host, now)
            if now - since < grace:
                suspects.append((host, f"{now - since:.0f} s"))
                continue
            detection = _name(service)
            if detection in self._handled:
                continue
            decisions.append(self._report(census, service, detection,
                                          now - since, age))
        # A heartbeat (or the host leaving the watch) ends the episode.
        for host in set(self._suspects) - down:
            del self._suspects[host]
        for host in set(self._stale) - set(stale):
            del self._stale[host]
        for host in set(self._returning) - returning:
            del self._returning[host]
        self.prober.watch(probed if self._fast() else ())
        hold, fast = self._fast_path(stale, probed, now)
        decisions.extend(fast)
        return Cycle(len(watched), up, tuple(suspects), tuple(decisions),
                     tuple(returns), hold)

    def _clear(self, host: str, now: float) -> None:
        """``host`` heartbeats (again): its episode ends."""
        self._held.pop(host, None)
        if host not in self._stale:
            return
        since = self._suspects.get(host, self._stale[host])
        self._tell(host, EventKind.CLEARED, (
            f"nova-compute heartbeats again, {now - since:.0f} s after it "
            f"was seen down"))

    def _suspicion(self, census: Census, service: ComputeService,
                   age: float | None, stale_after: float,
                   grace: float) -> str:
        """The suspect event's evidence."""
        if census.heartbeats(service):
            return (f"nova-compute's last heartbeat is {age:.1f} s old, past "
                    f"nova_report_interval + heartbeat_margin "
                    f"({stale_after:g} s), though Nova does not report it "
                    f"down yet; {self._probe_seen(service.host)}")
        return (f"nova-compute seen down ({census.describe(service)}); "
                f"failed if no heartbeat comes within grace_period "
                f"{grace:g} s")

    def _probe_seen(self, host: str) -> str:
        view = self.prober.view(host)
        if view.unprobed:
            return view.unprobed
        if view.silent_for is not None:
            return f"silent on the probe for {view.silent_for:.1f} s"
        return view.answer or "not probed yet"

    def _seen(self, host: str, age: float | None) -> str:
        """A fast-path suspect, for the decision line."""
        heartbeat = "heartbeat never" if age is None else (
            f"heartbeat {age:.0f} s old")
        view = self.prober.view(host)
        if view.silent_for is not None:
            probed = f"probe silent {view.silent_for:.0f} s"
        else:
            probed = "probe answers" if view.answer else "not probed yet"
        return f"{heartbeat}, {probed}"

    # -- the fast path -------------------------------------------------------
    def _fast_path(self, stale: dict[str, tuple[ComputeService,
                                                 float | None]],
                   probed: set[str], now: float
                   ) -> tuple[str | None, list[str]]:
        """Record this engine's views of the stale hosts, and fail those
        that a majority of engines see silent. Returns the hold, if the
        fast path is held, and the decisions."""
        if not self._fast():
            self._record_views({})
            return None, []
        group = self.conf.detector
        silent_hosts = [host for host in self.prober.hosts()
                        if self.prober.view(host).silent_for is not None]
        verdict = silence_verdict(silent_hosts, probed,
                                  self.domains.of_hosts(), self.conf.safety)
        if verdict is not None:
            # Its own network, more likely than most hosts at once.
            self._record_views({})
            self._hold("all hosts", "isolated", (
                f"this engine may be cut off: {verdict}. No host fails "
                f"fast on this engine's probes until they answer again; "
                f"its views are withdrawn, so that other engines decide"),
                alarm=True)
            return verdict, []
        if self._held.pop("all hosts", None) is not None:
            LOG.warning("detector: the probes answer again; the fast path "
                        "resumes")
        # Every silent host, stale or not yet: when its heartbeat goes
        # stale, the other engines' views are there already.
        views = {host: self.prober.view(host) for host in self.prober.hosts()}
        silent = {host: view.silent_for for host, view in views.items()
                  if view.silent_for is not None}
        self._record_views(silent)
        candidates = [host for host, (service, _) in stale.items()
                      if silent.get(host, 0) >= group.silence_window
                      and _name(service) not in self._handled
                      and self._fenceable(host)]
        for host in set(self._waiting) - set(candidates):
            del self._waiting[host]
        if not candidates:
            return None, []
        fresh = max(group.silence_window, 2 * group.poll_interval,
                    3 * group.probe_interval)
        agreements = self.store.probe_agreement(
            self.name, candidates, window=group.silence_window, fresh=fresh,
            live_within=self.conf.engine.lease_seconds)
        decisions = []
        for host, agreement in sorted(agreements.items()):
            service, age = stale[host]
            if agreement.reached:
                self._waiting.pop(host, None)
                decisions.append(self._fail_fast(service, age, views[host],
                                                 agreement))
            elif now - self._waiting.setdefault(host, now) >= fresh:
                # Not the other engines' next look: they disagree.
                self._hold(host, "no_agreement", (
                    f"silent on this engine's probe for {silent[host]:.1f} "
                    f"s, but only {agreement.describe()}: not failed "
                    f"until a majority agrees"))
        return None, decisions

    def _record_views(self, silent: dict[str, float]) -> None:
        """Keep this engine's views in the store: written while there are
        any, and withdrawn once."""
        if not silent and not self._viewing:
            return
        self.store.record_probe_views(self.name, silent)
        self._viewing = bool(silent)

    def _fenceable(self, host: str) -> bool:
        """The fast path needs fencing: it is its proof."""
        try:
            return self.fencing.for_host(host) is not None
        except exception.ConfigError:
            return False

    def _hold(self, host: str, cause: str, why: str,
              alarm: bool = False) -> None:
        """The fast path holds ``host``: an event and a metric once per
        cause, for as long as it lasts."""
        if self._held.get(host) == cause:
            return
        self._held[host] = cause
        METRICS.detector_holds.labels(cause).inc()
        if alarm:
            LOG.error("ALARM detector: %s", why)
        else:
            LOG.warning("detector: %s: %s", host, why)
        self.store.add_event(Decision(self.name, host, EventKind.HELD, why),
                             self.clock.now())

    def _fail_fast(self, service: ComputeService, age: float | None,
                   view: probe.View, agreement: Agreement) -> str:
        group = self.conf.detector
        host = service.host
        heartbeat = ("it never reported" if age is None else
                     f"its last heartbeat is {age:.1f} s old")
        liveness = probe.Probe.from_conf(self.conf, self.connect)
        evidence = (f"nova-compute on {host}: {heartbeat} (stale past "
                    f"{group.nova_report_interval:g} s + "
                    f"{group.heartbeat_margin:g} s); silent on "
                    f"{liveness.describe(host)} for "
                    f"{view.silent_for:.1f} s; {agreement.describe()}")
        self._held.pop(host, None)
        self.store.add_event(Decision(self.name, host, EventKind.AGREED,
                                      evidence), self.clock.now())
        if age is not None:
            METRICS.detection_seconds.labels("fast").observe(age)
        return self._store(
            host, Kind.HOST_FAILURE, _host_down(service), _name(service),
            note=f"detected (fast path): {evidence}; it is fenced before "
                 f"anything moves")

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
            host, Kind.HOST_RETURN, HOST_UP, detection,
            note=f"detected: nova-compute on {host}, recovered by "
                 f"notification {failure}, heartbeats again for "
                 f"{now - since:.0f} s")]

    def _report(self, census: Census, service: ComputeService,
                detection: str, seconds: float, age: float | None) -> str:
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
                    service.is_disabled and service.disabled_reason
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
                host, Kind.PROCESS, {**PROCESS_DOWN, "liveness": answer},
                alive,
                note=f"{seen}; but {answer}: not a dead host, so it is not "
                     f"evacuated; its nova-compute is disabled as a "
                     f"process failure")
        silent = liveness is not None and unprobed is None
        missing = self._missing_proof(host, silent, unprobed)
        if age is not None and missing is None:
            METRICS.detection_seconds.labels("slow").observe(age)
        return self._store(host, Kind.HOST_FAILURE, _host_down(service),
                           detection, note=seen,
                           ignore=missing and f"{seen}; {missing}")

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

    def _store(self, host: str, kind: Kind, payload: dict, detection: str,
               *, note: str, ignore: str | None = None) -> str:
        """Store what ``host``'s failure (or return) is, as a notification
        of ``kind`` (``payload`` says its event); return the decision."""
        try:
            stored = intake.accept(
                self.store, type=kind.type, hostname=host,
                generated_time=self.clock.now(), payload=payload,
                origin=DETECTOR, now=self.clock.now(), note=note,
                detection=detection, ignore=ignore)
        except exception.Duplicate as exc:
            # Another engine stored it, or a monitor reported it.
            self._handled.add(detection)
            return f"{host}: {exc}"
        self._handled.add(detection)
        LOG.warning("detector: %s: notification %s (%s %s, %s): %s",
                    host, stored.uuid, stored.type, payload["event"],
                    stored.status.value, stored.message)
        return f"{host}: notification {stored.uuid} ({stored.status.value})"


def _host_down(service: ComputeService) -> dict:
    """A host failure's payload: with the heartbeat it was judged on, so
    that the run refuses to fence a host that heartbeated since."""
    if service.updated_at is None:
        return HOST_DOWN
    return {**HOST_DOWN, "heartbeat": service.updated_at.isoformat()}


def _name(service: ComputeService) -> str:
    """The failure's name: the host and the last heartbeat Nova holds for
    it, the same for every engine that sees it."""
    heartbeat = (service.updated_at.isoformat() if service.updated_at
                 else "never")
    return f"{service.host}@{heartbeat}"
