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
from recovery.flows.live_migration import LIVE_STATES
from recovery.flows.live_migration import HostWatch
from recovery.flows.live_migration import LiveMigration
from recovery.flows.live_migration import Slots
from recovery.flows.live_migration import run_all
from recovery.flows.live_migration import sent
from recovery.flows.live_migration import settle
from recovery.flows.placement import auto
from recovery.flows.priority import priority_of
from recovery.models import ComputeService
from recovery.models import Server
from recovery.models import ServiceStatus
from recovery.results import LIVE_MIGRATION
from recovery.results import HostReport
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import StepName
from recovery.results import StepState

LOG = logging.getLogger(__name__)


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
                          method=LIVE_MIGRATION,
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
        if prior.outcome is None and sent(prior):
            # Gone from the host since an earlier run sent it: its
            # migration record says whether it completed.
            server = ctx.env.nova.get_server(prior.uuid)
            ctx.selected.append((server, prior))
        elif prior.outcome is None:
            settle(ctx.env, prior, Outcome.SKIPPED,
                   f"no longer on {ctx.host}: moved by someone else")
    for server in ctx.servers:
        prior = ctx.journal.get(server.id)
        result = prior or _new_result(ctx, server)
        ctx.report.instances.append(result)
        reason = _cannot(server, ctx)
        if reason is not None and not sent(result):
            settle(ctx.env, result, Outcome.SKIPPED,
                   f"not live-migratable: {reason}")
            continue
        result.outcome = result.reason = None
        ctx.selected.append((server, result))
    ctx.selected.sort(key=lambda entry: -(entry[1].priority or 0))


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
                settle(ctx.env, result, Outcome.SKIPPED,
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
        # The host runs ``running`` at once; as many again wait in its
        # nova-compute's queue, which starts the next one the moment one
        # ends (a poll would see it later).
        running = min(env.settings.drain.max_parallel,
                      env.settings.drain.max_per_host)
        _migrate(ctx, running, pool_factory(2 * running))
    ctx.report.finished_at = env.clock.now()
    return ctx.report


def _migrate(ctx: DrainContext, running: int,
             pool: concurrency.TaskPool) -> None:
    env = ctx.env
    env.recorder.step_changed(
        StepName.DRAIN_INSTANCES, StepState.RUNNING,
        f"live-migrating {len(ctx.selected)} instance(s) from {ctx.host}",
        instances=len(ctx.selected))
    slots = Slots(env.settings.drain.max_per_host, env.clock,
                  env.settings.poll_interval, ahead={ctx.host: running})
    watch = HostWatch(env, ctx.host, "drain")
    run_all(env, [LiveMigration(env, server, result, source=ctx.host,
                                dest=ctx.destinations.get(server.id),
                                slots=slots, watch=watch)
                  for server, result in ctx.selected], pool,
            f"draining {ctx.host}")
    env.recorder.step_changed(
        StepName.DRAIN_INSTANCES,
        StepState.SUCCESS if ctx.report.succeeded else StepState.FAILURE,
        ctx.report.summary())
