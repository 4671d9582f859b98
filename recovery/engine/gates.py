"""The engine-wide gates a host recovery passes before it starts.

- Disarmed: no recovery starts at all (the loop checks the switch).
- Mass-failure brake: when more than ``max_failed_hosts_percent`` of the
  compute services are down or in recovery at once, or every one of them
  looks down, the engine is more likely cut off from the hosts (or Nova's
  control plane is failing) than looking at dead hosts: start none. It
  reasons per failure domain (``recovery.domains``): a domain down as a
  whole is one event and leaves the percentage, and more than
  ``max_failed_domains`` of them at once hold as a partition. The
  detector's fast path applies the same rule to its own probes
  (``recovery.engine.silence``): an engine that finds that share of the
  hosts silent suspects its own network and fails none of them.
- Per-window cap: at most ``max_host_recoveries_per_window`` host
  recoveries start in any ``window_seconds``, a domain down as a whole
  counting once; the rest wait in order.

A held notification keeps its status and attempts; its message says why
it waits and the engine looks again when the hold ends. Its claim, once
the gates let it go, records why (``window``).
"""

import dataclasses
import datetime
import logging
from typing import Protocol

from oslo_config import cfg

from recovery import concurrency
from recovery.census import Census
from recovery.db.claims import Start
from recovery.db.claims import Window
from recovery.db.claims import fits
from recovery.domains import Assessment
from recovery.domains import FailureDomains
from recovery.domains import assess
from recovery.metrics import METRICS
from recovery.metrics import NOVA_BRAKE_REASONS
from recovery.notification import Kind
from recovery.notification import Notification
from recovery.nova import Nova

LOG = logging.getLogger(__name__)

# A census serves the brake this long: a rack's notifications, checked
# one after another in a claim turn, cost one services listing, not one
# each. Which hosts recovery runs is read from the store every time.
CENSUS_REUSE = 1.0


class GateStore(Protocol):
    """What the gates read of the store: the host recoveries in flight,
    for the brake, and those started lately, for the per-window cap."""

    def hosts_in_recovery(self) -> set[str]: ...

    def recoveries_started_within(self, seconds: float) -> list[Start]: ...


@dataclasses.dataclass(frozen=True)
class Hold:
    message: str
    # Seconds until the notification is looked at again.
    delay: float
    # The message without its times: the same while the cause lasts.
    cause: str


class Gates:
    def __init__(self, conf: cfg.ConfigOpts, store: GateStore, nova: Nova,
                 clock: concurrency.Clock,
                 domains: FailureDomains | None = None):
        """``domains``: the hosts' failure domains (read from ``nova``
        when not given)."""
        self._conf, self._store, self._nova = conf, store, nova
        self._clock = clock
        self._domains = domains or FailureDomains(conf, nova, clock)
        self._last_verdict: str | None = None
        # The brake's last look, and why the last notification passed.
        self._assessment = Assessment({})
        self._passed: tuple[str, str] | None = None   # uuid, why
        self._census: tuple[float, Census] | None = None   # when, census

    def check(self, notification: Notification) -> Hold | None:
        """Why ``notification`` must wait, or None if it may start. Only a
        host failure evacuates: a host return, an instance or a process
        failure passes."""
        if notification.kind is not Kind.HOST_FAILURE:
            return None
        reasons = []
        for gate, look in (("brake", lambda: self._brake(notification)),
                           ("window", lambda: self._window(notification))):
            hold = look()
            if isinstance(hold, str):
                reasons.append(hold)
                continue
            METRICS.holds.labels(gate).inc()
            # Never due at once again, or the loop would spin on it.
            return dataclasses.replace(hold, delay=max(hold.delay, 1.0))
        self._passed = (notification.uuid, "; ".join(reasons))
        return None

    def window(self, notification: Notification) -> Window:
        """The per-window cap, as the store enforces it in each claim:
        at most that many host recoveries start in that many seconds,
        whichever engine starts them. For the ``notification`` that
        ``check`` just let go: its failure domain if that is down as a
        whole, and why it may start."""
        group = self._conf.safety
        cap, seconds = (group.max_host_recoveries_per_window,
                        group.window_seconds)
        if notification.kind is not Kind.HOST_FAILURE:
            return Window(cap, seconds)
        released = None
        if self._passed is not None and self._passed[0] == notification.uuid:
            released = self._passed[1]
        return Window(cap, seconds,
                      self._assessment.domain_of(notification.hostname),
                      released)

    def _window(self, notification: Notification) -> Hold | str:
        window = self.window(notification)
        # The starts within it, by the database's clock.
        starts = self._store.recoveries_started_within(window.seconds)
        if fits(starts, window):
            if window.domain is not None:
                return (f"its failure domain {window.domain} counts as "
                        f"one start of the per-window cap")
            return (f"{len(starts)} of {window.cap} host recoveries "
                    f"started in the last {window.seconds:g} s")
        # The start that must leave the window before another may begin.
        delay = window.seconds - starts[len(starts) - window.cap].age
        until = self._clock.now() + datetime.timedelta(seconds=delay)
        cause = (f"waiting: {len(starts)} host recoveries started in the "
                 f"last {window.seconds:g} s, the most "
                 f"max_host_recoveries_per_window allows")
        return Hold(f"{cause}; the next may start at {until:%H:%M:%S} UTC",
                    delay, cause)

    def _brake(self, notification: Notification) -> Hold | str:
        group = self._conf.safety
        census = self._take_census(group.service_down_time)
        computes = {s.host for s in census.computes}
        down = census.down_hosts()
        failed = down | (self._store.hosts_in_recovery() & computes)
        failed.add(notification.hostname)
        assessment = assess(
            failed, computes | {notification.hostname},
            self._domains.of_hosts(),
            max_percent=group.max_failed_hosts_percent,
            max_domains=group.max_failed_domains, noun="compute services")
        reason, verdict = assessment.reason, assessment.verdict
        if computes and down == computes:
            reason = "all_down"
            verdict = (f"every one of the {len(computes)} compute services "
                       f"looks down at once: recovery is more likely cut "
                       f"off from Nova's hosts, or Nova's control plane is "
                       f"failing, than looking at dead hosts")
        for each in NOVA_BRAKE_REASONS:
            METRICS.brake.labels(each).set(each == reason)
        looked = assessment if verdict is None else Assessment({})
        self._tell_whole(looked)
        self._assessment = looked
        if verdict is None:
            if self._last_verdict is not None:
                LOG.warning("Mass-failure brake released: %d of %d compute "
                            "services are down or in recovery%s",
                            len(failed), len(computes),
                            _outside(assessment))
            self._last_verdict = None
            domain = assessment.domain_of(notification.hostname)
            if domain is not None:
                return (f"failure domain {domain} is down as a whole "
                        f"({len(assessment.whole[domain])} hosts): one "
                        f"event, out of the percentage brake")
            return (f"{len(failed)} of {len(computes)} compute services "
                    f"are down or in recovery{_outside(assessment)}")
        until = self._clock.now() + datetime.timedelta(
            seconds=group.recheck_interval)
        if verdict != self._last_verdict:
            # One loud line per verdict, not one per held notification.
            LOG.error("Mass-failure brake: %s. Holding every host "
                      "recovery (%s); looking again every %g s. Recover "
                      "a host by hand with 'recovery host-failure HOST' if "
                      "you have verified it is dead.", verdict,
                      ", ".join(sorted(failed)), group.recheck_interval)
            self._last_verdict = verdict
        cause = f"held by the mass-failure brake: {verdict}"
        return Hold(f"{cause}; looking again at {until:%H:%M:%S} UTC",
                    group.recheck_interval, cause)

    def _take_census(self, down_after: float) -> Census:
        now = self._clock.monotonic()
        if self._census is None or now - self._census[0] >= CENSUS_REUSE:
            self._census = (now, Census.take(self._nova, down_after))
        return self._census[1]

    def _tell_whole(self, assessment: Assessment) -> None:
        """One line for each domain newly seen down as a whole, since the
        last look."""
        for name in sorted(set(assessment.whole)
                           - set(self._assessment.whole)):
            LOG.warning("Failure domain %s is down as a whole (%s): one "
                        "event, recovered at full speed, out of the "
                        "percentage brake and as one start of the "
                        "per-window cap", name,
                        ", ".join(sorted(assessment.whole[name])))


def _outside(assessment: Assessment) -> str:
    if not assessment.whole:
        return ""
    return (f", with failure domains down as a whole: "
            f"{assessment.describe_whole()}")

