"""Live migrations, as a drain and a bring-back send them: one task per
instance, bounded per host, confirmed from Nova's own records.

Each task takes a slot on its source and its destination host (at most
``[host_drain] max_per_host`` each), journals the instance before the
request (with the newest migration id it saw: a higher one is its own),
sends one live migration, and waits for its migration record to end:
"completed" is confirmed once the server shows on the destination with
no task; anything else is tried once more, then reported. A request
whose outcome is unknown is looked for in Nova's records before any
other is sent. Nothing here ever evacuates: the hosts are alive.
"""

import logging
from collections.abc import Callable
from collections.abc import Iterable

from recovery import concurrency
from recovery import exception
from recovery.census import Census
from recovery.flows.context import Env
from recovery.metrics import METRICS
from recovery.models import Migration
from recovery.models import MigrationStatus
from recovery.models import Server
from recovery.models import TaskState
from recovery.models import VmState
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import Phase
from recovery.waiting import wait_for

LOG = logging.getLogger(__name__)

# Tries of one instance's live migration: the first, and one more.
TRIES = 2
# Seconds between two checks that a host the migrations need is alive.
HOST_CHECK = 5.0
# The vm_states Nova live-migrates.
LIVE_STATES = (VmState.ACTIVE, VmState.PAUSED)
ENDED = (MigrationStatus.COMPLETED, MigrationStatus.CANCELLED,
         MigrationStatus.ERROR, MigrationStatus.FAILED)


def settle(env: Env, result: InstanceResult, outcome: Outcome,
           reason: str) -> None:
    result.outcome, result.reason = outcome, reason
    result.finished_at = env.clock.now()
    env.recorder.instance_changed(result)


def sent(result: InstanceResult) -> bool:
    """An earlier run sent the instance's live migration: it is followed,
    not sent again, until its record says it ended."""
    return result.phase is Phase.MIGRATING


class Slots:
    """At most ``per_host`` migrations from or to each host at once. A
    task takes the slots of both its hosts together before it sends, and
    waits for them on an event, never on a fixed sleep."""

    def __init__(self, per_host: int, clock: concurrency.Clock,
                 poll: float, ahead: dict[str, int] | None = None):
        """``ahead``: more migrations than ``per_host`` from these hosts,
        left to wait in their nova-compute's queue."""
        self._per_host = per_host
        self._ahead = ahead or {}
        self._clock = clock
        self._poll = poll
        self._lock = concurrency.Lock()
        self._freed = concurrency.Event()
        self._busy: dict[str, int] = {}

    def _try(self, hosts: list[str]) -> bool:
        with self._lock:
            if any(self._busy.get(h, 0) >= self._per_host
                   + self._ahead.get(h, 0) for h in hosts):
                self._freed.clear()
                return False
            for host in hosts:
                self._busy[host] = self._busy.get(host, 0) + 1
            return True

    def take(self, hosts: Iterable[str | None]) -> list[str]:
        """The slots of ``hosts`` (None: a host the scheduler picks, not
        bounded here); returns what ``give`` takes back."""
        named = [h for h in hosts if h is not None]
        while not self._try(named):
            self._clock.wait(self._freed, self._poll)
        return named

    def give(self, hosts: list[str]) -> None:
        with self._lock:
            for host in hosts:
                self._busy[host] -= 1
            self._freed.set()


class HostWatch:
    """Whether a host the migrations need still heartbeats, asked of Nova
    at most every ``HOST_CHECK`` seconds (or poll interval, if longer)
    whatever the number of migrations in flight; ``check`` raises
    ``HostFailed`` once it does not. Nova itself takes its
    service_down_time (60 s by default) to say a host is down."""

    def __init__(self, env: Env, host: str, role: str):
        self._env = env
        self._host = host
        self._role = role
        self._lock = concurrency.Lock()
        self._next = 0.0
        self._failed: str | None = None

    def check(self) -> None:
        env = self._env
        with self._lock:
            if self._failed is None and env.clock.monotonic() >= self._next:
                self._next = env.clock.monotonic() + max(
                    HOST_CHECK, env.settings.poll_interval)
                census = Census.take(env.nova, env.settings.service_down_time)
                service = census.compute(self._host)
                if not census.heartbeats(service):
                    self._failed = census.describe(service)
        if self._failed is not None:
            raise exception.HostFailed(
                f"{self._host} failed during the {self._role} "
                f"({self._failed}): its instances are a host failure's to "
                f"recover now")


class LiveMigration:
    """One instance's live migration from ``source`` to ``dest`` (None:
    where the scheduler picks), tried at most twice."""

    def __init__(self, env: Env, server: Server, result: InstanceResult, *,
                 source: str, dest: str | None, slots: Slots,
                 watch: HostWatch):
        self.env = env
        self.server = server
        self.result = result
        self.source = source
        self.dest = dest
        self.slots = slots
        self.watch = watch

    def run(self) -> InstanceResult:
        result = self.result
        result.started_at = result.started_at or self.env.clock.now()
        reason = ""
        for attempt in range(1, TRIES + 1):
            held = self.slots.take((self.source, self.dest))
            try:
                migration = self._once()
            finally:
                self.slots.give(held)
            if isinstance(migration, exception.NovaError):
                METRICS.live_migrations.labels("lost").inc()
                reason = (f"request lost ({migration}); Nova shows no "
                          f"migration of it")
            else:
                METRICS.live_migrations.labels(str(migration.status)).inc()
                if migration.status is MigrationStatus.COMPLETED:
                    return self._confirm(migration)
                reason = self._why(migration)
            if attempt < TRIES:
                LOG.warning("Live migration of %s from %s %s; trying once "
                            "more", self.server.id, self.source, reason)
        result.phase = Phase.DONE
        settle(self.env, result, Outcome.FAILED,
               f"live migration {reason} (tried {TRIES} times)")
        return result

    def _newest(self) -> Migration | None:
        found = self.env.nova.list_live_migrations(
            instance_uuid=self.server.id)
        return max(found, key=lambda m: m.id, default=None)

    def _ours(self) -> Migration | None:
        newest = self._newest()
        floor = self.result.migration_floor or 0
        return newest if newest is not None and newest.id > floor else None

    def _once(self) -> Migration | exception.NovaError:
        """Send one live migration, or follow the one an earlier run sent,
        and wait for its record to end. A request whose answer was lost
        and that Nova shows no sign of is returned as its error: it was
        not taken, and may be sent again."""
        migration = self._ours() if sent(self.result) else None
        if migration is not None and migration.status is (
                MigrationStatus.COMPLETED):
            return migration
        lost = None
        if migration is None:
            # An earlier run's request that Nova took before its record
            # exists: the API set the task first (the conductor writes
            # the record after). It is followed, not sent again.
            if not (sent(self.result) and self._moving()):
                lost = self._send()
        elif migration.status in ENDED:
            lost = self._send()
        if lost is not None:
            return lost
        return wait_for(self._ended, what=(
            f"the live migration of {self.server.id} from {self.source} "
            f"to end"), timeout=self.env.settings.drain.migration_timeout,
            interval=self.env.settings.poll_interval, clock=self.env.clock)

    def _moving(self) -> bool:
        server = self.env.nova.get_server(self.server.id)
        return server.task_state is TaskState.MIGRATING

    def _send(self) -> exception.NovaError | None:
        """Send the request; None once Nova took it, or the error of one
        whose answer was lost and of which Nova shows nothing."""
        result = self.result
        newest = self._newest()
        result.migration_floor = newest.id if newest else 0
        result.phase = Phase.MIGRATING
        # Journaled before the request: a resumed run looks for it.
        self.env.recorder.instance_changed(result)
        try:
            self.env.nova.live_migrate(
                self.server.id, self.dest,
                self.env.settings.drain.block_migration)
        except exception.NovaConflict:
            # A request of an earlier run that reached Nova only now
            # holds the task: it is the one followed.
            if not self._moving():
                raise
        except exception.NovaError as exc:
            if not exc.in_flight:
                raise
            # Nova took it if its record shows within the window a late
            # request may still arrive in.
            try:
                wait_for(self._ours, what="its migration record",
                         timeout=self.env.settings.late_request_window,
                         interval=self.env.settings.poll_interval,
                         clock=self.env.clock)
            except exception.WaitTimeout:
                return exc
        return None

    def _ended(self) -> Migration | None:
        self.watch.check()
        migration = self._ours()
        if migration is not None and migration.status in ENDED:
            return migration
        return None

    def _why(self, migration: Migration) -> str:
        # Nova shows no fault on a server a live migration left ACTIVE:
        # its reason is in the instance's actions.
        return (f"{migration.id} to {migration.dest_compute or 'no host'} "
                f"ended {migration.status} (Nova's reason: 'openstack "
                f"server event list {self.server.id}')")

    def _confirm(self, migration: Migration) -> InstanceResult:
        """Nova says the migration completed: the server must be on its
        destination, with no task."""
        dest = migration.dest_compute

        def moved() -> Server | None:
            server = self.env.nova.get_server(self.server.id)
            return server if (server.host == dest and server.idle) else None

        server = wait_for(moved, what=f"{self.server.id} to show on {dest}",
                          timeout=self.env.settings.state_change_timeout,
                          interval=self.env.settings.poll_interval,
                          clock=self.env.clock)
        result = self.result
        result.dest_host, result.final_state = dest, server.vm_state
        result.phase = Phase.DONE
        settle(self.env, result, Outcome.RECOVERED,
               f"live-migrated from {self.source} to {dest} (migration "
               f"{migration.id})")
        return result


def run_all(env: Env, tasks: list[LiveMigration],
            pool: concurrency.TaskPool, doing: str) -> None:
    """Run ``tasks`` on ``pool``; no task starts once the process is
    stopping (its instance stays pending in the journal, for the next
    run, and the run ends ``Interrupted``). A failed host or a stop ends
    the run once every task has ended; any other error is its instance's
    failure. ``doing``: what the run does, for the interruption's
    message."""
    stopped: Exception | None = None
    for outcome in pool.run(_unless_stopping(env), tasks):
        error = outcome.error
        if isinstance(error, (exception.HostFailed,
                              *exception.STOPS_THE_RUN)):
            stopped = stopped or error
        elif error is not None:
            settle(env, outcome.item.result, Outcome.FAILED,
                   f"live migration failed: {error}")
    if stopped is not None:
        raise stopped
    if any(task.result.outcome is None for task in tasks):
        raise exception.Interrupted(f"stopped while {doing}; the rest "
                                    f"resumes from the journal")


def _unless_stopping(env: Env) -> Callable[[LiveMigration],
                                           InstanceResult]:
    def run(task: LiveMigration) -> InstanceResult:
        return task.result if env.stopping() else task.run()
    return run
