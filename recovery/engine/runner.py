"""One attempt at a notification, journaled in the store.

The CLI and the service both run a host recovery (COMPUTE_HOST STOPPED)
or a host return (STARTED) through ``attempt``: the same flows, the same
journal, the same per-instance results. The service also runs the
instance-failure (VM) and process-failure (PROCESS) flows through it.
Which flow runs is the notification's kind, decided at intake (``FLOWS``).
"""

import dataclasses
import datetime
import logging
from collections.abc import Callable

from recovery import concurrency
from recovery import exception
from recovery.db.store import Store
from recovery.engine.lease import Lease
from recovery.events import Decision
from recovery.events import EventKind
from recovery.events import News
from recovery.fencing import Fencing
from recovery.flows import Env
from recovery.flows import handle_process_event
from recovery.flows import placement_for_host
from recovery.flows import recover_host
from recovery.flows import restart_instance
from recovery.flows import return_host
from recovery.metrics import InstanceOutcomes
from recovery.models import parse_time
from recovery.notification import DETECTOR
from recovery.notification import Kind
from recovery.notification import Notification
from recovery.notification import Status
from recovery.results import HostReport
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import Phase
from recovery.results import Recorder
from recovery.results import StepState

LOG = logging.getLogger(__name__)


def _instance_news(result: InstanceResult) -> tuple[EventKind, str] | None:
    """What an operator is told of an instance in this state, if
    anything: its evacuation starting, and its outcome."""
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

    def __init__(self, store: Store, lease: Lease,
                 clock: concurrency.Clock, listener: Recorder | None = None,
                 *, notification: Notification, actor: str | None = None):
        self._store = store
        self._lease = lease
        self._clock = clock
        self._listener = listener
        self._actor = actor or lease.holder.owner
        self._host = notification.hostname
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
                          self._clock.now(), event=event)
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


def attempt(env: Env, store: Store, notification: Notification,
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
    except (exception.UnknownHost, exception.GaveUp) as exc:
        return Attempt(Status.FAILED, str(exc), error=exc)
    except exception.RecoveryError as exc:
        # A host Nova still reports up may be seen down on a retry, a
        # BMC may answer, evacuations end, and Nova errors pass: each is
        # worth another attempt.
        return Attempt(Status.ERROR, str(exc), error=exc)


def _recover_host(env: Env, store: Store, notification: Notification,
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
        placement=placement_for_host(env, store, host, notification.uuid))
    summary = f"{host}: {report.summary()}"
    if report.succeeded:
        return Attempt(Status.FINISHED, summary, report)
    failed = [r for r in report.instances if r.outcome is Outcome.FAILED]
    first = f"; {failed[0].name or failed[0].uuid}: {failed[0].reason}"
    return Attempt(Status.ERROR, summary + first, report)


def _return_host(env: Env, store: Store, notification: Notification,
                 fencing: Fencing) -> Attempt:
    return Attempt(Status.FINISHED, return_host(env, notification.hostname))


def _restart_instance(env: Env, store: Store, notification: Notification,
                      fencing: Fencing) -> Attempt:
    return Attempt(Status.FINISHED, restart_instance(
        env, notification, restarts=restart_history(env, store, notification),
        steps=store.step_events(notification.uuid)))


def _handle_process_event(env: Env, store: Store,
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
FLOWS: dict[Kind, Callable[[Env, Store, Notification, Fencing], Attempt]] = {
    Kind.HOST_FAILURE: _recover_host, Kind.HOST_RETURN: _return_host,
    Kind.INSTANCE: _restart_instance, Kind.PROCESS: _handle_process_event}


def restart_history(env: Env, store: Store,
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
