"""A claimed notification, run through its lease and journaled in the
store: one way, for the engine and the CLI alike.

``Run`` is a claim of this process: its lease, renewed by a
``LeaseKeeper``; its ``attempt`` with the process's ``Means`` (every
Nova request checks the lease first, every change is journaled under it
by ``StoreRecorder``); its ``finish``, recorded with the event of its
status. The engine makes one for each notification it takes; the CLI's
``host-failure`` and ``host-return`` make theirs with ``by_hand``, and
their dry run plans with ``plan``.

The engine runs every kind through ``attempt``: a host recovery
(COMPUTE_HOST STOPPED) or return (STARTED), as the CLI does, and the
instance-failure (VM) and process-failure (PROCESS) flows: the same
flows, the same journal, the same per-instance results. Which flow runs
is the notification's kind, decided at intake (``FLOWS``).
"""

import contextlib
import dataclasses
import datetime
import logging
from collections.abc import Callable
from collections.abc import Iterator
from typing import Any
from typing import Protocol

from oslo_config import cfg

from recovery import bus
from recovery import concurrency
from recovery import exception
from recovery import intake
from recovery.bus.wire import owner_event
from recovery.confirmation import Confirmation
from recovery.db.claims import Holder
from recovery.engine.agreement import StoreAgreement
from recovery.engine.agreement import ViewStore
from recovery.engine.lease import Lease
from recovery.engine.lease import LeaseKeeper
from recovery.engine.lease import Renewals
from recovery.events import Decision
from recovery.events import EventKind
from recovery.events import News
from recovery.fencing import Fencing
from recovery.fencing import load_fencing
from recovery.flows import Env
from recovery.flows import EvacuationWatcher
from recovery.flows import ReservedHostStore
from recovery.flows import Settings
from recovery.flows import bring_back
from recovery.flows import drain_host
from recovery.flows import handle_process_event
from recovery.flows import placement_for_host
from recovery.flows import recover_host
from recovery.flows import restart_instance
from recovery.flows import return_host
from recovery.identity import this_process
from recovery.metrics import InstanceOutcomes
from recovery.models import parse_time
from recovery.notification import DETECTOR
from recovery.notification import Kind
from recovery.notification import Notification
from recovery.notification import Status
from recovery.notification import StepEvent
from recovery.nova import Nova
from recovery.nova import load_nova
from recovery.pacing import LagBook
from recovery.results import LIVE_MIGRATION
from recovery.results import HostReport
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import Phase
from recovery.results import Recorder
from recovery.results import StepState

LOG = logging.getLogger(__name__)


class RunStore(ReservedHostStore, ViewStore, LagBook, Protocol):
    """What a run needs from the store: its journal, its steps, its end,
    the restarts of an instance, the reserved hosts (the flows'), an
    operator's confirmation that a failed host is off, the engines'
    probe views (the evidence rule of a storage fence) and the fencing
    devices' lags."""
    def save_instance(self, uuid: str, result: InstanceResult,
                      now: datetime.datetime, holder: Holder | None = None,
                      event: Decision | None = None) -> None: ...
    def add_step_event(self, uuid: str, step: str, state: str,
                       progress: float, message: str,
                       now: datetime.datetime, holder: Holder | None = None,
                       event: Decision | None = None,
                       instances: int | None = None) -> None: ...
    def finish(self, uuid: str, status: Status, message: str, *,
               holder: Holder, retry_in: float | None = None,
               event: Decision | None = None) -> None: ...
    def journal(self, uuid: str) -> list[InstanceResult]: ...
    def last_host_failure(self, hostname: str) -> str | None: ...
    def step_events(self, uuid: str) -> list[StepEvent]: ...
    def restarts_since(self, instance_uuid: str, since: datetime.datetime,
                       excluding_uuid: str | None = None
                       ) -> list[datetime.datetime]: ...
    def confirmation(self, notification_uuid: str
                     ) -> Confirmation | None: ...


class ByHandRunStore(RunStore, intake.ByHandStore, Renewals, Protocol):
    """What an operator's run needs: a run's, the intake's claim by
    hand, and its own keeper's renewals."""


def _instance_news(result: InstanceResult) -> tuple[EventKind, str] | None:
    """What an operator is told of an instance in this state, if
    anything: its evacuation starting, and its outcome."""
    if result.outcome is Outcome.RECOVERED and result.method == (
            LIVE_MIGRATION):
        return EventKind.RECOVERED, (
            f"live-migrated from {result.source_host} to "
            f"{result.dest_host}; {result.final_state}")
    if result.outcome is Outcome.RECOVERED:
        how = f" ({result.method})" if result.method else ""
        was = ("as before" if result.final_state == result.original_state
               else f"(was {result.original_state})")
        return EventKind.RECOVERED, (
            f"evacuated from {result.source_host} to {result.dest_host}"
            f"{how}; {result.final_state} {was}")
    if result.outcome is Outcome.FAILED:
        return EventKind.FAILED, result.reason or ""
    if result.outcome is Outcome.SKIPPED:
        return EventKind.SKIPPED, result.reason or ""
    if result.outcome is None and result.phase is Phase.EVACUATING:
        return EventKind.EVACUATING, (f"evacuating from "
                                      f"{result.source_host} "
                                      f"({result.method})")
    return None


class StoreRecorder:
    """Journals every change before the flow goes on, counts each
    instance's outcome in this process's metrics, then tells
    ``listener`` (the CLI's view, if any). Each write proves
    the run's ``lease`` in its transaction: once the lease is lost it
    raises ``LeaseLost``, and the side effect it announces never
    happens.

    A change that is news to an operator (an instance's evacuation
    starting, its outcome; the host fenced, probed or isolated, as each
    step declares) is an event of ``actor`` (default: the lease's
    owner), written in the transaction of that journal entry or step,
    once per change."""

    def __init__(self, store: RunStore, lease: Lease,
                 clock: concurrency.Clock, listener: Recorder | None = None,
                 *, notification: Notification, actor: str | None = None):
        self._store = store
        self._lease = lease
        self._clock = clock
        self._listener = listener
        self._actor = actor or lease.holder.owner
        self._host = notification.hostname
        self._notification = notification
        self._outcomes = InstanceOutcomes()
        # The last news recorded of each instance, by uuid.
        self._told: dict[str, tuple[EventKind, str]] = {}

    def instance_changed(self, result: InstanceResult) -> None:
        news = _instance_news(result)
        event = None
        if news is not None and self._told.get(result.uuid) != news:
            event = Decision(self._actor, f"{result.name} ({result.uuid})",
                             *news)
        self._lease.write(self._store.save_instance, self._lease.uuid,
                          result, self._clock.now(), event=event)
        if event is not None:
            self._told[result.uuid] = news
            # The owner's: after the journal, so it tells what is true.
            bus.publish(owner_event(result, self._notification,
                                    self._clock.now()))
        self._outcomes.instance_changed(result)
        if self._listener is not None:
            self._listener.instance_changed(result)

    def step_changed(self, step: str, state: str, message: str, *,
                     news: News | None = None,
                     instances: int | None = None) -> None:
        progress = 0.0 if state == StepState.RUNNING else 1.0
        event = None
        if news is not None:
            event = Decision(self._actor, self._host, news.kind,
                             news.words or message)
        self._lease.write(self._store.add_step_event, self._lease.uuid,
                          step, StepState(state).value, progress, message,
                          self._clock.now(), event=event, instances=instances)
        if self._listener is not None:
            self._listener.step_changed(step, state, message, news=news,
                                        instances=instances)


@dataclasses.dataclass
class Attempt:
    """How an attempt ended. ``status`` is ERROR when a retry may help,
    FAILED when it cannot, None when the run was interrupted and stays
    running for a resume."""

    status: Status | None
    message: str
    report: HostReport | None = None
    error: exception.RecoveryError | None = None


@dataclasses.dataclass(frozen=True)
class Means:
    """What this process's runs act with: one Nova session (and rate
    limit) for all of them, the fencing drivers, the options (each run
    reads them as it starts), and one watcher of evacuations for every
    host recovered at once."""

    nova: Nova
    fencing: Fencing
    conf: cfg.ConfigOpts
    clock: concurrency.Clock
    watcher: EvacuationWatcher

    @classmethod
    def of(cls, conf: cfg.ConfigOpts, nova: Nova, fencing: Fencing,
           clock: concurrency.Clock) -> "Means":
        return cls(nova, fencing, conf, clock, EvacuationWatcher(clock))

    @classmethod
    def load(cls, conf: cfg.ConfigOpts, clock: concurrency.Clock,
             program: str) -> "Means":
        """From the config; raises ConfigError. Nova's logs tell which
        process sent each request: ``program`` and this process's
        name are its User-Agent."""
        nova = load_nova(conf, clock,
                         user_agent=f"{program} ({this_process()})")
        return cls.of(conf, nova, load_fencing(conf), clock)

    def settings(self) -> Settings:
        return Settings.from_conf(self.conf)


def _never() -> bool:
    return False


# The event of each end of a run.
_ENDS = {Status.FINISHED: EventKind.FINISHED, Status.ERROR: EventKind.ERROR,
         Status.FAILED: EventKind.FAILED, Status.IGNORED: EventKind.IGNORED}


class Run:
    """A notification this process has claimed, and its run.

    Made as the claim returns (``taken_at``: the monotonic time before it
    was sent), its lease is renewed by ``keeper`` until ``close``.
    ``attempt`` runs what the notification asks: every Nova request
    checks the lease first, every change is journaled under it as
    ``actor``'s (default: ``owner``), and no instance starts once
    ``stopping()``. ``finish`` records the end with the event of its
    status, as the lease's last write. ``resumed``: the claim took up an
    abandoned run.
    """

    def __init__(self, store: RunStore, notification: Notification,
                 owner: str, *, seconds: float, clock: concurrency.Clock,
                 taken_at: float, keeper: LeaseKeeper,
                 actor: str | None = None,
                 stopping: Callable[[], bool] = _never,
                 resumed: bool = False):
        self.store = store
        self.notification = notification
        self.clock = clock
        self.lease = Lease(notification, owner, seconds, clock, taken_at)
        self.actor = actor or owner
        self.stopping = stopping
        self.resumed = resumed
        self._keeper = keeper
        keeper.track(self.lease)

    def attempt(self, means: Means,
                listener: Recorder | None = None) -> Attempt:
        """Run (or continue) the notification's flow once; ``listener``
        is told of each change after it is journaled. Raises
        StoreError, which records no outcome."""
        env = Env(nova=means.nova.guarded(self.lease.check),
                  clock=self.clock, settings=means.settings(),
                  watcher=means.watcher, stopping=self.stopping,
                  recorder=StoreRecorder(
                      self.store, self.lease, self.clock, listener,
                      notification=self.notification, actor=self.actor))
        return attempt(env, self.store, self.notification, means.fencing)

    def finish(self, status: Status, message: str, *,
               retry_in: float | None = None) -> None:
        """End the run as ``status``; ``retry_in`` seconds until the next
        attempt may start. ``LeaseLost`` if this process no longer holds
        it."""
        self.lease.end(self.store.finish, self.notification.uuid, status,
                       message, retry_in=retry_in, event=Decision(
                           self.actor, self.notification.hostname,
                           _ENDS[status], message))

    def close(self) -> None:
        """The lease is renewed no more."""
        self._keeper.untrack(self.lease)


@contextlib.contextmanager
def by_hand(store: ByHandRunStore, kind: Kind, hostname: str, *,
            seconds: float, clock: concurrency.Clock,
            actor: str, options: dict[str, Any] | None = None
            ) -> Iterator[Run]:
    """An operator's run of ``hostname`` (``recovery host-failure`` or
    ``host-return``): claimed through the intake (``intake.by_hand``:
    an abandoned run resumed, or a new one recorded; refused while a
    live process recovers the host), its lease renewed by a keeper of
    its own while the block runs. Every event of it names ``actor``."""
    owner = this_process()
    sent_at = clock.monotonic()
    notification, resumed = intake.by_hand(
        store, kind=kind, hostname=hostname, owner=owner, lease=seconds,
        actor=actor, options=options)
    keeper = LeaseKeeper(store, clock, seconds)
    run = Run(store, notification, owner, seconds=seconds, clock=clock,
              taken_at=sent_at, keeper=keeper, actor=actor,
              resumed=resumed)
    keeper.start()
    try:
        yield run
    finally:
        keeper.close()


def plan(means: Means, store: ReservedHostStore, host: str,
         recorder: Recorder) -> HostReport:
    """What a recovery of ``host`` would do, with the same fencing and
    recovery methods as a run, changing nothing and recording nothing
    (``recovery host-failure --dry-run``). No notification: the plan
    names the reserved hosts, and takes none."""
    env = Env(nova=means.nova, clock=means.clock, settings=means.settings(),
              recorder=recorder, watcher=means.watcher)
    methods = placement_for_host(env, store, host, notification_uuid="")
    return recover_host(env, host, fencer=means.fencing.for_host(host),
                        dry_run=True, placement=methods)


def plan_drain(means: Means, host: str, recorder: Recorder) -> HostReport:
    """What a drain of ``host`` would do, changing nothing and recording
    nothing (``recovery host-drain --dry-run``)."""
    env = Env(nova=means.nova, clock=means.clock, settings=means.settings(),
              recorder=recorder, watcher=means.watcher)
    return drain_host(env, host, dry_run=True)


def plan_bring_back(means: Means, store: RunStore, host: str,
                    recorder: Recorder) -> HostReport:
    """What bringing ``host``'s instances back would move, changing
    nothing (``recovery host-return --bring-back --dry-run``)."""
    env = Env(nova=means.nova, clock=means.clock, settings=means.settings(),
              recorder=recorder, watcher=means.watcher)
    return bring_back(env, host, evacuated_from(store, host), dry_run=True)


def attempt(env: Env, store: RunStore, notification: Notification,
            fencing: Fencing) -> Attempt:
    """Run (or continue) what ``notification`` asks for.

    ``env.recorder`` must journal to the store (``StoreRecorder``).
    """
    try:
        return FLOWS[notification.kind](env, store, notification, fencing)
    except exception.StoreError:
        # The store failed, not the recovery: no outcome to record. The
        # run stays as it is, and resumes from its journal.
        raise
    except exception.Interrupted as exc:
        return Attempt(None, str(exc), error=exc)
    except exception.Ignored as exc:
        return Attempt(Status.IGNORED, str(exc), error=exc)
    except (exception.UnknownHost, exception.GaveUp, exception.HostNotUp,
            exception.DrainRefused, exception.HostFailed) as exc:
        return Attempt(Status.FAILED, str(exc), error=exc)
    except exception.RecoveryError as exc:
        # A host Nova still reports up may be seen down on a retry, a
        # BMC may answer, evacuations end, and Nova errors pass: each is
        # worth another attempt.
        return Attempt(Status.ERROR, str(exc), error=exc)


def _recover_host(env: Env, store: RunStore, notification: Notification,
                  fencing: Fencing) -> Attempt:
    host = notification.hostname
    # A detected failure with no fencing driver: the probe's silence is
    # its proof (the detector stored it ignored if there is no probe).
    detected = notification.origin == DETECTOR
    report = recover_host(
        env, host, fencer=fencing.for_host(host),
        liveness=env.settings.liveness_probe if detected else None,
        heartbeat=parse_time(notification.payload.get("heartbeat"))
        if detected else None,
        journal=store.journal(notification.uuid),
        placement=placement_for_host(env, store, host, notification.uuid),
        confirmed=lambda: store.confirmation(notification.uuid),
        engines=StoreAgreement(store, env.settings), lags=store)
    summary = f"{host}: {report.summary()}"
    if report.evidence:
        # Not its power: what proved it off, and on which evidence.
        summary += f" (proved off: {report.evidence})"
    if report.succeeded:
        return Attempt(Status.FINISHED, summary, report)
    failed = [r for r in report.instances if r.outcome is Outcome.FAILED]
    first = f"; {failed[0].name or failed[0].uuid}: {failed[0].reason}"
    return Attempt(Status.ERROR, summary + first, report)


def _return_host(env: Env, store: RunStore, notification: Notification,
                 fencing: Fencing) -> Attempt:
    host = notification.hostname
    back = return_host(env, host, fencing.for_host(host))
    if not notification.payload.get("bring_back"):
        return Attempt(Status.FINISHED, back)
    report = bring_back(env, host, evacuated_from(store, host),
                        journal=store.journal(notification.uuid))
    summary = f"{back}; brought back: {report.summary()}"
    return Attempt(Status.FINISHED if report.succeeded else Status.FAILED,
                   summary, report)


def evacuated_from(store: RunStore, host: str) -> list[InstanceResult]:
    """The results of ``host``'s last finished host failure (none if it
    has none)."""
    failure = store.last_host_failure(host)
    return store.journal(failure) if failure else []


def _drain_host(env: Env, store: RunStore, notification: Notification,
                fencing: Fencing) -> Attempt:
    host = notification.hostname
    report = drain_host(
        env, host, journal=store.journal(notification.uuid),
        allow_partial=bool(notification.payload.get("allow_partial")))
    summary = f"{host} drained: {report.summary()}"
    if report.succeeded:
        return Attempt(Status.FINISHED, summary, report)
    failed = [r for r in report.instances if r.outcome is Outcome.FAILED]
    # A migration that failed twice is reported, not retried by the
    # engine: the operator decides (the host is alive, nothing is lost).
    first = failed[0]
    return Attempt(Status.FAILED, f"{summary}; {first.name or first.uuid}: "
                   f"{first.reason}", report)


def _restart_instance(env: Env, store: RunStore,
                      notification: Notification,
                      fencing: Fencing) -> Attempt:
    return Attempt(Status.FINISHED, restart_instance(
        env, notification, restarts=restart_history(env, store, notification),
        steps=store.step_events(notification.uuid)))


def _handle_process_event(env: Env, store: RunStore,
                          notification: Notification,
                          fencing: Fencing) -> Attempt:
    done = handle_process_event(env, notification)
    # The detector's: the host answered its liveness probe.
    answer = notification.payload.get("liveness")
    if answer:
        done = (f"ALARM: {answer}; not a dead host, so not evacuated. "
                f"{done}: repair nova-compute on {notification.hostname}")
    return Attempt(Status.FINISHED, done)


# The flow of each kind of notification.
FLOWS: dict[Kind, Callable[[Env, RunStore, Notification, Fencing],
                           Attempt]] = {
    Kind.HOST_FAILURE: _recover_host, Kind.HOST_RETURN: _return_host,
    Kind.HOST_DRAIN: _drain_host,
    Kind.INSTANCE: _restart_instance, Kind.PROCESS: _handle_process_event}


def restart_history(env: Env, store: RunStore,
                    notification: Notification) -> list[datetime.datetime]:
    """When each other restart of the instance ``notification`` names
    started within ``[instance_failure] restart_window``, oldest first:
    what the instance-failure flow's crash-loop brake counts."""
    since = env.clock.now() - datetime.timedelta(
        seconds=env.settings.restart_window)
    return store.restarts_since(notification.payload["instance_uuid"],
                                since, excluding_uuid=notification.uuid)


def retry_delay(attempts: int, backoff: float, backoff_max: float) -> float:
    """Seconds until attempt number ``attempts + 1`` may start:
    exponential."""
    return min(backoff * 2 ** max(attempts - 1, 0), backoff_max)
