"""The recovery of one instance: a small, explicit state machine.

lock -> evacuate -> confirm -> restore state -> unlock. The destination
comes from the run's recovery methods (``placement``): when an
evacuation ends failed with the instance still on the failed host, the
instance may try the next target.
Each phase is recorded before its side effect, so whoever listens (the CLI's
progress, the service's journal) knows exactly where the instance was.
"""

import logging

from recovery import exception
from recovery.flows import locks
from recovery.flows.context import Env
from recovery.flows.placement import Placement
from recovery.flows.selection import CONFIRM_RESIZE
from recovery.flows.selection import EVACUABLE_VM_STATES
from recovery.flows.selection import RESET
from recovery.flows.selection import decision_for
from recovery.flows.selection import final_state_for
from recovery.flows.watcher import Watch
from recovery.models import Migration
from recovery.models import Server
from recovery.models import VmState
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import Phase
from recovery.waiting import wait_for

LOG = logging.getLogger(__name__)

# What a settled instance looks like for each original vm_state (paused
# and suspended: a resumed run finds it restored already).
SETTLED_VM_STATES = frozenset({VmState.ACTIVE, VmState.STOPPED,
                               VmState.PAUSED, VmState.SUSPENDED})
# What an instance restored to these runs as: stopped, it is started first.
RUNNING_VM_STATES = frozenset({VmState.ACTIVE, VmState.PAUSED,
                               VmState.SUSPENDED})


class InstanceRecovery:
    def __init__(self, env: Env, watch: Watch, server: Server,
                 result: InstanceResult, placement: Placement):
        self.env = env
        self.watch = watch
        self.server = server
        self.result = result
        self.placement = placement

    def run(self) -> InstanceResult:
        result = self.result
        # A resumed or retried instance keeps the time it first started.
        result.started_at = result.started_at or self.env.clock.now()
        if result.phase is Phase.LOCKING and result.lock_uncertain_at is None:
            # An earlier run stopped while it locked: that lock may still
            # reach Nova. When it was sent is not known; from now on is
            # the safe side.
            result.lock_uncertain_at = self.env.clock.now()
        try:
            self._lock()
            self._restore(*self._move())
            result.outcome = Outcome.RECOVERED
        except exception.STOPS_THE_RUN:
            # Not the instance's outcome: its journal entry stays as it
            # was (the lock recorded ours), and the resumed run finishes.
            raise
        except exception.RecoveryError as exc:
            self._fail(str(exc))
        except Exception as exc:
            LOG.exception("Unexpected error recovering %s", result.uuid)
            self._fail(f"unexpected error: {exc!r}")
        self._unlock()
        result.finished_at = self.env.clock.now()
        self._enter(Phase.DONE)
        return result

    def _enter(self, phase: Phase) -> None:
        self.result.phase = phase
        self.env.recorder.instance_changed(self.result)

    def _fail(self, reason: str) -> None:
        self.result.outcome = Outcome.FAILED
        self.result.reason = reason
        LOG.error("Instance %s (%s) failed: %s", self.result.uuid,
                  self.result.name, reason)

    def _lock(self) -> None:
        reason = self.env.settings.lock_reason
        held_by = locks.holder(self.server, reason)
        if held_by is locks.Holder.SOMEONE_ELSE:
            locks.keep_theirs(self.server)
            return
        self._enter(Phase.LOCKING)
        if held_by is locks.Holder.NOBODY:
            self.env.nova.lock(self.server.id, reason,
                               in_flight=self._lock_in_flight)
        self.result.locked_by_us = True

    def _lock_in_flight(self, error: exception.NovaError) -> None:
        """A lock that may still reach Nova late, even after the unlock:
        recorded at once, so that this run (or the one that resumes it)
        looks for it once it can no longer arrive."""
        LOG.warning("Instance %s: a lock may still reach Nova (%s); the "
                    "instance is looked at again %gs from now and "
                    "unlocked if recovery's lock is on it",
                    self.result.uuid, error,
                    self.env.settings.late_request_window)
        self.result.lock_uncertain_at = self.env.clock.now()
        self.env.recorder.instance_changed(self.result)

    def _evacuated_before(self) -> bool:
        """Whether a run before this one (a crashed engine, an earlier
        attempt) sent an evacuate that Nova acted on: then it is confirmed,
        never sent again, and its task_state is left alone. One whose
        migration failed is behind us (the floor moves above it)."""
        if self.result.migration_floor is None:
            return False
        sign = self._wait_out_evacuate()
        if sign is None:
            return False
        if isinstance(sign, Migration) and sign.failed:
            self.result.migration_floor = sign.id
            return False
        LOG.info("Instance %s was already evacuated by an earlier run; "
                 "confirming it", self.result.uuid)
        return True

    def _move(self) -> tuple[str, str]:
        """Evacuate and confirm, trying the run's methods in order; an
        evacuation an earlier run sent is only confirmed."""
        if self._evacuated_before():
            return self._confirm()
        failure: exception.RecoveryError | None = None
        for method in self.placement.methods:
            self.result.method = method.name
            while (target := method.target()) is not None:
                try:
                    self._evacuate(target.host)
                    return self._confirm()
                except exception.WaitTimeout:
                    # It may still be in flight: never send another.
                    method.timed_out(target)
                    raise
                except exception.EvacuationFailed as exc:
                    LOG.warning("Instance %s: evacuation (%s) failed: %s",
                                self.server.id, target.method, exc)
                    failure = exc
                    if not method.failed(target, exc.no_valid_host):
                        break
            else:
                last = f"; last failure: {failure}" if failure else ""
                failure = exception.InstanceRecoveryError(
                    f"{method.name}: {method.why_none()}{last}")
        raise failure

    def _evacuate(self, host: str | None) -> None:
        """Send one evacuate that Nova acts on: sent again only when the
        last one is proved not to have reached Nova, or shows no sign of
        itself once it can no longer arrive (``_wait_out_evacuate``)."""
        result = self.result
        if result.migration_floor is None:
            result.migration_floor = self.watch.baseline(result.uuid)
        # Recorded (with the phase) before the evacuate is sent.
        result.evacuate_sent_at = self.env.clock.now()
        self._enter(Phase.EVACUATING)
        if self._prepare():
            self._record_send()
        nova = self.env.nova
        attempts = 0
        while True:
            try:
                nova.evacuate(self.server.id, host)
                return
            except exception.NovaError as exc:
                if not exc.uncertain:
                    raise
                if exc.maybe_acted:
                    LOG.warning("Evacuate of %s: its outcome is unknown "
                                "(%s); asking Nova whether it acted",
                                self.server.id, exc)
                    # Answered by Nova itself: what Nova shows is final.
                    sign = (self._wait_out_evacuate() if exc.in_flight
                            else self._sign_of_evacuation())
                    if sign is not None:
                        LOG.info("Evacuate of %s: Nova acted on it",
                                 self.server.id)
                        return
                if attempts >= nova.retries:
                    raise
                attempts += 1
                LOG.warning("Evacuate of %s failed (%s) and Nova did not act "
                            "on it; sending it again (%d/%d)",
                            self.server.id, exc, attempts, nova.retries)
                self.env.clock.sleep(min(0.5 * 2 ** attempts, 5.0))
                self._record_send()

    def _record_send(self) -> None:
        """The evacuate about to be sent, in the journal before it is."""
        self.result.evacuate_sent_at = self.env.clock.now()
        self.env.recorder.instance_changed(self.result)

    def _wait_out_evacuate(self) -> Migration | Server | None:
        """A sign that Nova acted on the last evacuate sent, whose outcome
        is unknown: waited for until that evacuate can no longer reach
        Nova (``late_request_window`` after it was sent), then None.

        A request held in a load balancer, or answered too late, may
        reach Nova long after its timeout, and Nova 34 accepts a second
        evacuate of an instance that is already being rebuilt: only this
        wait keeps two rebuilds from racing. Nothing shown yet is no
        proof before the window has passed.
        """
        settings, clock = self.env.settings, self.env.clock
        sent = self.result.evacuate_sent_at
        if sent is None:
            # A journal entry from before 0011: when is not known.
            sent = self.result.evacuate_sent_at = clock.now()
        remaining = self.env.late_request_left(sent)
        sign = self._sign_of_evacuation()
        if sign is not None or remaining <= 0:
            return sign
        LOG.warning("Instance %s: no sign yet of the evacuate sent at %s; "
                    "it may still reach Nova, so none is sent again for "
                    "%.0fs ([nova] timeout + late_request_margin)",
                    self.result.uuid, sent.isoformat(), remaining)
        try:
            return wait_for(
                self._sign_of_evacuation,
                what=f"a sign of the evacuate of {self.result.uuid}",
                timeout=remaining,
                interval=max(settings.poll_interval,
                             settings.late_request_window / 10),
                clock=clock)
        except exception.WaitTimeout:
            return None

    def _sign_of_evacuation(self) -> Migration | Server | None:
        """What shows Nova acted on an evacuate of this recovery: its
        newest evacuation migration above the floor, else the instance
        rebuilding or on another host; None when nothing does.

        The migrations are asked for by instance, with no
        ``changes-since``: Nova lists a migration it has just accepted
        only then (it has no ``updated_at`` yet). The server is read
        after that query, so an evacuate accepted in between shows in
        the read. A task_state of another kind is a task stuck on the
        dead host, which Nova evacuates over.
        """
        nova, floor = self.env.nova, self.result.migration_floor
        newest = max((m for m in nova.list_evacuations(
            instance_uuid=self.server.id) if m.id > floor),
            key=lambda m: m.id, default=None)
        if newest is not None:
            return newest
        current = nova.get_server(self.server.id)
        if current.rebuilding or current.host != self.server.host:
            return current
        return None

    def _prepare(self) -> bool:
        """Make evacuable an instance Nova refuses to evacuate as it is:
        reset it to active (paused, suspended, rescued) or confirm its
        resize (resized); see ``selection``.

        Part of the evacuating phase, journaled before it: a resumed run
        reaches it only when no evacuation was acted on, and decides on
        the state Nova shows, so it never acts twice, nor over a rebuild.
        Returns whether it acted or waited: the evacuate goes later than
        the phase's record says.
        """
        prepare = decision_for(self.result.original_state).prepare
        if prepare is None:
            return False
        current = self.env.nova.get_server(self.server.id)
        if current.vm_state in EVACUABLE_VM_STATES:
            if prepare == CONFIRM_RESIZE and not current.idle:
                self._wait_evacuable()
                return True
            return False
        LOG.info("Instance %s is %s: %s to evacuate it", self.server.id,
                 current.vm_state, prepare)
        if prepare == RESET:
            self.env.nova.reset_state(self.server.id, VmState.ACTIVE)
        elif prepare == CONFIRM_RESIZE:
            if current.idle:
                self.env.nova.confirm_resize(self.server.id)
            self._wait_evacuable()
        return True

    def _wait_evacuable(self) -> None:
        """Until a confirm (run by the resize's source host) ends."""
        def reached() -> bool:
            server = self.env.nova.get_server(self.server.id)
            return server.vm_state in EVACUABLE_VM_STATES and server.idle

        wait_for(reached, what=f"instance {self.server.id} to be confirmed "
                 f"(its resize's source host confirms it)",
                 timeout=self.env.settings.state_change_timeout,
                 interval=self.env.settings.poll_interval,
                 clock=self.env.clock)

    def _confirm(self) -> tuple[str, VmState]:
        """Wait for the evacuation to end: the instance's new host and its
        vm_state there. Raise if it failed.

        A migration "done" is enough for an instance evacuated ACTIVE:
        nova-compute saves the instance on its destination, settled,
        before it marks the migration done (both under its resource
        tracker's lock), and under the facade's microversion its vm_state
        there is known. So the shared poll confirms it, with no read of
        its own. ACTIVE with no task_state alone is never enough: Nova
        sets it a moment before it moves the host.
        """
        self._enter(Phase.CONFIRMING)
        migration = self.watch.ended(
            self.server.id, self.result.migration_floor,
            timeout=self.env.settings.evacuation_timeout,
            what=f"instance {self.server.id} to come up on another host")
        if migration.failed:
            self._evacuation_failed(migration)
        if (VmState(self.result.original_state) is VmState.ACTIVE
                and migration.dest_compute not in (None, self.server.host)):
            return (migration.dest_compute,
                    self.env.nova.evacuated_active_vm_state)
        # Any other state is read: its restore depends on it.
        current = wait_for(
            self._settled_server,
            what=f"instance {self.server.id} to settle on "
                 f"{migration.dest_compute}",
            timeout=self.env.settings.state_change_timeout,
            interval=self.env.settings.poll_interval, clock=self.env.clock)
        return current.host, current.vm_state

    def _evacuation_failed(self, migration: Migration) -> None:
        current = self.env.nova.get_server(self.server.id)
        what = (f"evacuation {migration.status}: instance is "
                f"{current.vm_state} on {current.host}")
        if current.fault:
            what += f" ({current.fault})"
        if current.host == self.server.host:
            # Still on the failed host: the next evacuate is a new one.
            self.result.migration_floor = migration.id
            raise exception.EvacuationFailed(
                what, no_valid_host="No valid host" in (current.fault or ""))
        raise exception.InstanceRecoveryError(what)

    def _settled_server(self) -> Server | None:
        """The instance once it has moved and settled; raise if it ended
        in error."""
        current = self.env.nova.get_server(self.server.id)
        if current.vm_state is VmState.ERROR:
            raise exception.InstanceRecoveryError(
                f"evacuation done: instance is error on {current.host}"
                + (f" ({current.fault})" if current.fault else ""))
        if (current.host != self.server.host and current.idle
                and current.vm_state in SETTLED_VM_STATES):
            return current
        return None

    def _restore(self, host: str, vm_state: VmState) -> None:
        """Bring the instance back to the state it had before the failure."""
        self._enter(Phase.RESTORING)
        self.result.dest_host = host
        wanted = final_state_for(self.result.original_state) or vm_state
        nova = self.env.nova
        uuid = self.server.id
        if wanted == VmState.ERROR:
            nova.reset_state(uuid, VmState.ERROR)
        elif wanted in RUNNING_VM_STATES and vm_state == VmState.STOPPED:
            nova.start(uuid)
            self._wait_vm_state(VmState.ACTIVE)
        elif wanted == VmState.STOPPED and vm_state == VmState.ACTIVE:
            nova.stop(uuid)
            self._wait_vm_state(VmState.STOPPED)
        if wanted == VmState.PAUSED and vm_state != VmState.PAUSED:
            nova.pause(uuid)
            self._wait_vm_state(VmState.PAUSED)
        elif (wanted == VmState.SUSPENDED
              and vm_state != VmState.SUSPENDED):
            nova.suspend(uuid)
            self._wait_vm_state(VmState.SUSPENDED)
        self.result.final_state = wanted

    def _wait_vm_state(self, vm_state: VmState) -> None:
        def reached() -> bool:
            server = self.env.nova.get_server(self.server.id)
            return server.vm_state is vm_state and server.idle

        wait_for(reached, what=f"instance {self.server.id} to be {vm_state}",
                 timeout=self.env.settings.state_change_timeout,
                 interval=self.env.settings.poll_interval,
                 clock=self.env.clock)

    def _unlock(self) -> None:
        """Lift our lock. If that fails, the lock stays ours (the
        journal says so): the run's lock sweep looks at the instance when
        the run ends, lifts the lock if it is still there, and only then
        reports it left locked (an unlock whose answer was lost may well
        have reached Nova)."""
        if not self.result.locked_by_us:
            return
        self._enter(Phase.UNLOCKING)
        try:
            self.env.nova.unlock(self.server.id)
            self.result.locked_by_us = False
        except exception.STOPS_THE_RUN:
            raise
        except exception.RecoveryError as exc:
            LOG.warning("Instance %s: unlock failed (%s); looked at again "
                        "when the run ends", self.result.uuid, exc)
