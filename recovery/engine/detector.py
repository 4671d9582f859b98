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
from recovery import probe
from recovery.census import Census
from recovery.census import HeartbeatAges
from recovery.domains import FailureDomains
from recovery.engine.fast_path import FastPath
from recovery.engine.fast_path import Stale
from recovery.engine.reports import DetectorStore
from recovery.engine.reports import Reporter
from recovery.engine.reports import failure_name
from recovery.engine.watched import Cycle
from recovery.engine.watched import Verdict
from recovery.engine.watched import Watch
from recovery.events import Decision
from recovery.events import EventKind
from recovery.fencing import Fencing
from recovery.metrics import METRICS
from recovery.models import ComputeService
from recovery.notification import DETECTOR
from recovery.nova import Nova

LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class Poll:
    """What one poll finds, host by host, before it is a ``Cycle``."""

    up: int = 0
    suspects: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    decisions: list[str] = dataclasses.field(default_factory=list)
    returns: list[str] = dataclasses.field(default_factory=list)
    # The hosts Nova reports down; those recovered that heartbeat again;
    # those the probes watch; and those stale, for the fast path.
    down: set[str] = dataclasses.field(default_factory=set)
    returning: set[str] = dataclasses.field(default_factory=set)
    probed: set[str] = dataclasses.field(default_factory=set)
    stale: Stale = dataclasses.field(default_factory=dict)


class Detector:
    def __init__(self, conf: cfg.ConfigOpts, store: DetectorStore,
                 nova: Nova, fencing: Fencing, clock: concurrency.Clock,
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
        self.store = store
        self.nova = nova
        self.clock = clock
        self.name = name
        self.prober = prober or probe.Prober(conf, clock)
        self.ages = HeartbeatAges()
        self.reporter = Reporter(conf, store, fencing, clock, connect)
        self.fast = FastPath(conf, store, self.prober,
                             domains or FailureDomains(conf, nova, clock),
                             fencing, clock, name, self.reporter,
                             self._watch)
        # One record per host with an episode under way.
        self._watches: dict[str, Watch] = {}
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
                self._switch_off()
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
        for verdict, count in cycle.counts().items():
            METRICS.detector_hosts.labels(verdict).set(count)
        if cycle.shape() != self._last_shape:
            LOG.info("%s", cycle.line())
            self._last_shape = cycle.shape()

    def _switch_off(self) -> None:
        LOG.warning("detector: switched off")
        self._watches.clear()
        self.fast.isolated = False
        self.prober.watch(())
        self.fast.record_views({})
        self._last_shape = None

    def _watch(self, host: str) -> Watch:
        """``host``'s record, made if it has none."""
        return self._watches.setdefault(host, Watch())

    def _watched(self, census: Census) -> list[ComputeService]:
        patterns = self.conf.detector.hosts
        in_segments = self.store.segment_host_names()
        return [s for s in census.computes if s.host in in_segments
                or any(fnmatch.fnmatchcase(s.host, p) for p in patterns)]

    def _judge(self, census: Census, now: float) -> Cycle:
        watched = self._watched(census)
        poll = Poll()
        for service in watched:
            if self._look(census, service, now, poll) is Verdict.UP:
                poll.up += 1
        self._end_episodes(poll)
        fast = self.fast.on()
        self.prober.watch(poll.probed if fast else ())
        hold, decisions = self.fast.judge(poll.stale, poll.probed,
                                          self._watches, now)
        self._watches = {host: watch for host, watch in self._watches.items()
                         if not watch.empty()}
        return Cycle(len(watched), poll.up, tuple(poll.suspects),
                     tuple(poll.decisions + decisions), tuple(poll.returns),
                     hold)

    def _look(self, census: Census, service: ComputeService, now: float,
              poll: Poll) -> Verdict:
        """Judge one watched host at this poll."""
        host = service.host
        if service.is_disabled:
            reason = service.disabled_reason
            if reason == self.conf.host_failure.service_disable_reason:
                # Recovered already: it waits for its host return.
                if census.heartbeats(service):
                    poll.returning.add(host)
                    poll.returns.extend(self._returned(host, now))
                return Verdict.DOWN
            if reason != self.conf.process_failure.disable_reason:
                # An operator's: planned maintenance is not a failure.
                return Verdict.DOWN
        poll.probed.add(host)
        age = self.ages.age(service, now)
        nova_hears = census.heartbeats(service)
        if nova_hears and not self._stale(age):
            self._clear(host, now)
            return Verdict.UP
        poll.stale[host] = (service, age)
        watch = self._watch(host)
        if watch.stale_since is None:
            watch.stale_since = now
            self._tell(host, EventKind.SUSPECT,
                       self._suspicion(census, service, age))
        if nova_hears:
            # Stale by its age alone: the fast path's to judge.
            poll.suspects.append((host, self._seen(host, age)))
            return Verdict.SUSPECT
        return self._down(census, service, age, now, poll)

    def _stale(self, age: float | None) -> bool:
        """A heartbeat Nova still hears, too old for the fast path."""
        group = self.conf.detector
        return (self.fast.on() and age is not None and age
                > group.nova_report_interval + group.heartbeat_margin)

    def _down(self, census: Census, service: ComputeService,
              age: float | None, now: float, poll: Poll) -> Verdict:
        """Nova reports ``service`` down: a suspect for the grace period,
        failed after it."""
        host = service.host
        poll.down.add(host)
        watch = self._watch(host)
        if watch.down_since is None:
            watch.down_since = now
        waited = now - watch.down_since
        if waited < self.conf.detector.grace_period:
            poll.suspects.append((host, f"{waited:.0f} s"))
            return Verdict.SUSPECT
        detection = failure_name(service)
        if detection not in self.reporter.handled:
            poll.decisions.append(self.reporter.report(
                census, service, detection, waited, age))
        return Verdict.DOWN

    def _end_episodes(self, poll: Poll) -> None:
        """A heartbeat (or the host leaving the watch) ends the episode."""
        for host, watch in self._watches.items():
            if host not in poll.down:
                watch.down_since = None
            if host not in poll.stale:
                watch.stale_since = None
            if host not in poll.returning:
                watch.returning_since = None

    def _clear(self, host: str, now: float) -> None:
        """``host`` heartbeats (again): its episode ends."""
        watch = self._watches.get(host)
        if watch is None:
            return
        watch.held = None
        if watch.stale_since is None:
            return
        since = (watch.stale_since if watch.down_since is None
                 else watch.down_since)
        self._tell(host, EventKind.CLEARED, (
            f"nova-compute heartbeats again, {now - since:.0f} s after it "
            f"was seen down"))

    def _suspicion(self, census: Census, service: ComputeService,
                   age: float | None) -> str:
        """The suspect event's evidence."""
        group = self.conf.detector
        if census.heartbeats(service):
            stale_after = group.nova_report_interval + group.heartbeat_margin
            return (f"nova-compute's last heartbeat is {age:.1f} s old, past "
                    f"nova_report_interval + heartbeat_margin "
                    f"({stale_after:g} s), though Nova does not report it "
                    f"down yet; {self._probe_seen(service.host)}")
        return (f"nova-compute seen down ({census.describe(service)}); "
                f"failed if no heartbeat comes within grace_period "
                f"{group.grace_period:g} s")

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

    def _tell(self, host: str, kind: EventKind, message: str) -> None:
        """Record what the detector saw of ``host``, before any
        notification."""
        self.store.add_event(Decision(DETECTOR, host, kind, message),
                             self.clock.now())

    def _returned(self, host: str, now: float) -> list[str]:
        """A recovered host heartbeats again: once it has for the grace
        period, its host return (with ``auto_host_return``); with
        ``[host_drain] bring_back_after``, once it has for that long too,
        a return that brings its instances home."""
        group = self.conf.detector
        if not group.auto_host_return:
            return []
        watch = self._watch(host)
        if watch.returning_since is None:
            watch.returning_since = now
        waited = now - watch.returning_since
        quiet = self.conf.host_drain.bring_back_after
        if waited < max(group.grace_period, quiet):
            return []
        return self.reporter.returned(host, waited, bring_back=quiet > 0)
