"""Bring instances home: once a repaired host is back, live-migrate to it
the instances its last host failure evacuated.

Only those recovery put somewhere and that are still there move: the
host failure's journal names each instance it evacuated and where to.
One deleted since, living elsewhere, or moved or resized by anyone since
(a migration of it newer than the evacuation) stays where it is, as does
one Nova would not live-migrate. The rest go in priority order, at most
``[host_drain] max_parallel`` at once and ``max_per_host`` from or to
one host, each confirmed from its migration record, as a drain's
(``live_migration``). The host must be enabled: Nova's scheduler sends
nothing to a disabled one.
"""

from collections.abc import Sequence

from recovery import concurrency
from recovery import exception
from recovery import migratable
from recovery.census import Census
from recovery.flows.context import Env
from recovery.flows.live_migration import LIVE_STATES
from recovery.flows.live_migration import HostWatch
from recovery.flows.live_migration import LiveMigration
from recovery.flows.live_migration import Slots
from recovery.flows.live_migration import run_all
from recovery.flows.live_migration import sent
from recovery.flows.live_migration import settle
from recovery.models import Server
from recovery.results import LIVE_MIGRATION
from recovery.results import HostReport
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import StepName
from recovery.results import StepState


def _stays(env: Env, evacuated: InstanceResult,
           server: Server | None) -> str | None:
    """Why an instance the host failure evacuated stays where it is."""
    if server is None:
        return "deleted since its evacuation"
    if server.host != evacuated.dest_host:
        return (f"no longer where recovery put it ({evacuated.dest_host}): "
                f"it is on {server.host}")
    later = [m for m in env.nova.list_migrations(server.id)
             if m.id > (evacuated.migration_floor or 0)
             and m.type != "evacuation"]
    if later:
        return (f"moved or resized since its evacuation ({later[-1].type} "
                f"{later[-1].id}): left where it is")
    if server.vm_state not in LIVE_STATES or not server.idle:
        return (f"it is {server.vm_state}"
                f"{f' ({server.task_state})' if server.task_state else ''}"
                f", and Nova live-migrates only idle active and paused "
                f"instances")
    drain = env.settings.drain
    reason = migratable.blocking(server, drain.live_migratable_pci_aliases,
                                 drain.block_migration)
    return f"not live-migratable: {reason}" if reason else None


def _server(env: Env, uuid: str) -> Server | None:
    try:
        return env.nova.get_server(uuid)
    except exception.NovaNotFound:
        return None


def bring_back(env: Env, host: str, evacuated: Sequence[InstanceResult], *,
               journal: Sequence[InstanceResult] = (),
               dry_run: bool = False,
               pool_factory=concurrency.task_pool) -> HostReport:
    """Live-migrate to ``host`` what ``evacuated`` (the results of its
    last host failure) put elsewhere and is still there; return one
    result per instance. ``journal``: this bring-back's earlier runs.
    Raises ``HostNotUp`` when ``host`` is not up and enabled (but for
    ``dry_run``)."""
    report = HostReport(host, env.clock.now(), dry_run=dry_run)
    census = Census.take(env.nova, env.settings.service_down_time)
    service = census.compute(host)
    # A dry run may come before the host is back: it says what would
    # move once it is.
    if not (dry_run or census.heartbeats(service)
            and service.schedulable):
        raise exception.HostNotUp(
            f"{host} is not up and enabled ({service.state}, "
            f"{service.status}): nothing is brought back to it")
    done = {r.uuid: r for r in journal}
    selected: list[tuple[Server, InstanceResult]] = []
    for home in sorted((r for r in evacuated
                        if r.outcome is Outcome.RECOVERED and r.dest_host),
                       key=lambda r: -(r.priority or 0)):
        result = done.get(home.uuid) or InstanceResult(
            uuid=home.uuid, name=home.name, source_host=home.dest_host,
            original_state=home.final_state or "", priority=home.priority,
            method=LIVE_MIGRATION,
            project_id=home.project_id, user_id=home.user_id)
        report.instances.append(result)
        if result.outcome in (Outcome.RECOVERED, Outcome.SKIPPED):
            continue
        server = _server(env, home.uuid)
        if sent(result):
            # Followed where an earlier run sent it, unless it is gone.
            reason = None if server else "deleted since its evacuation"
        else:
            reason = _stays(env, home, server)
        if reason is not None:
            settle(env, result, Outcome.SKIPPED, reason)
            continue
        result.outcome = None
        if dry_run:
            result.outcome = Outcome.PLANNED
            result.reason = f"would be live-migrated back to {host}"
            continue
        selected.append((server, result))
    if selected:
        env.recorder.step_changed(
            StepName.BRING_BACK, StepState.RUNNING,
            f"live-migrating {len(selected)} instance(s) back to {host}",
            instances=len(selected))
        slots = Slots(env.settings.drain.max_per_host, env.clock,
                      env.settings.poll_interval)
        watch = HostWatch(env, host, "bring-back")
        run_all(env, [LiveMigration(env, server, result,
                                    source=result.source_host, dest=host,
                                    slots=slots, watch=watch)
                      for server, result in selected],
                pool_factory(env.settings.drain.max_parallel),
                f"bringing instances back to {host}")
        env.recorder.step_changed(
            StepName.BRING_BACK,
            StepState.SUCCESS if report.succeeded else StepState.FAILURE,
            report.summary())
    report.finished_at = env.clock.now()
    return report
