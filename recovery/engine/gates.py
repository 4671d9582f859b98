"""The engine-wide gates a host recovery passes before it starts.

- Disarmed: no recovery starts at all (the loop checks the switch).
- Per-window cap: at most ``max_host_recoveries_per_window`` host
  recoveries start in any ``window_seconds``; the rest wait in order.
- Mass-failure brake: when more than ``max_failed_hosts_percent`` of the
  compute services are down or in recovery at once, or every one of them
  looks down, the engine is more likely cut off from the hosts (or Nova's
  control plane is failing) than looking at dead hosts: start none. The
  detector's fast path applies the same rule to its own probes
  (``silence_verdict``): an engine that finds that share of the hosts
  silent suspects its own network and fails none of them.

A held notification keeps its status and attempts; its message says why
it waits and the engine looks again when the hold ends.
"""

import dataclasses
import datetime
import logging

from oslo_config import cfg

from recovery import concurrency
from recovery.census import Census
from recovery.db.store import Store
from recovery.metrics import METRICS
from recovery.metrics import NOVA_BRAKE_REASONS
from recovery.notification import Kind
from recovery.notification import Notification
from recovery.nova import Nova

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Hold:
    message: str
    # Seconds until the notification is looked at again.
    delay: float
    # The message without its times: the same while the cause lasts.
    cause: str


class Gates:
    def __init__(self, conf: cfg.ConfigOpts, store: Store, nova: Nova,
                 clock: concurrency.Clock):
        self._conf, self._store, self._nova = conf, store, nova
        self._clock = clock
        self._last_verdict: str | None = None

    def check(self, notification: Notification) -> Hold | None:
        """Why ``notification`` must wait, or None if it may start. Only a
        host failure evacuates: a host return, an instance or a process
        failure passes."""
        if notification.kind is not Kind.HOST_FAILURE:
            return None
        for gate, look in (("window", self._window),
                           ("brake", lambda: self._brake(notification))):
            hold = look()
            if hold is not None:
                METRICS.holds.labels(gate).inc()
                break
        else:
            return None
        # Never due at once again, or the loop would spin on it.
        return dataclasses.replace(hold, delay=max(hold.delay, 1.0))

    def window(self) -> tuple[int, float]:
        """The per-window cap, as the store enforces it in each claim:
        at most that many host recoveries start in that many seconds,
        whichever engine starts them."""
        group = self._conf.safety
        return group.max_host_recoveries_per_window, group.window_seconds

    def _window(self) -> Hold | None:
        cap, seconds = self.window()
        # How long ago each start was, by the database's clock.
        ages = self._store.recoveries_started_within(seconds)
        if len(ages) < cap:
            return None
        # The start that must leave the window before another may begin.
        delay = seconds - ages[len(ages) - cap]
        until = self._clock.now() + datetime.timedelta(seconds=delay)
        cause = (f"waiting: {len(ages)} host recoveries started in the "
                 f"last {seconds:g} s, the most "
                 f"max_host_recoveries_per_window allows")
        return Hold(f"{cause}; the next may start at {until:%H:%M:%S} UTC",
                    delay, cause)

    def _brake(self, notification: Notification) -> Hold | None:
        group = self._conf.safety
        census = Census.take(self._nova, group.service_down_time)
        computes = {s.host for s in census.computes}
        down = census.down_hosts()
        failed = down | (self._store.hosts_in_recovery() & computes)
        failed.add(notification.hostname)
        share = 100 * len(failed) / max(len(computes), 1)
        verdict = reason = None
        if computes and down == computes:
            reason = "all_down"
            verdict = (f"every one of the {len(computes)} compute services "
                       f"looks down at once: recovery is more likely cut "
                       f"off from Nova's hosts, or Nova's control plane is "
                       f"failing, than looking at dead hosts")
        elif share > group.max_failed_hosts_percent:
            reason = "too_many_down"
            verdict = (f"{len(failed)} of {len(computes)} compute services "
                       f"are down or in recovery ({share:.0f}% > "
                       f"max_failed_hosts_percent "
                       f"{group.max_failed_hosts_percent}%)")
        for each in NOVA_BRAKE_REASONS:
            METRICS.brake.labels(each).set(each == reason)
        if verdict is None:
            self._last_verdict = None
            return None
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


def silence_verdict(silent: int, probed: int,
                    max_percent: float) -> str | None:
    """The brake's rule for one engine's probes: when more than
    ``max_percent`` of the ``probed`` hosts are ``silent`` at once (two at
    least), the engine is more likely cut off from them than looking at
    dead hosts. The verdict, or None."""
    engaged = silent >= 2 and 100 * silent / probed > max_percent
    METRICS.brake.labels("silent_probes").set(engaged)
    if not engaged:
        return None
    return (f"{silent} of {probed} watched hosts are silent on its liveness "
            f"probe at once ({100 * silent / probed:.0f}% > "
            f"max_failed_hosts_percent {max_percent:g}%)")
