"""The host-drain flow: live-migrate every instance off a host that is
still up, and leave it disabled.

1. Make sure the host is up: a drain moves running guests, and a host
   that is down is a host failure ('recovery host-failure').
2. List its instances and select them: what Nova would refuse to
   live-migrate (``migratable``), or cannot in its state, is reported
   before anything is tried.
3. Predict a destination for each from Placement (``capacity``). If some
   would find no room, refuse, naming them, unless ``allow_partial``:
   then they stay, reported.
4. Disable the host, so that nothing new lands on it.
5. Live-migrate the instances, highest restart priority first, at most
   ``[host_drain] max_parallel`` at once and ``max_per_host`` from the
   host and to each destination. Each is confirmed from Nova's migration
   record, then the server's host. One that fails is tried once more,
   then reported with Nova's reason. None is ever evacuated: the host is
   alive.

A drain is journaled like a host failure: a run that stops is continued
by the next one, which follows a migration already sent rather than
sending another. If the host stops heartbeating meanwhile, the drain
ends at once (``HostFailed``): it is a host failure now.
"""

import dataclasses
import logging
from collections.abc import Sequence

from recovery import concurrency
from recovery import exception
from recovery import migratable
from recovery.census import Census
from recovery.flows import base
from recovery.flows.capacity import Room
from recovery.flows.capacity import predict
from recovery.flows.context import Env
from recovery.flows.placement import auto
from recovery.flows.priority import priority_of
from recovery.models import ComputeService
from recovery.models import Migration
from recovery.models import MigrationStatus
from recovery.models import Server
from recovery.models import ServiceStatus
from recovery.models import VmState
from recovery.results import HostReport
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import Phase
from recovery.results import StepName
from recovery.results import StepState
from recovery.waiting import wait_for

LOG = logging.getLogger(__name__)

LIVE_STATES = (VmState.ACTIVE, VmState.PAUSED)
# Tries of one instance's live migration: the first, and one more.
TRIES = 2


@dataclasses.dataclass
class DrainContext:
    env: Env
    host: str
    report: HostReport
    allow_partial: bool
    journal: dict[str, InstanceResult]
    census: Census | None = None
    service: ComputeService | None = None
    servers: list[Server] = dataclasses.field(default_factory=list)
    # The instances to migrate, highest priority first, and where each is
    # predicted to go (None: no prediction, the scheduler picks).
    selected: list[tuple[Server, InstanceResult]] = dataclasses.field(
        default_factory=list)
    destinations: dict[str, str | None] = dataclasses.field(
        default_factory=dict)


class VerifyHostUp(base.Step[DrainContext]):
    name = StepName.VERIFY_HOST_UP

    def execute(self, ctx: DrainContext) -> str:
        env = ctx.env
        ctx.census = Census.take(env.nova, env.settings.service_down_time)
        ctx.service = ctx.census.compute(ctx.host)
        if ctx.service.forced_down or not ctx.census.heartbeats(
                ctx.service):
            raise exception.HostNotUp(
                f"{ctx.host} is not up ({ctx.census.describe(ctx.service)})"
                f": a drain live-migrates from a running host. Recover a "
                f"failed one with 'recovery host-failure {ctx.host}'")
        return f"Nova reports {ctx.host} up"


class ListInstances(base.Step[DrainContext]):
    name = StepName.LIST_INSTANCES

    def execute(self, ctx: DrainContext) -> str:
        ctx.servers = ctx.env.nova.list_servers(ctx.host)
        return f"{len(ctx.servers)} instance(s) on {ctx.host}"


def _cannot(server: Server, ctx: DrainContext) -> str | None:
    if server.vm_state not in LIVE_STATES:
        return (f"it is {server.vm_state}, and Nova live-migrates only "
                f"active and paused instances; cold-migrate it "
                f"('openstack server migrate')")
    if not server.idle:
        return (f"Nova is busy with it (task_state {server.task_state}); "
                f"drain again once that ends")
    drain = ctx.env.settings.drain
    return migratable.blocking(server, drain.live_migratable_pci_aliases,
                               drain.block_migration)


def _new_result(ctx: DrainContext, server: Server) -> InstanceResult:
    priority, _ = priority_of(server, ctx.env.settings)
    return InstanceResult(uuid=server.id, name=server.name,
                          source_host=ctx.host,
                          original_state=server.vm_state, priority=priority,
                          project_id=server.project_id,
                          user_id=server.user_id)


def select(ctx: DrainContext) -> None:
    """One result per instance: what an earlier run finished stays
    finished, what Nova would refuse is skipped with the reason, the rest
    is selected in priority order (highest first, then as listed)."""
    listed = {server.id for server in ctx.servers}
    for prior in ctx.journal.values():
        if prior.uuid in listed:
            continue
        ctx.report.instances.append(prior)
        if prior.outcome is None and _sent(prior):
            # Gone from the host since an earlier run sent it: its
            # migration record says whether it completed.
            server = ctx.env.nova.get_server(prior.uuid)
            ctx.selected.append((server, prior))
        elif prior.outcome is None:
            _settle(ctx.env, prior, Outcome.SKIPPED,
                    f"no longer on {ctx.host}: moved by someone else")
    for server in ctx.servers:
        prior = ctx.journal.get(server.id)
        result = prior or _new_result(ctx, server)
        ctx.report.instances.append(result)
        reason = _cannot(server, ctx)
        if reason is not None and not _sent(result):
            _settle(ctx.env, result, Outcome.SKIPPED,
                    f"not live-migratable: {reason}")
            continue
        result.outcome = result.reason = None
        ctx.selected.append((server, result))
    ctx.selected.sort(key=lambda entry: -(entry[1].priority or 0))


def _sent(result: InstanceResult) -> bool:
    """An earlier run sent its live migration: it is followed, not
    judged again."""
    return result.phase is Phase.MIGRATING


class CheckCapacity(base.Step[DrainContext]):
    """Where each selected instance would go, from Placement's free room
    on the enabled, up hosts of the zone. Without ``allow_partial``, a
    shortfall refuses the drain before the host is disabled."""

    name = StepName.CAPACITY_CHECK

    def execute(self, ctx: DrainContext) -> str:
        env = ctx.env
        try:
            room = Room.of(ctx.census.services, env.nova.free_room())
        except exception.RecoveryError as exc:
            LOG.warning("Capacity not checked before draining %s (%s); "
                        "Nova's scheduler decides", ctx.host, exc)
            return f"not checked ({exc}); Nova's scheduler decides"
        forecast = predict(ctx.host, ctx.selected, auto(),
                           ctx.census.services, room)
        ctx.destinations = forecast.destinations
        if forecast.short and not (ctx.allow_partial or ctx.report.dry_run):
            raise exception.DrainRefused(
                f"no room predicted for {len(forecast.short)} instance(s) "
                f"of {ctx.host}: {forecast.summary}. Nothing was changed. "
                f"Make room, or drain with --allow-partial to leave them "
                f"on the host")
        short = set(forecast.short)
        for server, result in list(ctx.selected):
            if server.id in short:
                ctx.selected.remove((server, result))
                left = ("left on the host (--allow-partial)"
                        if ctx.allow_partial else
                        "the drain would be refused without --allow-partial")
                _settle(ctx.env, result, Outcome.SKIPPED,
                        f"{left}: {result.capacity_warning}")
        return forecast.summary


class Disable(base.Step[DrainContext]):
    name = StepName.DISABLE

    def execute(self, ctx: DrainContext) -> str:
        service = ctx.service
        if service.status is ServiceStatus.DISABLED:
            why = service.disabled_reason or "no reason given"
            return f"already disabled ({why})"
        reason = ctx.env.settings.drain.disable_reason
        ctx.env.nova.disable(service, reason)
        return f"disabled: {reason}"


class Slots:
    """At most ``per_host`` migrations to each destination at once. A
    task takes its destination's slot before it sends, and waits for a
    free one on an event, never on a fixed sleep."""

    def __init__(self, per_host: int, clock: concurrency.Clock,
                 poll: float):
        self._per_host = per_host
        self._clock = clock
        self._poll = poll
        self._lock = concurrency.Lock()
        self._freed = concurrency.Event()
        self._busy: dict[str, int] = {}

    def _try(self, host: str) -> bool:
        with self._lock:
            if self._busy.get(host, 0) >= self._per_host:
                self._freed.clear()
                return False
            self._busy[host] = self._busy.get(host, 0) + 1
            return True

    def take(self, host: str | None) -> None:
        while host is not None and not self._try(host):
            self._clock.wait(self._freed, self._poll)

    def give(self, host: str | None) -> None:
        if host is None:
            return
        with self._lock:
            self._busy[host] -= 1
            self._freed.set()


class SourceWatch:
    """Whether the drained host still heartbeats, asked of Nova at most
    once per poll interval whatever the number of migrations in flight;
    ``check`` raises ``HostFailed`` once it does not."""

    def __init__(self, env: Env, host: str):
        self._env = env
        self._host = host
        self._lock = concurrency.Lock()
        self._next = 0.0
        self._failed: str | None = None

    def check(self) -> None:
        env = self._env
        with self._lock:
            if self._failed is None and env.clock.monotonic() >= self._next:
                self._next = (env.clock.monotonic()
                              + env.settings.poll_interval)
                census = Census.take(env.nova, env.settings.service_down_time)
                service = census.compute(self._host)
                if not census.heartbeats(service):
                    self._failed = census.describe(service)
        if self._failed is not None:
            raise exception.HostFailed(
                f"{self._host} failed during its drain "
                f"({self._failed}): its instances left on it are a host "
                f"failure's to recover now")


class LiveMigration:
    """One instance's live migration, tried at most twice, confirmed from
    its migration record and then from the server."""

    def __init__(self, ctx: DrainContext, server: Server,
                 result: InstanceResult, slots: Slots, watch: SourceWatch):
        self.env = ctx.env
        self.host = ctx.host
        self.server = server
        self.result = result
        self.dest = ctx.destinations.get(server.id)
        self.slots = slots
        self.watch = watch

    def run(self) -> InstanceResult:
        result = self.result
        result.started_at = result.started_at or self.env.clock.now()
        reason = ""
        for attempt in range(1, TRIES + 1):
            self.slots.take(self.dest)
            try:
                migration = self._once()
            finally:
                self.slots.give(self.dest)
            if migration.status is MigrationStatus.COMPLETED:
                return self._confirm(migration)
            reason = self._why(migration)
            if attempt < TRIES:
                LOG.warning("Live migration of %s from %s %s; trying once "
                            "more", self.server.id, self.host, reason)
        result.phase = Phase.DONE
        _settle(self.env, result, Outcome.FAILED,
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

    def _once(self) -> Migration:
        """Send one live migration (or follow the one an earlier run
        sent) and wait for its record to end."""
        result = self.result
        migration = self._ours() if _sent(result) else None
        if migration is None or migration.failed:
            newest = self._newest()
            result.migration_floor = newest.id if newest else 0
            result.phase = Phase.MIGRATING
            # Journaled before the request: a resumed run looks for it.
            self.env.recorder.instance_changed(result)
            try:
                self.env.nova.live_migrate(
                    self.server.id, self.dest,
                    self.env.settings.drain.block_migration)
            except exception.NovaError as exc:
                if not exc.in_flight:
                    raise
                self._taken_despite(exc)
        return wait_for(self._ended, what=(
            f"the live migration of {self.server.id} from {self.host} to "
            f"end"), timeout=self.env.settings.drain.migration_timeout,
            interval=self.env.settings.poll_interval, clock=self.env.clock)

    def _taken_despite(self, error: exception.NovaError) -> None:
        """The request's outcome is unknown: Nova took it if its record
        shows within the window a late request may still arrive in;
        else ``error`` stands (nothing was sent twice)."""
        try:
            wait_for(self._ours, what="its migration record",
                     timeout=self.env.settings.late_request_window,
                     interval=self.env.settings.poll_interval,
                     clock=self.env.clock)
        except exception.WaitTimeout:
            raise error from None

    def _ended(self) -> Migration | None:
        self.watch.check()
        migration = self._ours()
        if migration is not None and migration.status in (
                MigrationStatus.COMPLETED, MigrationStatus.CANCELLED,
                MigrationStatus.ERROR, MigrationStatus.FAILED):
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
        destination, in the state it had, with no task."""
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
        _settle(self.env, result, Outcome.RECOVERED,
                    f"live-migrated to {dest} (migration {migration.id})")
        return result


def _settle(env: Env, result: InstanceResult, outcome: Outcome,
            reason: str) -> None:
    result.outcome, result.reason = outcome, reason
    result.finished_at = env.clock.now()
    env.recorder.instance_changed(result)


def drain_host(env: Env, host: str, *, allow_partial: bool = False,
               dry_run: bool = False,
               journal: Sequence[InstanceResult] = (),
               pool_factory=concurrency.task_pool) -> HostReport:
    """Drain ``host``; return the report (one result per instance).

    Raises ``HostNotUp`` or ``DrainRefused`` (nothing changed),
    ``HostFailed`` when the host stops heartbeating during the drain,
    ``Interrupted`` when ``env.stopping()`` turned true, and Nova errors
    when it cannot start."""
    ctx = DrainContext(env=env, host=host, allow_partial=allow_partial,
                       report=HostReport(host, env.clock.now(),
                                         dry_run=dry_run),
                       journal={r.uuid: r for r in journal})
    base.run_steps([VerifyHostUp(), ListInstances()], ctx,
                   env.recorder.step_changed)
    select(ctx)
    base.run_steps([CheckCapacity()] if dry_run
                   else [CheckCapacity(), Disable()], ctx,
                   env.recorder.step_changed)
    if dry_run:
        for server, result in ctx.selected:
            result.outcome = Outcome.PLANNED
            result.dest_host = ctx.destinations.get(server.id)
            result.reason = ("would be live-migrated to "
                             f"{result.dest_host or 'where Nova picks'}")
    else:
        _migrate(ctx, pool_factory(min(env.settings.drain.max_parallel,
                                       env.settings.drain.max_per_host)))
    ctx.report.finished_at = env.clock.now()
    return ctx.report


def _migrate(ctx: DrainContext, pool: concurrency.TaskPool) -> None:
    env = ctx.env
    env.recorder.step_changed(
        StepName.DRAIN_INSTANCES, StepState.RUNNING,
        f"live-migrating {len(ctx.selected)} instance(s) from {ctx.host}",
        instances=len(ctx.selected))
    slots = Slots(env.settings.drain.max_per_host, env.clock,
                  env.settings.poll_interval)
    watch = SourceWatch(env, ctx.host)
    tasks = [LiveMigration(ctx, server, result, slots, watch)
             for server, result in ctx.selected]
    stopped: Exception | None = None
    for outcome in pool.run(_unless_stopping, tasks):
        error = outcome.error
        if isinstance(error, (exception.HostFailed,
                              *exception.STOPS_THE_RUN)):
            stopped = stopped or error
        elif error is not None:
            _settle(env, outcome.item.result, Outcome.FAILED,
                        f"live migration failed: {error}")
    if stopped is not None:
        raise stopped
    env.recorder.step_changed(
        StepName.DRAIN_INSTANCES,
        StepState.SUCCESS if ctx.report.succeeded else StepState.FAILURE,
        ctx.report.summary())


def _unless_stopping(task: LiveMigration) -> InstanceResult:
    """Start no migration once the process is shutting down: the
    instance stays pending in the journal, and the next run takes it."""
    if task.env.stopping():
        return task.result
    return task.run()
