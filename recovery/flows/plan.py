"""The plan of a host-failure run: what a dry run reports it would do
for each instance, and which instances an earlier run left to take up
again."""

import dataclasses
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence

from recovery import exception
from recovery.fencing import HostFence
from recovery.flows import capacity
from recovery.flows import coverage
from recovery.flows import locks
from recovery.flows.context import Env
from recovery.flows.host_context import HostContext
from recovery.flows.placement import Placement
from recovery.flows.selection import plan_steps
from recovery.flows.triage import finished
from recovery.flows.triage import settle
from recovery.flows.triage import triage
from recovery.models import ComputeService
from recovery.models import Server
from recovery.results import HostReport
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import StepName
from recovery.results import StepState

Predict = Callable[[list[tuple[Server, InstanceResult]]],
                   capacity.Forecast | None]


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a recovery of a host would do: the dry run's report, and
    the forecast it was made with (None: Placement could not say).
    ``coverage``: for a host with a storage-only fencing level, whether
    that level alone covers each instance (None) or why not."""

    report: HostReport
    forecast: capacity.Forecast | None
    coverage: Mapping[str, str | None] = dataclasses.field(
        default_factory=dict)


def plan_failure(env: Env, host: str, servers: Sequence[Server],
                 services: Sequence[ComputeService], placement: Placement,
                 room: capacity.Room, fencer: HostFence | None = None
                 ) -> Plan:
    """The dry run's plan for ``host`` failing now, from listings already
    made (``servers`` on it, Nova's ``services``) and taking from
    ``room``: the failures tolerated and the simulation ask it of hosts
    that are up, for which a dry run would refuse. Asks Nova nothing;
    asks ``fencer``'s storage devices, if any, what they cover."""
    ctx = HostContext(env=env, host=host, fencer=fencer,
                      report=HostReport(host, env.clock.now(),
                                        dry_run=True),
                      placement=placement, services=tuple(services),
                      servers=list(servers))
    found: list[capacity.Forecast] = []

    def predict(selected: list[tuple[Server, InstanceResult]]
                ) -> capacity.Forecast:
        found.append(capacity.predict(host, selected, placement, services,
                                      room))
        return found[0]

    covered = dry_run(ctx, predict)
    ctx.report.finished_at = env.clock.now()
    return Plan(ctx.report, found[0], covered)


def dry_run(ctx: HostContext, predict: Predict) -> dict[str, str | None]:
    """Settle each instance of the host as PLANNED, with the steps its
    recovery would take, and where ``predict`` expects it to land; and,
    for a host with a storage-only level, whether it alone covers it
    (returned, as ``coverage.planned``)."""
    lock_reason = ctx.env.settings.lock_reason
    ctx.env.recorder.step_changed(StepName.RECOVER_INSTANCES,
                                  StepState.SUCCESS,
                                  f"dry run: {ctx.placement.describe()}")
    selected = triage(ctx, ctx.servers)
    predicted = predict(selected)
    covered = coverage.planned(ctx, selected)
    # Phases are named when there is more than one.
    phases = {result.priority_phase for _, result in selected} - {None}
    for server, result in selected:
        before, after = plan_steps(result.original_state)
        steps = [*before, f"evacuate ({ctx.placement.method})"]
        if predicted is not None and predicted.destinations[server.id]:
            steps.append(f"to {predicted.destinations[server.id]} "
                         f"(predicted)")
        steps.extend(after)
        if len(phases) > 1:
            steps.insert(0, f"phase {result.priority_phase} (priority "
                            f"{result.priority})")
        if locks.holder(server, lock_reason) is locks.Holder.SOMEONE_ELSE:
            steps.append("leave the existing lock")
        if result.reason:
            steps.append(result.reason)
        if result.capacity_warning:
            steps.append(result.capacity_warning)
        if server.id in covered:
            steps.append(coverage.note(covered[server.id]))
        settle(ctx, result, Outcome.PLANNED, ", ".join(steps))
    return covered


def left_by_earlier_runs(ctx: HostContext) -> list[Server]:
    """The instances an earlier run left unfinished that are no longer on
    the host (their evacuation went ahead), as seen from the host."""
    servers = []
    listed = {server.id for server in ctx.servers}
    for prior in list(ctx.journal.values()):
        if prior.uuid in listed:
            continue
        if finished(prior):
            ctx.report.instances.append(ctx.journal.pop(prior.uuid))
            continue
        try:
            current = ctx.env.nova.get_server(prior.uuid)
        except exception.NovaNotFound:
            ctx.journal.pop(prior.uuid)
            ctx.report.instances.append(prior)
            settle(ctx, prior, Outcome.SKIPPED, "deleted during recovery")
            continue
        # Seen from the failed host, so that confirmation sees it move.
        servers.append(dataclasses.replace(current, host=ctx.host))
    return servers
