"""The instance-failure flow: restart an instance whose guest died.

A VM notification names an instance whose guest crashed
(LIFECYCLE/STOPPED_FAILED), hit an I/O error (IO_ERROR/IO_ERROR_REPORT) or
stopped answering its QEMU guest agent
(QEMU_GUEST_AGENT_ERROR/STOPPED_FAILED); the intake records every other
event as ignored. Before anything in Nova
changes:

1. The crash-loop brake: an instance this flow already restarted
   ``max_restarts_per_window`` times within ``restart_window`` is not
   restarted again (``GaveUp``), and Nova is not even asked.
2. Triage on what Nova shows: a deleted instance, one in a state a person
   chose (paused, rescued, suspended, shelved, resized), one no longer on
   the notification's host (the event is stale), or one that is not
   HA-enabled is left alone (``Ignored``, with the reason). A host whose
   nova-compute is down cannot stop or start anything: an error, retried.

Then the steps, Masakari's: lock, stop (when Nova still shows the instance
active or in error: Nova syncs a crashed guest's power state only later,
and starts only a stopped instance), start, confirm ACTIVE. The lock is
lifted in a ``finally``, whatever happened, and only if it is recovery's
own: an instance someone else locked keeps that lock. An unlock that fails
is an error of the run, never swallowed.

A retry of the same notification (after an error, or a crashed engine)
finds the steps its earlier attempts journaled: an instance one of them
started, and that Nova now shows ACTIVE, is confirmed and unlocked, not
stopped and started again.
"""

import dataclasses
import datetime
import logging
from collections.abc import Sequence

from recovery import exception
from recovery.flows import base
from recovery.flows import locks
from recovery.flows.context import Env
from recovery.flows.selection import is_ha_enabled
from recovery.models import Server
from recovery.models import TaskState
from recovery.models import VmState
from recovery.notification import Notification
from recovery.notification import StepEvent
from recovery.results import StepName
from recovery.results import StepState
from recovery.waiting import wait_for

LOG = logging.getLogger(__name__)

# What Nova stops (stop accepts active and error) and starts (stopped).
RESTARTABLE_VM_STATES = frozenset({VmState.ACTIVE, VmState.STOPPED,
                                   VmState.ERROR})

# States a person (or Nova at a person's request) chose: a restart would
# undo that choice, and Nova refuses to stop or start most of them anyway.
CHOSEN_VM_STATES = {
    VmState.PAUSED: "it is paused: its memory is kept for an unpause, and "
                    "a restart would throw it away",
    VmState.RESCUED: "it is in rescue: someone is repairing it from a "
                     "rescue image, and a restart would end the rescue",
    VmState.SUSPENDED: "it is suspended: its memory is saved for a resume; "
                       "Nova neither stops nor starts a suspended instance",
    VmState.SHELVED: "it is shelved: its owner put it away on purpose; "
                     "only an unshelve brings it back",
    VmState.SHELVED_OFFLOADED: "it is shelved and offloaded: its owner put "
                               "it away on purpose; only an unshelve "
                               "brings it back",
    VmState.RESIZED: "it is resized and waits for its owner to confirm or "
                     "revert the resize; a restart (Masakari resets it to "
                     "active first) would take that choice away",
    VmState.DELETED: "it is deleted",
    # Nova's vm_state is "soft-delete".
    VmState.SOFT_DELETED: "it is soft-deleted; only a restore brings it "
                          "back",
}


@dataclasses.dataclass
class RestartContext:
    env: Env
    uuid: str
    host: str
    server: Server
    # The lock is recovery's: taken by this run, or left by an earlier one.
    locked_by_us: bool = False
    # An earlier attempt of this notification had Nova start the instance.
    started_before: bool = False
    # When a lock of this run may still reach Nova (it timed out, or its
    # connection dropped): looked for after the unlock.
    lock_in_flight_at: datetime.datetime | None = None

    @property
    def nova(self):
        return self.env.nova

    def lock_in_flight(self, error: exception.NovaError) -> None:
        """A lock attempt that may still reach Nova (``error``)."""
        self.lock_in_flight_at = self.env.clock.now()

    def refresh(self) -> Server:
        self.server = self.nova.get_server(self.uuid)
        return self.server

    def wait(self, check, what: str) -> Server:
        settings = self.env.settings
        return wait_for(check, what=what,
                        timeout=settings.instance_recovery_timeout,
                        interval=settings.poll_interval,
                        clock=self.env.clock)


def triage(server: Server, host: str, env: Env) -> str | None:
    """Why the flow leaves ``server`` alone, or None when it restarts it."""
    settings = env.settings
    if server.vm_state in CHOSEN_VM_STATES:
        return f"instance {server.id} is not restarted: " + (
            CHOSEN_VM_STATES[server.vm_state])
    if server.vm_state not in RESTARTABLE_VM_STATES:
        return (f"instance {server.id} is not restarted: vm_state "
                f"{server.vm_state!r} (only active, stopped or error "
                f"instances are)")
    if server.host != host:
        return (f"instance {server.id} is no longer on {host} (Nova shows "
                f"it on {server.host}): the event is stale")
    if not settings.process_all_instances and not is_ha_enabled(
            server, settings):
        return (f"instance {server.id} is not HA-enabled (metadata "
                f"{settings.ha_metadata_key} is not 'True') and "
                f"[instance_failure] process_all_instances is false")
    return None


class Lock(base.Step[RestartContext]):
    name = StepName.LOCK

    def execute(self, ctx: RestartContext) -> str:
        reason = ctx.env.settings.instance_lock_reason
        server = ctx.server
        held_by = locks.holder(server, reason)
        if held_by is locks.Holder.RECOVERY:
            return "already locked by an earlier run of recovery"
        if held_by is locks.Holder.SOMEONE_ELSE:
            locks.keep_theirs(server)
            return (f"locked by someone else ({server.locked_reason!r}): "
                    f"that lock is kept")
        ctx.nova.lock(ctx.uuid, reason, in_flight=ctx.lock_in_flight)
        ctx.locked_by_us = True
        return "locked"


class Stop(base.Step[RestartContext]):
    name = StepName.STOP

    def announce(self, ctx: RestartContext) -> str:
        return ("waiting for any task of Nova's on the instance to end, "
                "then stopping it if Nova still shows it running")

    def execute(self, ctx: RestartContext) -> str:
        server = ctx.wait(_idle(ctx), f"Nova's task on instance {ctx.uuid} "
                                      f"to end")
        # A task that just ended may have changed what the triage saw.
        reason = triage(server, ctx.host, ctx.env)
        if reason is not None:
            raise exception.Ignored(reason)
        if server.vm_state is VmState.STOPPED:
            return "Nova shows it stopped already"
        if server.vm_state is VmState.ACTIVE and ctx.started_before:
            return "left running: an earlier attempt started it"
        shown = server.vm_state
        try:
            ctx.nova.stop(ctx.uuid)
        except exception.NovaConflict:
            # Nova's own power-state sync may stop the crashed guest in
            # the meantime; anything else is a real refusal.
            if not _going_to(ctx, VmState.STOPPED, TaskState.POWERING_OFF):
                raise
            LOG.info("Nova is stopping instance %s itself", ctx.uuid)
        ctx.wait(_in_state(ctx, VmState.STOPPED),
                 f"instance {ctx.uuid} to stop")
        return f"stopped (Nova showed it {shown})"


class Start(base.Step[RestartContext]):
    name = StepName.START

    def execute(self, ctx: RestartContext) -> str:
        server = ctx.refresh()
        if server.vm_state is VmState.ACTIVE and ctx.started_before:
            return "already started by an earlier attempt"
        try:
            ctx.nova.start(ctx.uuid)
        except exception.NovaConflict:
            if not _going_to(ctx, VmState.ACTIVE, TaskState.POWERING_ON):
                raise
            return "someone else started it meanwhile"
        return "start accepted"


def _going_to(ctx: RestartContext, state: VmState, task: TaskState) -> bool:
    """After Nova refused a stop or a start (409): whether Nova shows the
    instance in ``state`` now, or on its way there (``task``)."""
    current = ctx.refresh()
    return current.vm_state is state or current.task_state is task


class ConfirmActive(base.Step[RestartContext]):
    name = StepName.CONFIRM_ACTIVE

    def announce(self, ctx: RestartContext) -> str:
        return f"waiting for instance {ctx.uuid} to be ACTIVE"

    def execute(self, ctx: RestartContext) -> str:
        def active() -> Server | None:
            server = ctx.refresh()
            if server.vm_state is VmState.ERROR:
                raise exception.InstanceRecoveryError(
                    f"instance {ctx.uuid} went to error while starting: "
                    f"{server.fault or 'Nova recorded no fault'}")
            if not server.idle:
                return None
            if server.vm_state is VmState.STOPPED:
                raise exception.InstanceRecoveryError(
                    f"instance {ctx.uuid} did not start: Nova shows it "
                    f"stopped again")
            return server if server.vm_state is VmState.ACTIVE else None

        server = ctx.wait(active, f"instance {ctx.uuid} to be ACTIVE")
        return f"ACTIVE on {server.host}"


STEPS = (Lock, Stop, Start, ConfirmActive)


def _idle(ctx: RestartContext):
    def check() -> Server | None:
        server = ctx.refresh()
        return server if server.idle else None
    return check


def _in_state(ctx: RestartContext, vm_state: VmState):
    def check() -> Server | None:
        server = ctx.refresh()
        if server.vm_state is vm_state and server.idle:
            return server
        return None
    return check


def restart_instance(env: Env, notification: Notification, *,
                     restarts: Sequence[datetime.datetime],
                     steps: Sequence[StepEvent]) -> str:
    """Restart the instance ``notification`` names; return what was done.

    ``restarts``: when each other restart of the instance by this flow
    started within ``[instance_failure] restart_window``, oldest first
    (the crash-loop brake counts them). ``steps``: the step events the
    earlier attempts of ``notification`` recorded.

    Raises ``GaveUp`` (crash loop, nothing asked of Nova), ``Ignored``
    (nothing to do, with the reason), or another ``RecoveryError`` (worth
    a retry) naming the step that failed.
    """
    uuid = notification.payload["instance_uuid"]
    host = notification.hostname
    settings = env.settings
    _check_crash_loop(env, restarts, uuid)
    try:
        server = env.nova.get_server(uuid)
    except exception.NovaNotFound as exc:
        raise exception.Ignored(
            f"instance {uuid} no longer exists in Nova") from exc
    ctx = RestartContext(
        env=env, uuid=uuid, host=host, server=server,
        locked_by_us=(locks.holder(server, settings.instance_lock_reason)
                      is locks.Holder.RECOVERY),
        started_before=_started_before(steps))
    failure: BaseException | None = None
    try:
        reason = triage(server, host, env)
        if reason is not None:
            raise exception.Ignored(reason)
        _check_compute_up(env, host, uuid)
        base.run_steps([step() for step in STEPS], ctx,
                       env.recorder.step_changed)
    except BaseException as exc:
        failure = exc
        raise
    finally:
        if ctx.locked_by_us and not isinstance(failure,
                                               exception.STOPS_THE_RUN):
            _unlock(ctx, failure)
    kept = ""
    if locks.holder(server, settings.instance_lock_reason) is (
            locks.Holder.SOMEONE_ELSE):
        kept = f"; its lock ({server.locked_reason!r}) is kept"
    return (f"instance {uuid} ({ctx.server.name}) restarted: ACTIVE on "
            f"{ctx.server.host}{kept}")


def _check_crash_loop(env: Env, restarts: Sequence[datetime.datetime],
                      uuid: str) -> None:
    settings = env.settings
    window = settings.restart_window
    if window <= 0:
        return
    if len(restarts) >= settings.max_restarts_per_window:
        raise exception.GaveUp(
            f"instance {uuid} was restarted {len(restarts)} times in the "
            f"last {window:g} s (the last at {restarts[-1]:%H:%M:%S} UTC; "
            f"[instance_failure] max_restarts_per_window is "
            f"{settings.max_restarts_per_window}); not restarting again: "
            f"investigate the guest")


def _check_compute_up(env: Env, host: str, uuid: str) -> None:
    """Nova stops and starts an instance through its host's nova-compute:
    with that down, the request is lost and leaves a task stuck."""
    service = env.nova.get_compute_service(host)
    if not service.is_up:
        raise exception.RecoveryError(
            f"nova-compute on {host} is {service.state}"
            f"{' (forced down)' if service.forced_down else ''}: instance "
            f"{uuid} cannot be restarted there until it is up (a host "
            f"failure recovery evacuates it if the host is dead)")


def _started_before(steps: Sequence[StepEvent]) -> bool:
    return any(event.step == Start.name
               and event.state == StepState.SUCCESS.value
               for event in steps)


def _unlock(ctx: RestartContext, failure: BaseException | None) -> None:
    """Lift recovery's lock; a failure to is an error of the run."""
    recorder = ctx.env.recorder
    recorder.step_changed(StepName.UNLOCK, StepState.RUNNING, "unlocking")
    try:
        ctx.nova.unlock(ctx.uuid)
    except exception.STOPS_THE_RUN:
        raise
    except exception.RecoveryError as exc:
        recorder.step_changed(StepName.UNLOCK, StepState.FAILURE, str(exc))
        LOG.error("Instance %s left locked: %s", ctx.uuid, exc)
        done = ("the restart failed: " + str(failure) if failure is not None
                else f"it is ACTIVE again on {ctx.server.host}")
        raise exception.InstanceRecoveryError(
            f"instance {ctx.uuid} is left locked, unlock failed: {exc}; "
            f"{done}. The next attempt lifts the lock (or run 'openstack "
            f"server unlock {ctx.uuid}')") from exc
    ctx.locked_by_us = False
    if ctx.lock_in_flight_at is not None:
        _lift_late_lock(ctx)
    recorder.step_changed(StepName.UNLOCK, StepState.SUCCESS, "unlocked")


def _lift_late_lock(ctx: RestartContext) -> None:
    """A lock of this run may reach Nova after the unlock: once it no
    longer can, look, and lift it if it is recovery's."""
    ctx.env.recorder.step_changed(
        StepName.UNLOCK, StepState.RUNNING,
        "a lock may still reach Nova: looking for it once it cannot")
    locks.wait_out(ctx.env, ctx.lock_in_flight_at, f"instance {ctx.uuid}")
    server = ctx.refresh()
    reason = ctx.env.settings.instance_lock_reason
    if locks.holder(server, reason) is locks.Holder.RECOVERY:
        LOG.warning("Instance %s: a late lock of recovery's reached Nova "
                    "after the unlock; lifting it", ctx.uuid)
        ctx.nova.unlock(ctx.uuid)
