"""The detector's fast path, for hosts with a fencing driver: a host whose
heartbeat is stale and that has been silent on every probe for
``silence_window`` fails once a majority of the live engines see it
silent too (``silence.agreements``). Each engine records its view of the
silent hosts in the store. An engine that sees too many hosts silent at
once (``silence.silence_verdict``) suspects its own network: it fails
none of them, withdraws its views, and alarms. Fencing then powers a
failed host off and reads it back Off before anything moves: the probe's
silence never evacuates on its own."""

import logging
from collections.abc import Callable

from oslo_config import cfg

from recovery import concurrency
from recovery import exception
from recovery import probe
from recovery.domains import FailureDomains
from recovery.engine.reports import DetectorStore
from recovery.engine.reports import Reporter
from recovery.engine.reports import failure_name
from recovery.engine.reports import host_down
from recovery.engine.silence import Agreement
from recovery.engine.silence import HoldCause
from recovery.engine.silence import agreements
from recovery.engine.silence import silence_verdict
from recovery.engine.watched import Watch
from recovery.events import Decision
from recovery.events import EventKind
from recovery.fencing import Fencing
from recovery.metrics import METRICS
from recovery.models import ComputeService
from recovery.notification import Kind

LOG = logging.getLogger(__name__)

# The hold that is not one host's: this engine's own network.
ALL_HOSTS = "all hosts"

# Each stale host: its service, and its heartbeat's age (None: never).
Stale = dict[str, tuple[ComputeService, float | None]]


class FastPath:
    def __init__(self, conf: cfg.ConfigOpts, store: DetectorStore,
                 prober: probe.Prober, domains: FailureDomains,
                 fencing: Fencing, clock: concurrency.Clock, name: str,
                 reporter: Reporter, watch: Callable[[str], Watch]):
        """``watch``: the detector's record of a host (made if none)."""
        self.conf, self.store, self.prober = conf, store, prober
        self.domains, self.fencing, self.clock = domains, fencing, clock
        self.name, self.reporter, self._watch = name, reporter, watch
        # This engine's probes find too many hosts silent: held, told.
        self.isolated = False
        # Whether this engine has views in the store to withdraw.
        self._viewing = False

    def on(self) -> bool:
        group = self.conf.detector
        return group.fast_path and bool(group.liveness_probe)

    def judge(self, stale: Stale, probed: set[str], watches: dict[str, Watch],
              now: float) -> tuple[str | None, list[str]]:
        """Record this engine's views of the stale hosts, and fail those
        that a majority of engines see silent. Returns the hold, if the
        fast path is held, and the decisions."""
        if not self.on():
            self.record_views({})
            return None, []
        silent_hosts = [host for host in self.prober.hosts()
                        if self.prober.view(host).silent_for is not None]
        verdict = silence_verdict(silent_hosts, probed,
                                  self.domains.of_hosts(), self.conf.safety)
        if verdict is not None:
            self._cut_off(verdict)
            return verdict, []
        if self.isolated:
            self.isolated = False
            LOG.warning("detector: the probes answer again; the fast path "
                        "resumes")
        # Every silent host, stale or not yet: when its heartbeat goes
        # stale, the other engines' views are there already.
        views = {host: self.prober.view(host) for host in self.prober.hosts()}
        silent = {host: view.silent_for for host, view in views.items()
                  if view.silent_for is not None}
        self.record_views(silent)
        candidates = self._candidates(stale, silent)
        for host, watch in watches.items():
            if host not in candidates:
                watch.waiting_since = None
        if not candidates:
            return None, []
        return None, self._agree(stale, views, candidates, now)

    def _cut_off(self, verdict: str) -> None:
        """Its own network, more likely than most hosts at once."""
        self.record_views({})
        if self.isolated:
            return
        self.isolated = True
        self._hold(ALL_HOSTS, HoldCause.ISOLATED, (
            f"this engine may be cut off: {verdict}. No host fails "
            f"fast on this engine's probes until they answer again; "
            f"its views are withdrawn, so that other engines decide"),
            alarm=True)

    def _candidates(self, stale: Stale, silent: dict[str, float]
                    ) -> list[str]:
        """The stale hosts silent for the window, not failed yet by this
        engine, that fencing can prove off."""
        window = self.conf.detector.silence_window
        return [host for host, (service, _) in stale.items()
                if silent.get(host, 0) >= window
                and failure_name(service) not in self.reporter.handled
                and self._fenceable(host)]

    def _agree(self, stale: Stale, views: dict[str, probe.View],
               candidates: list[str], now: float) -> list[str]:
        """Fail the ``candidates`` a majority of engines see silent; hold
        those they do not, once the others have had their look."""
        group = self.conf.detector
        fresh = max(group.silence_window, 2 * group.poll_interval,
                    3 * group.probe_interval)
        seen = self.store.probe_views(
            candidates, window=group.silence_window, fresh=fresh,
            live_within=self.conf.engine.lease_seconds)
        decisions = []
        for host, agreement in sorted(agreements(seen, self.name).items()):
            service, age = stale[host]
            watch = self._watch(host)
            if agreement.reached:
                watch.waiting_since = None
                decisions.append(self._fail(service, age, views[host],
                                            agreement))
                continue
            if watch.waiting_since is None:
                watch.waiting_since = now
            if now - watch.waiting_since >= fresh:
                # Not the other engines' next look: they disagree.
                self._hold(host, HoldCause.NO_AGREEMENT, (
                    f"silent on this engine's probe for "
                    f"{views[host].silent_for:.1f} s, but only "
                    f"{agreement.describe()}: not failed until a majority "
                    f"agrees"))
        return decisions

    def record_views(self, silent: dict[str, float]) -> None:
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

    def _hold(self, host: str, cause: HoldCause, why: str,
              alarm: bool = False) -> None:
        """The fast path holds ``host``: an event and a metric once per
        cause, for as long as it lasts."""
        if host != ALL_HOSTS:
            watch = self._watch(host)
            if watch.held == cause:
                return
            watch.held = cause
        METRICS.detector_holds.labels(cause).inc()
        if alarm:
            LOG.error("ALARM detector: %s", why)
        else:
            LOG.warning("detector: %s: %s", host, why)
        self.store.add_event(Decision(self.name, host, EventKind.HELD, why),
                             self.clock.now())

    def _fail(self, service: ComputeService, age: float | None,
              view: probe.View, agreement: Agreement) -> str:
        group = self.conf.detector
        host = service.host
        heartbeat = ("it never reported" if age is None else
                     f"its last heartbeat is {age:.1f} s old")
        liveness = probe.Probe.from_conf(self.conf, self.reporter.connect)
        evidence = (f"nova-compute on {host}: {heartbeat} (stale past "
                    f"{group.nova_report_interval:g} s + "
                    f"{group.heartbeat_margin:g} s); silent on "
                    f"{liveness.describe(host)} for "
                    f"{view.silent_for:.1f} s; {agreement.describe()}")
        self._watch(host).held = None
        self.store.add_event(Decision(self.name, host, EventKind.AGREED,
                                      evidence), self.clock.now())
        if age is not None:
            METRICS.detection_seconds.labels("fast").observe(age)
        return self.reporter.store_one(
            host, Kind.HOST_FAILURE, host_down(service),
            failure_name(service),
            note=f"detected (fast path): {evidence}; it is fenced before "
                 f"anything moves")
