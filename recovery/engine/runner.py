"""One attempt at a notification, journaled in the store.

The CLI and the service both run a host recovery (COMPUTE_HOST STOPPED)
or a host return (STARTED) through ``attempt``: the same flows, the same
journal, the same per-instance results. The service also runs the
instance-failure (VM) and process-failure (PROCESS) flows through it.
"""

import dataclasses
import datetime
import logging

from recovery import concurrency
from recovery import exception
from recovery.db.store import Notification
from recovery.db.store import Status
from recovery.db.store import Store
from recovery.fencing import Fencing
from recovery.flows import placement
from recovery.flows.context import Env
from recovery.flows.host_failure import recover_host
from recovery.flows.host_return import return_host
from recovery.flows.instance_failure import restart_instance
from recovery.flows.process_failure import process_failure
from recovery.results import HostReport
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import Recorder
from recovery.results import StepState

LOG = logging.getLogger(__name__)


class StoreRecorder:
    """Journals every change before the flow goes on, then tells
    ``listener`` (the CLI's progress printer, if any)."""

    def __init__(self, store: Store, notification_uuid: str,
                 clock: concurrency.Clock, listener: Recorder | None = None):
        self._store = store
        self._uuid = notification_uuid
        self._clock = clock
        self._listener = listener

    def instance_changed(self, result: InstanceResult) -> None:
        self._store.save_instance(self._uuid, result, self._clock.now())
        if self._listener is not None:
            self._listener.instance_changed(result)

    def step_changed(self, step: str, state: str, message: str) -> None:
        progress = 0.0 if state == StepState.RUNNING else 1.0
        self._store.add_step_event(self._uuid, step, StepState(state).value,
                                   progress, message, self._clock.now())
        if self._listener is not None:
            self._listener.step_changed(step, state, message)


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
    host = notification.hostname
    try:
        if notification.type == "VM":
            return Attempt(Status.FINISHED, restart_instance(
                env, store, notification))
        if notification.type == "PROCESS":
            return Attempt(Status.FINISHED, process_failure(
                env, notification))
        if notification.event == "STARTED":
            return Attempt(Status.FINISHED, return_host(env, host))
        report = recover_host(
            env, host, fencer=fencing.for_host(host),
            journal=store.journal(notification.uuid),
            placement=placement.for_host(env, store, host,
                                         notification.uuid))
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
    summary = f"{host}: {report.summary()}"
    if report.succeeded:
        return Attempt(Status.FINISHED, summary, report)
    failed = [r for r in report.instances if r.outcome is Outcome.FAILED]
    first = f"; {failed[0].name or failed[0].uuid}: {failed[0].reason}"
    return Attempt(Status.ERROR, summary + first, report)


def retry_at(attempts: int, now: datetime.datetime, backoff: float,
             backoff_max: float) -> datetime.datetime:
    """When attempt number ``attempts + 1`` may start: exponential."""
    delay = min(backoff * 2 ** max(attempts - 1, 0), backoff_max)
    return now + datetime.timedelta(seconds=delay)


class LeaseKeeper:
    """Renews the leases of this process's runs until closed, so another
    engine never takes over a run that is alive."""

    def __init__(self, store: Store, owner: str, clock: concurrency.Clock,
                 lease: float):
        self._store, self._owner = store, owner
        self._clock, self._lease = clock, lease
        self._closed = concurrency.Event()
        self._task = concurrency.spawn(self._renew_until_closed)

    def _renew_until_closed(self) -> None:
        while not self._closed.wait(self._lease / 3):
            try:
                self._store.renew(self._owner, self._clock.now(),
                                  self._lease)
            except Exception:
                LOG.exception("Could not renew the lease of %s", self._owner)

    def close(self) -> None:
        self._closed.set()
        self._task.wait()
