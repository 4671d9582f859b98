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
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import Phase
from recovery.waiting import wait_for

LOG = logging.getLogger(__name__)

# What a settled instance looks like for each original vm_state (paused
# and suspended: a resumed run finds it restored already).
SETTLED_VM_STATES = frozenset({"active", "stopped", "paused", "suspended"})
# The task_states of a rebuild, which an evacuation is.
REBUILD_TASK_STATES = frozenset({"rebuilding", "rebuild_block_device_mapping",
                                 "rebuild_spawning"})


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
            self.env.nova.lock(self.server.id, reason)
        self.result.locked_by_us = True

    def _evacuated_before(self) -> bool:
        """Whether a run before this one (a crashed engine, an earlier
        attempt) sent an evacuate that Nova acted on: then it is confirmed,
        never sent again, and its task_state is left alone."""
        if self.result.migration_floor is None:
            return False
        if not self._evacuation_started():
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
        result = self.result
        if result.migration_floor is None:
            result.migration_floor = self.watch.baseline(result.uuid)
        self._enter(Phase.EVACUATING)
        self._prepare()
        nova = self.env.nova
        attempts = 0
        while True:
            try:
                nova.evacuate(self.server.id, host)
                return
            except exception.NovaError as exc:
                if not exc.uncertain or attempts >= nova.retries:
                    raise
                if self._evacuation_started():
                    LOG.info("Evacuate of %s answered %s, but Nova acted on "
                             "it", self.server.id, exc)
                    return
                attempts += 1
                LOG.warning("Evacuate of %s failed (%s) and Nova did not act "
                            "on it; retrying", self.server.id, exc)

    def _prepare(self) -> None:
        """Make evacuable an instance Nova refuses to evacuate as it is:
        reset it to active (paused, suspended, rescued) or confirm its
        resize (resized); see ``selection``.

        Part of the evacuating phase, journaled before it: a resumed run
        reaches it only when no evacuation was acted on, and decides on
        the state Nova shows, so it never acts twice, nor over a rebuild.
        """
        prepare = decision_for(self.result.original_state).prepare
        if prepare is None:
            return
        current = self.env.nova.get_server(self.server.id)
        if current.vm_state in EVACUABLE_VM_STATES:
            if prepare == CONFIRM_RESIZE and current.task_state is not None:
                self._wait_evacuable()
            return
        LOG.info("Instance %s is %s: %s to evacuate it", self.server.id,
                 current.vm_state, prepare)
        if prepare == RESET:
            self.env.nova.reset_state(self.server.id, "active")
        elif prepare == CONFIRM_RESIZE:
            if current.task_state is None:
                self.env.nova.confirm_resize(self.server.id)
            self._wait_evacuable()

    def _wait_evacuable(self) -> None:
        """Until a confirm (run by the resize's source host) ends."""
        def reached() -> bool:
            server = self.env.nova.get_server(self.server.id)
            return (server.vm_state in EVACUABLE_VM_STATES
                    and server.task_state is None)

        wait_for(reached, what=f"instance {self.server.id} to be confirmed "
                 f"(its resize's source host confirms it)",
                 timeout=self.env.settings.state_change_timeout,
                 interval=self.env.settings.poll_interval,
                 clock=self.env.clock)

    def _evacuation_started(self) -> bool:
        """Whether Nova acted on an evacuate whose answer was lost, or
        that a run before this one sent.

        Nova sets task_state rebuilding before the evacuate call returns,
        records a migration, and moves the host when the rebuild ends. A
        task_state of another kind is a task stuck on the dead host, which
        Nova evacuates over. A migration that failed is moved under the
        floor: the next evacuate is a new attempt, confirmed on its own
        migration.
        """
        current = self.env.nova.get_server(self.server.id)
        if (current.task_state in REBUILD_TASK_STATES
                or current.host != self.server.host):
            return True
        migration = self.watch.fresh(self.server.id,
                                     self.result.migration_floor)
        if migration is not None and migration.failed:
            self.result.migration_floor = migration.id
            return False
        return migration is not None

    def _confirm(self) -> tuple[str, str]:
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
        if (self.result.original_state == "active"
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
        if current.vm_state == "error":
            raise exception.InstanceRecoveryError(
                f"evacuation done: instance is error on {current.host}"
                + (f" ({current.fault})" if current.fault else ""))
        if (current.host != self.server.host and current.task_state is None
                and current.vm_state in SETTLED_VM_STATES):
            return current
        return None

    def _restore(self, host: str, vm_state: str) -> None:
        """Bring the instance back to the state it had before the failure."""
        self._enter(Phase.RESTORING)
        self.result.dest_host = host
        wanted = final_state_for(self.result.original_state) or vm_state
        nova = self.env.nova
        uuid = self.server.id
        running = ("active", "paused", "suspended")
        if wanted == "error":
            nova.reset_state(uuid, "error")
        elif wanted in running and vm_state == "stopped":
            nova.start(uuid)
            self._wait_vm_state("active")
        elif wanted == "stopped" and vm_state == "active":
            nova.stop(uuid)
            self._wait_vm_state("stopped")
        if wanted == "paused" and vm_state != "paused":
            nova.pause(uuid)
            self._wait_vm_state("paused")
        elif wanted == "suspended" and vm_state != "suspended":
            nova.suspend(uuid)
            self._wait_vm_state("suspended")
        self.result.final_state = wanted

    def _wait_vm_state(self, vm_state: str) -> None:
        def reached() -> bool:
            server = self.env.nova.get_server(self.server.id)
            return server.vm_state == vm_state and server.task_state is None

        wait_for(reached, what=f"instance {self.server.id} to be {vm_state}",
                 timeout=self.env.settings.state_change_timeout,
                 interval=self.env.settings.poll_interval,
                 clock=self.env.clock)

    def _unlock(self) -> None:
        if not self.result.locked_by_us:
            return
        self._enter(Phase.UNLOCKING)
        try:
            self.env.nova.unlock(self.server.id)
            self.result.locked_by_us = False
        except exception.STOPS_THE_RUN:
            raise
        except exception.RecoveryError as exc:
            reason = f"left locked, unlock failed: {exc}"
            if self.result.reason:
                reason = f"{self.result.reason}; {reason}"
            self._fail(reason)
