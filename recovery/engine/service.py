"""The service loop: claim notifications from the store and run them.

One loop, woken when the API stores a notification and otherwise looking
every ``IDLE_WAIT`` seconds (for retries that fell due, and runs other
engines abandoned), claims what is runnable and starts each host recovery
on its own task; each run's ``LeaseKeeper`` renews its lease. Claims are
compare-and-swap in the store, so a notification never runs twice, and
one host never twice at once.

Engines that share the database share the host failures too: an engine
that runs its share of the host recoveries (those running under the live
engines and those waiting, over the live engines, rounded up) leaves the
next new host failure to the others, so a rack's hosts spread over the
engines rather than go to the one the API woke first. One left unclaimed
for ``[engine] balance_grace`` seconds goes to any engine with a free
slot: an engine that died is live in the registry for a lease, and its
share must not wait that long. Runs resumed from another engine, and
instance and process failures, are never left.

Each turn, the detector (``detector``, when ``[detector] enabled``) may
store a host failure it saw; it is claimed like any other. On a task of
its own, the failures tolerated are refreshed (``capacity``).

Before a claim, the safety gates: while disarmed only runs already under
way (abandoned by a crashed engine) are taken up; a new recovery waits
for the per-window cap and the mass-failure brake (``gates``).

Its parts come from ``server.build``: the detector, the gates, the lease
keeper, and how a claimed notification is run (``attempt``, given the
``runner.Run`` of the claim). A host failure that fencing holds is told
by ``holds``, once recorded: one ALARM per hold of a host, or of its
failure domain (``recovery.engine.holds``).
"""

import logging
from collections.abc import Callable
from collections.abc import Collection
from typing import Protocol

from oslo_config import cfg

from recovery import bus
from recovery import concurrency
from recovery import exception
from recovery.bus.wire import ENGINE_BINARY
from recovery.bus.wire import notification_event
from recovery.bus.wire import process_ended
from recovery.db.claims import Window
from recovery.db.control import Arming
from recovery.db.control import HostLoad
from recovery.engine import runner
from recovery.engine.capacity import CapacityStore
from recovery.engine.capacity import CapacityWatch
from recovery.engine.detector import Detector
from recovery.engine.gates import Gates
from recovery.engine.hardware import HardwareStore
from recovery.engine.hardware import HardwareWatch
from recovery.engine.holds import Holds
from recovery.engine.holds import HoldStore
from recovery.engine.lease import LeaseKeeper
from recovery.events import Decision
from recovery.events import EventKind
from recovery.identity import split_owner
from recovery.identity import this_process
from recovery.metrics import METRICS
from recovery.notification import Kind
from recovery.notification import Notification
from recovery.notification import Status

LOG = logging.getLogger(__name__)

# The longest the loop waits for a wake-up before looking at the store
# again (retries falling due, runs abandoned by another engine).
IDLE_WAIT = 1.0

# How the engine runs a notification it has claimed: one attempt.
Attempter = Callable[[runner.Run], runner.Attempt]


class EngineStore(runner.RunStore, CapacityStore, HoldStore, HardwareStore,
                  Protocol):
    """What the loop needs from the store: the registry of engines, the
    claims and holds, and what its runs, its capacity refresh and its
    fencing holds need."""
    def engine_seen(self, name: str, host: str, pid: int | None,
                    backend: str | None = None) -> None: ...
    def engine_gone(self, name: str) -> None: ...
    def arming(self) -> Arming: ...
    def next_runnable(self, *, resume_only: bool = False,
                      skip: Collection[str] = ()) -> Notification | None: ...
    def host_load(self, engine: str, *, live_within: float) -> HostLoad: ...
    def hold(self, item: Notification, message: str, delay: float, *,
             event: Decision | None = None) -> bool: ...
    def take(self, item: Notification, owner: str, lease: float, *,
             window: Window | None = None) -> Notification | None: ...


class Engine:
    def __init__(self, conf: cfg.ConfigOpts, store: EngineStore,
                 clock: concurrency.Clock, *, detector: Detector,
                 gates: Gates, keeper: LeaseKeeper, attempt: Attempter,
                 heartbeat: Callable[[str], None] = lambda status: None,
                 capacity: CapacityWatch | None = None,
                 holds: Holds | None = None,
                 hardware: HardwareWatch | None = None):
        """``keeper``: renews the lease of every run of this engine,
        from ``serve`` until it returns. ``capacity``: refreshes the
        failures tolerated (default: from the detector's Nova).
        ``holds``: tells the host failures fencing holds (default: by
        the failure domains the detector reads, the gates' too).
        ``hardware``: reads the hosts' health and drains the failing
        (default: from the detector's Nova and fencing)."""
        self.conf = conf
        self.store = store
        self.clock = clock
        self.gates = gates
        self._armed = True
        self.owner = this_process()
        self.detector = detector
        self.capacity = capacity or CapacityWatch(
            conf, store, detector.nova, clock, detector.name,
            busy=self.in_flight)
        self.hardware = hardware or HardwareWatch(
            conf, store, detector.nova, detector.reporter.fencing, clock,
            detector.name)
        self.holds = holds or Holds(store, clock,
                                    detector.fast.domains.of_hosts,
                                    self.owner)
        self.heartbeat = heartbeat
        self.wake = concurrency.Event()
        self._stopping = concurrency.Event()
        self._runs: dict[str, tuple[Notification, concurrency.Task]] = {}
        self._keeper = keeper
        self._attempt = attempt
        # Why this engine may no longer run on its database, once it is.
        self._refused: exception.SchemaMismatch | None = None
        self._next_report = 0.0
        # What the last claim turn left to the other engines, if anything.
        self._leaving: str | None = None

    # -- the loop ----------------------------------------------------------
    def serve(self) -> None:
        """Run until ``stop()``; then let runs in flight drain. Raises
        SchemaMismatch, once drained, when a newer release contracted the
        schema under this engine."""
        self._keeper.start()
        # The detector's probes, on their own cadence: idle unless the
        # detector gives them hosts.
        prober = concurrency.spawn(self.detector.prober.run, self._stopping)
        # The failures tolerated, every [capacity] refresh_interval.
        looker = concurrency.spawn(self.capacity.run, self._stopping)
        # The hosts' hardware health, every [host_drain] health_interval.
        reader = concurrency.spawn(self.hardware.run, self._stopping)
        try:
            while not self._stopping.is_set():
                # Cleared before looking: a wake-up during the look is
                # kept for the next turn, never lost.
                self.wake.clear()
                self._reap()
                self._detect()
                try:
                    self._report_alive()
                    self._claim()
                except exception.SchemaMismatch as exc:
                    # A newer release contracted the schema: nothing more
                    # starts here; the runs in flight drain, then the
                    # engine exits with the error.
                    LOG.error("%s. Taking no new work, and stopping", exc)
                    self._refused = exc
                    self.stop()
                except exception.StoreError as exc:
                    # Keep the loop (and the watchdog) alive, start
                    # nothing, and look again: it goes on once the
                    # database is back.
                    LOG.warning("The store is unavailable; no recovery "
                                "starts until it is back: %s", exc)
                except Exception:
                    LOG.exception("Could not claim notifications")
                self.heartbeat(self.status())
                self.wake.wait(self._idle())
            self._drain()
            self._leave()
            if self._refused is not None:
                raise self._refused
        finally:
            self._stopping.set()
            prober.wait(IDLE_WAIT)
            looker.wait(IDLE_WAIT)
            reader.wait(IDLE_WAIT)
            self._keeper.close()
            bus.stop()

    def open_bus(self) -> None:
        """Publish on the message bus if a driver is set, until ``serve``
        returns: before the API stores anything, whose events would be
        lost. A bus that cannot be loaded (a bad ``transport_url``)
        stops no recovery."""
        try:
            bus.start(self.conf, self.clock, on_dropped=self._bus_dropped)
        except Exception as exc:
            LOG.error("Notifications will not be published on the message "
                      "bus: %s", exc)

    def _bus_dropped(self, count: int) -> None:
        self.store.add_event(Decision(
            self.owner, "message bus", EventKind.BUS_DROPPED,
            f"{count} notification(s) dropped: the queue for the bus was "
            f"full (the bus down or slow)"), self.clock.now())

    def _idle(self) -> float:
        """How long the loop may wait for a wake-up: until the
        detector's next poll, at most ``IDLE_WAIT``."""
        due = self.detector.due_in()
        return IDLE_WAIT if due is None else min(IDLE_WAIT, due)

    def _detect(self) -> None:
        """Let the detector look at Nova (when it is on and a poll is
        due): what it stores is claimed in this same turn."""
        try:
            self.detector.poll()
        except exception.StoreError as exc:
            LOG.warning("detector: the store is unavailable: %s", exc)
        except Exception:
            LOG.exception("detector: unexpected error")

    def _report_alive(self) -> None:
        """Keep this engine's row in the registry ('recovery status')
        fresh, every third of a lease."""
        now = self.clock.monotonic()
        if now < self._next_report:
            return
        self.store.engine_seen(self.owner, *split_owner(self.owner),
                               backend=concurrency.backend())
        self._next_report = now + self.conf.engine.lease_seconds / 3

    def _leave(self) -> None:
        try:
            self.store.engine_gone(self.owner)
        except exception.StoreError as exc:
            LOG.warning("Could not remove this engine from the registry: "
                        "%s", exc)

    def stop(self) -> None:
        """Take no new work; runs in flight start no new instance."""
        self._stopping.set()
        self.wake.set()

    def in_flight(self) -> int:
        """Runs started and not yet reaped."""
        return len(self._runs)

    def status(self) -> str:
        if not self._runs:
            if not self._armed:
                return "disarmed: no recovery starts"
            if self._leaving:
                return f"idle, {self._leaving}"
            return "idle, waiting for notifications"
        hosts = ", ".join(sorted(n.hostname for n, _ in self._runs.values()))
        leaving = f"; {self._leaving}" if self._leaving else ""
        return f"recovering {len(self._runs)} host(s): {hosts}{leaving}"

    def _claim(self) -> None:
        group = self.conf.engine
        resume_only = not self._check_armed()
        self._leaving = None
        # Read at the turn's first new host failure, then kept up to date
        # with this engine's own claims (another engine's change who runs
        # what, not the total that the share divides); read again only
        # for a host failure stored since.
        load: HostLoad | None = None
        left: set[str] = set()
        while (len(self._runs) < group.max_concurrent_host_recoveries
               and not self._stopping.is_set()):
            item = self.store.next_runnable(resume_only=resume_only,
                                            skip=left)
            if item is None:
                return
            if item.status is not Status.RUNNING:
                if item.kind is Kind.HOST_FAILURE and group.balance_grace:
                    if load is None or item.hostname not in load.waiting:
                        load = self.store.host_load(
                            self.owner, live_within=group.lease_seconds)
                    if self._leaves(item, load, group.balance_grace):
                        # What waits behind it may still be this
                        # engine's: an instance failure, a resume. The
                        # others it leaves too are passed over at once:
                        # one look of the store, not one for each.
                        left |= {item.uuid, *load.leaving(
                            group.balance_grace)}
                        continue
                hold = self.gates.check(item)
                if hold is not None:
                    self.store.hold(item, hold.message, hold.delay,
                                    event=Decision(
                                        self.owner, item.hostname,
                                        EventKind.HELD, hold.cause))
                    continue
            sent_at = self.clock.monotonic()
            notification = self.store.take(
                item, self.owner, group.lease_seconds,
                window=self.gates.window(item))
            if notification is None:
                continue
            LOG.info("Claimed notification %s: %s of host %s, attempt %d",
                     notification.uuid, notification.event,
                     notification.hostname, notification.attempts)
            if load is not None and notification.kind is Kind.HOST_FAILURE:
                load = load.took(self.owner, notification.hostname)
            run = self.claimed(notification, sent_at, group.lease_seconds)
            self._runs[notification.uuid] = (
                notification, concurrency.spawn(self.run, run))

    def _leaves(self, item: Notification, load: HostLoad,
                grace: float) -> bool:
        """Whether this engine leaves the host failure ``item`` to the
        other live engines: it runs its share of the host recoveries
        already, and ``item`` has not waited ``grace`` seconds yet. A
        rack's hosts then spread over the engines instead of going to
        the one the API woke first; past the grace, liveness beats
        balance, and any engine with a free slot takes it (a dead
        engine stays live in the registry for a lease)."""
        mine = load.running.get(self.owner, 0)
        if (mine < load.share
                or load.waiting.get(item.hostname, 0.0) >= grace):
            return False
        if self._leaving is None:
            # Once a turn.
            self._leaving = (f"leaving {len(load.waiting)} waiting host "
                             f"failure(s) to {len(load.live) - 1} other "
                             f"engine(s)")
            LOG.info("This engine runs %d host recoveries, its share of "
                     "%d over %d live engines: %s, for up to %g s each",
                     mine, load.total, len(load.live), self._leaving,
                     grace)
        return True

    def claimed(self, notification: Notification, taken_at: float,
                seconds: float | None = None) -> runner.Run:
        """The run of ``notification``, just taken by this engine (the
        take sent at ``taken_at``, for a lease of ``seconds``): its lease
        renewed from now on."""
        if seconds is None:
            seconds = self.conf.engine.lease_seconds
        return runner.Run(self.store, notification, self.owner,
                          seconds=seconds, clock=self.clock,
                          taken_at=taken_at, keeper=self._keeper,
                          stopping=self._stopping.is_set)

    def _check_armed(self) -> bool:
        arming = self.store.arming()
        if arming.armed != self._armed:
            self._armed = arming.armed
            if arming.armed:
                LOG.warning("Armed by %s: recoveries start again",
                            arming.changed_by)
            else:
                LOG.warning("Disarmed by %s: %s. Notifications are "
                            "recorded but no recovery starts until "
                            "'recovery arm'", arming.changed_by,
                            arming.reason)
        return arming.armed

    def _reap(self) -> None:
        for uuid, (_, task) in list(self._runs.items()):
            if task.wait(0):
                del self._runs[uuid]

    def _drain(self) -> None:
        """Wait for the runs in flight, up to the graceful timeout, still
        pinging the watchdog."""
        deadline = (self.clock.monotonic()
                    + self.conf.engine.graceful_shutdown_timeout)
        while self._runs and self.clock.monotonic() < deadline:
            self.heartbeat(f"stopping: waiting for {self.status()}")
            uuid, (_, task) = next(iter(self._runs.items()))
            if task.wait(min(IDLE_WAIT, deadline - self.clock.monotonic())):
                del self._runs[uuid]
        for notification, _ in self._runs.values():
            LOG.warning("Stopping with the recovery of %s in flight; it "
                        "resumes from the journal at the next start",
                        notification.hostname)

    # -- one run -----------------------------------------------------------
    def run(self, run: runner.Run) -> None:
        """Recover the notification's host, record the outcome, and wake
        the loop: a notification may be waiting for this run's slot."""
        started = self.clock.monotonic()
        try:
            self._run(run)
        finally:
            run.close()
            self.wake.set()
            if run.notification.kind is Kind.HOST_FAILURE:
                METRICS.host_seconds.observe(
                    self.clock.monotonic() - started)

    def _run(self, run: runner.Run) -> None:
        notification = run.notification
        bus.publish(notification_event(notification, "notification.process",
                                       "start", binary=ENGINE_BINARY))
        try:
            result = self._attempt(run)
        except exception.StoreError as exc:
            LOG.error("Notification %s stops: the store failed (%s). It "
                      "resumes from its journal once the database is back",
                      notification.uuid, exc)
            return
        except Exception as exc:
            LOG.exception("Notification %s failed unexpectedly",
                          notification.uuid)
            result = runner.Attempt(Status.ERROR, f"unexpected error: "
                                                  f"{exc!r}")
        if result.status is None:
            LOG.warning("Notification %s interrupted: %s", notification.uuid,
                        result.message)
            return
        try:
            self._finish(run, result)
        except exception.RecoveryError as exc:
            LOG.error("Could not record the end of notification %s (%s); "
                      "it resumes from the journal", notification.uuid, exc)

    def _finish(self, run: runner.Run, result: runner.Attempt) -> None:
        notification = run.notification
        status, message, retry = result.status, result.message, None
        # Which attempt ended, and what comes next: for an error.
        attempt = ""
        group = self.conf.engine
        if status is Status.ERROR:
            if notification.attempts >= group.retry_max_attempts:
                status = Status.FAILED
                attempt = f"gave up after {notification.attempts} attempts"
            else:
                retry = runner.retry_delay(notification.attempts,
                                           group.retry_backoff,
                                           group.retry_backoff_max)
                attempt = (f"attempt {notification.attempts}; retry in "
                           f"{retry:g} s")
            message = f"{message} ({attempt})"
        # A host fencing holds is told by the holds, once it is recorded:
        # an ALARM once per hold, a warning at each retry.
        held = (notification.kind is Kind.HOST_FAILURE
                and isinstance(result.error, exception.FencingError))
        if not held:
            log = LOG.info if status is Status.FINISHED else LOG.error
            log("Notification %s %s: %s", notification.uuid, status.value,
                message)
        run.finish(status, message, retry_in=retry)
        if held:
            self.holds.held(notification, result.error, attempt,
                            retried=retry is not None)
        bus.publish(process_ended(notification, status, result.error
                                  or exception.RecoveryError(message)))
