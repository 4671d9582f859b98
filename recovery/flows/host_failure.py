"""The host-failure flow: isolate a dead host, then recover its instances.

1. Make sure the host is really down: refuse if Nova still hears from it,
   unless a fencing driver powers it off (and verifies it is Off) first.
   Then take it out of scheduling: force-down and disable, in one
   request.
2. List its instances after it is isolated, so nothing new lands between
   the listing and the disable; select them.
3. Recover each selected instance on a pool of
   ``host_failure_recovery_threads`` tasks, to the destinations its
   recovery method gives (``placement``), highest restart priority
   first; with ``priority_phases``, a priority's phase starts once the
   one before it has finished, or has run for ``phase_timeout``
   (``priority``).
4. List the host again and recover what appeared in the meantime.
5. Report one result per instance.

A run may continue an earlier one from its journal: finished instances
are kept, the others are reconciled with Nova and never evacuated twice.
"""

import dataclasses
import datetime
import logging
import re
from collections.abc import Callable
from collections.abc import Sequence

from recovery import concurrency
from recovery import exception
from recovery.census import Census
from recovery.events import EventKind
from recovery.events import News
from recovery.fencing import DeviceAttempt
from recovery.fencing import HostFence
from recovery.flows import base
from recovery.flows import capacity
from recovery.flows import locks
from recovery.flows.context import Env
from recovery.flows.instance import InstanceRecovery
from recovery.flows.placement import Placement
from recovery.flows.placement import auto
from recovery.flows.priority import Phases
from recovery.flows.priority import priority_of
from recovery.flows.selection import order_for_recovery
from recovery.flows.selection import plan_steps
from recovery.flows.selection import skip_reason
from recovery.flows.watcher import Watch
from recovery.models import ComputeService
from recovery.models import Server
from recovery.probe import Probe
from recovery.results import HostReport
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import StepState
from recovery.waiting import wait_for

LOG = logging.getLogger(__name__)

# Listings of the host after the first one; an instance still appearing
# after that many rounds is reported, not chased forever.
MAX_RELISTS = 3


@dataclasses.dataclass
class HostContext:
    env: Env
    host: str
    fencer: HostFence | None
    report: HostReport
    # The probe whose silence proves the host off (no fencer), if any.
    liveness: Probe | None = None
    # The detector's: the heartbeat the failure was judged on. A newer
    # one proves the host alive.
    heartbeat: datetime.datetime | None = None
    placement: Placement = dataclasses.field(default_factory=auto)
    service: ComputeService | None = None
    # Every Nova service as the last census saw it: the capacity
    # forecast reads the other hosts there instead of asking again.
    services: tuple[ComputeService, ...] = ()
    forced_down_by_us: bool = False
    disabled_by_us: bool = False
    servers: list[Server] = dataclasses.field(default_factory=list)
    # Earlier runs' results not yet taken up by this run, by instance.
    journal: dict[str, InstanceResult] = dataclasses.field(
        default_factory=dict)
    # The 1-based phase of each restart priority; a resumed run starts
    # from its journal's, so each instance keeps its phase.
    phase_of: dict[int, int] = dataclasses.field(default_factory=dict)


class VerifyHostDown(base.Step[HostContext]):
    """Proceed only on a host Nova no longer hears from, or one a fencing
    driver is about to power off. A host that heartbeats may run its
    guests: evacuating it would run each of them twice.

    A forced-down service whose last heartbeat is younger than
    service_down_time (a run resumed moments after it forced the host
    down) is watched until that heartbeat is old enough, as Nova itself
    would; a newer heartbeat meanwhile proves the host alive.

    A failure the detector saw is judged on one heartbeat: one newer than
    it proves the host alive, and nothing is fenced (the fast path fails
    a host before Nova calls it down, so this is its last check)."""

    name = "verify-host-down"

    def execute(self, ctx: HostContext) -> str | None:
        census = self._census(ctx)
        ctx.service = census.compute(ctx.host)
        ctx.services = census.services
        last = ctx.service.updated_at
        if ctx.heartbeat is not None and last and last > ctx.heartbeat:
            raise exception.HostAlive(
                f"nova-compute on {ctx.host} heartbeated at "
                f"{last:%H:%M:%S} UTC, after the heartbeat of "
                f"{ctx.heartbeat:%H:%M:%S} UTC that its failure was "
                f"detected on: the host is alive. Not fenced, not "
                f"evacuated")
        if ctx.fencer is not None or not census.heartbeats(ctx.service):
            return None
        if not ctx.service.forced_down:
            raise self._refusal(ctx, census)
        first = ctx.service.updated_at
        settings = ctx.env.settings

        def stale() -> bool:
            census = self._census(ctx)
            ctx.service = census.compute(ctx.host)
            ctx.services = census.services
            if ctx.service.updated_at != first:
                raise self._refusal(ctx, census)
            return not census.heartbeats(ctx.service)

        wait_for(stale, what=f"the last heartbeat of {ctx.host} to be "
                             f"older than service_down_time",
                 timeout=settings.service_down_time,
                 interval=settings.poll_interval, clock=ctx.env.clock)
        return "no heartbeat for service_down_time"

    @staticmethod
    def _census(ctx: HostContext) -> Census:
        return Census.take(ctx.env.nova, ctx.env.settings.service_down_time)

    @staticmethod
    def _refusal(ctx: HostContext, census: Census) -> exception.HostNotDown:
        return exception.HostNotDown(
            f"Nova still hears from the compute service of {ctx.host} "
            f"({census.describe(ctx.service)}): it still heartbeats, so "
            f"its guests may still be running. Refusing to evacuate it. "
            f"Wait until Nova reports it down, or configure a fencing "
            f"driver for it ([fencing]) so that recovery powers it off "
            f"first.")


class Fence(base.Step[HostContext]):
    """Prove the host off: its fencing levels in order, until every
    device of one has (a power-off read back Off, a kdump message).
    Each device's attempt is an event. Nothing is forced down or
    evacuated unless this succeeds."""

    name = "fence"
    news = {StepState.SUCCESS: News(EventKind.FENCED),
            StepState.FAILURE: News(EventKind.FENCE_FAILED)}

    def announce(self, ctx: HostContext) -> str:
        return ctx.fencer.describe()

    def execute(self, ctx: HostContext) -> str:
        def tell(attempt: DeviceAttempt) -> None:
            ctx.env.recorder.step_changed(
                self.name, StepState.RUNNING, attempt.describe(),
                news=News(EventKind.FENCE_ATTEMPT))

        try:
            return ctx.fencer.power_off(ctx.env.clock, tell)
        except exception.FencingError as exc:
            LOG.error("ALARM: %s could not be proved off: %s. Nothing is "
                      "forced down or evacuated, so its instances stay "
                      "down until it is: repair its BMC, or make sure it "
                      "is off and run 'recovery host-failure %s'",
                      ctx.host, exc, ctx.host)
            # The run's message names the host, as the alarm does.
            raise type(exc)(f"{ctx.host} could not be proved off: "
                            f"{exc}") from exc


class ProbeSilent(base.Step[HostContext]):
    """For a host proved off only by its liveness probe's silence (a
    detected failure, with no fencing driver): probe again, just before
    anything changes in Nova. A host that answers now may run its guests,
    and is not evacuated."""

    name = "liveness-probe"
    news = {StepState.SUCCESS: News(EventKind.PROBE_SILENT),
            StepState.FAILURE: News(EventKind.PROBE_ANSWERED)}

    def announce(self, ctx: HostContext) -> str:
        return f"probing {ctx.liveness.describe(ctx.host)}"

    def execute(self, ctx: HostContext) -> str:
        answer = ctx.liveness.answer(ctx.host)
        if answer is not None:
            raise exception.HostNotDown(
                f"{answer}: it may still run its guests, so it is not "
                f"evacuated")
        return f"no answer on {ctx.liveness.describe(ctx.host)}"


class ForceDown(base.Step[HostContext]):
    """Force the service down, so Nova allows evacuation at once instead
    of after service_down_time, and disable it in the same request (one
    PUT instead of two): the disable that follows then has nothing left
    to send. Nova saves both before it would ask the compute about the
    disable, and skips that for a forced-down service, so the order
    force-down first is kept within the one request."""

    name = "force-down"
    news = {StepState.REVERTED: News(
        EventKind.UNDONE, "force-down undone: a later step failed")}

    def execute(self, ctx: HostContext) -> None:
        nova, settings = ctx.env.nova, ctx.env.settings
        if not ctx.service.forced_down:
            disable = not ctx.service.is_disabled
            answer = nova.isolate(
                ctx.service, settings.disable_reason if disable else None)
            ctx.forced_down_by_us = True
            ctx.disabled_by_us = disable
            ctx.service = dataclasses.replace(
                ctx.service, status=answer.status,
                disabled_reason=answer.disabled_reason)
            if answer.is_down:
                return
        wait_for(lambda: nova.get_compute_service(ctx.host).is_down,
                 what=f"Nova to report {ctx.host} down",
                 timeout=settings.state_change_timeout,
                 interval=settings.poll_interval, clock=ctx.env.clock)

    def rollback(self, ctx: HostContext, exc: BaseException) -> None:
        if ctx.forced_down_by_us:
            ctx.env.nova.force_down(ctx.service, False)


class Disable(base.Step[HostContext]):
    """Take the host out of scheduling, with a reason operators can read:
    sent here only for a host someone else had forced down (force-down's
    request disables the others). Force-down comes first: newer Nova may
    wait on the node for a disable."""

    name = "disable"
    # The isolation is done: said once, for both steps.
    news = {StepState.SUCCESS: News(
                EventKind.ISOLATED,
                "forced down and disabled in Nova: out of scheduling, and "
                "its instances may be evacuated"),
            StepState.REVERTED: News(
                EventKind.UNDONE, "disable undone: a later step failed")}

    def execute(self, ctx: HostContext) -> None:
        if not ctx.service.is_disabled:
            ctx.env.nova.disable(ctx.service,
                                 ctx.env.settings.disable_reason)
            ctx.disabled_by_us = True
            ctx.service = dataclasses.replace(
                ctx.service, status="disabled",
                disabled_reason=ctx.env.settings.disable_reason)

    def rollback(self, ctx: HostContext, exc: BaseException) -> None:
        if ctx.disabled_by_us:
            ctx.env.nova.enable(ctx.service)


class ListInstances(base.Step[HostContext]):
    name = "list-instances"

    def execute(self, ctx: HostContext) -> None:
        ctx.servers = ctx.env.nova.list_servers(ctx.host)


PoolFactory = Callable[[int], concurrency.TaskPool]

# The step that evacuates the instances, as the store and the API show it.
RECOVER_INSTANCES = "recover-instances"
# A priority phase ran past phase_timeout and the next one started.
PHASE_TIMEOUT = "phase-timeout"
# Recovery's locks still on the run's instances are lifted.
RELEASE_LOCKS = "release-locks"
DONE_OUTCOMES = frozenset({Outcome.RECOVERED, Outcome.SKIPPED})
# The count in the recover-instances step's message as it starts.
_ANNOUNCED = re.compile(r"(\d+) instance\(s\) on ")


def instances_announced(step: str, state: str, message: str) -> int | None:
    """The ``instances`` a step change told the run's recorder, read back
    from the store, which keeps the message only: how many instances
    recover-instances says it starts on (None for any other change)."""
    if step != RECOVER_INSTANCES or state != StepState.RUNNING:
        return None
    found = _ANNOUNCED.match(message)
    return int(found[1]) if found else None


def _finished(prior: InstanceResult) -> bool:
    """Whether an earlier run finished the instance: its outcome is final
    and our lock no longer holds it (a run can end between recording the
    outcome and the unlock; the next one unlocks it)."""
    return prior.outcome in DONE_OUTCOMES and not prior.locked_by_us


def recover_host(env: Env, host: str, *, fencer: HostFence | None = None,
                 liveness: Probe | None = None,
                 heartbeat: datetime.datetime | None = None,
                 dry_run: bool = False,
                 pool_factory: PoolFactory = concurrency.task_pool,
                 journal: Sequence[InstanceResult] = (),
                 placement: Placement | None = None) -> HostReport:
    """Recover every instance of a failed host; return the report.

    ``journal`` holds the results of earlier runs of the same recovery (a
    crashed engine, an earlier attempt): what they finished is kept, what
    they left in flight or failed is reconciled with Nova and finished.
    ``placement`` holds the recovery methods (default: auto).
    ``liveness``: a probe whose silence proves the host off when there is
    no ``fencer`` (a detected failure); run just before the isolation.
    ``heartbeat``: the one a detected failure was judged on; a newer one
    ends the run with ``HostAlive``, nothing changed.

    Raises ``HostNotDown`` (nothing changed in Nova) when the host may be
    alive and there is no ``fencer`` (or it answers ``liveness``),
    ``FencingError`` (nothing changed in
    Nova) when fencing fails, ``UnknownHost`` or a Nova error when it
    cannot start, and
    ``Interrupted`` when ``env.stopping()`` turned true. If the isolation
    or the first listing fails, what it changed is undone.
    """
    ctx = HostContext(env=env, host=host, fencer=fencer, liveness=liveness,
                      heartbeat=heartbeat,
                      report=HostReport(host, env.clock.now(),
                                        dry_run=dry_run),
                      placement=placement or auto(),
                      journal={r.uuid: r for r in journal})
    for prior in journal:
        if prior.priority is not None and prior.priority_phase is not None:
            ctx.phase_of.setdefault(prior.priority, prior.priority_phase)
    if fencer is not None:
        proof = [Fence()]
    elif liveness is not None:
        proof = [ProbeSilent()]
    else:
        proof = []
    isolation = [] if dry_run else [*proof, ForceDown(), Disable()]
    base.run_steps([VerifyHostDown(), *isolation, ListInstances()], ctx,
                   env.recorder.step_changed)
    if dry_run:
        if fencer is not None:
            env.recorder.step_changed(Fence.name, StepState.SUCCESS,
                                      f"dry run: would {fencer.describe()}")
        elif liveness is not None:
            env.recorder.step_changed(
                ProbeSilent.name, StepState.SUCCESS,
                f"dry run: would probe {liveness.describe(host)}")
        _plan(ctx, lambda selected: capacity.forecast(
            ctx.env, ctx.host, selected, ctx.placement, ctx.services))
    else:
        _recover_instances(ctx, pool_factory(env.settings.threads))
    ctx.report.finished_at = env.clock.now()
    return ctx.report


def _new_result(ctx: HostContext, server: Server) -> InstanceResult:
    result = InstanceResult(uuid=server.id, name=server.name,
                            source_host=ctx.host,
                            original_state=server.vm_state)
    ctx.report.instances.append(result)
    return result


def _settle(ctx: HostContext, result: InstanceResult, outcome: Outcome,
            reason: str | None) -> None:
    result.outcome, result.reason = outcome, reason
    ctx.env.recorder.instance_changed(result)


def _triage(ctx: HostContext,
            servers: list[Server]) -> list[tuple[Server, InstanceResult]]:
    """Record a result for each server; settle the skipped ones and return
    the others, in recovery order. A server an earlier run finished keeps
    its result; one it left in flight or failed is taken up again with its
    journal entry, whose original state predates any reset of ours."""
    settings = ctx.env.settings
    entries = []
    for server in order_for_recovery(servers, settings):
        prior = ctx.journal.pop(server.id, None)
        priority, note = priority_of(server, settings)
        if prior is not None and prior.priority is not None:
            priority, note = prior.priority, None
        entries.append((server, prior, priority, note))
    # Highest priority first; within one, the order above (stable sort).
    entries.sort(key=lambda entry: -entry[2])
    selected = []
    for server, prior, priority, note in entries:
        if prior is not None and _finished(prior):
            ctx.report.instances.append(prior)
        elif prior is not None:
            prior.outcome = prior.reason = None
            prior.priority = priority
            ctx.report.instances.append(prior)
            selected.append((server, prior))
        elif reason := skip_reason(server, settings):
            result = _new_result(ctx, server)
            result.priority = priority
            _settle(ctx, result, Outcome.SKIPPED, reason)
        else:
            result = _new_result(ctx, server)
            result.priority = priority
            if note:
                # Said once: each instance is triaged once per run.
                LOG.warning("Instance %s (%s): %s", server.id, server.name,
                            note)
                result.reason = note
            selected.append((server, result))
    _number_phases(ctx, [result for _, result in selected])
    selected.sort(key=lambda entry: entry[1].priority_phase or 0)
    return selected


def _number_phases(ctx: HostContext, results: list[InstanceResult]) -> None:
    """Give each result its phase: the one its journal entry holds, else
    its priority's; a priority new to the run gets the next number, the
    highest first. None without priority_phases."""
    if not ctx.env.settings.priority_phases:
        for result in results:
            result.priority_phase = None
        return
    new = {r.priority for r in results if r.priority_phase is None}
    for priority in sorted(new - ctx.phase_of.keys(), reverse=True):
        ctx.phase_of[priority] = max(ctx.phase_of.values(), default=0) + 1
    for result in results:
        if result.priority_phase is None:
            result.priority_phase = ctx.phase_of[result.priority]


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a recovery of a host would do: the dry run's report, and
    the forecast it was made with (None: Placement could not say)."""

    report: HostReport
    forecast: capacity.Forecast | None


def plan_failure(env: Env, host: str, servers: Sequence[Server],
                 services: Sequence[ComputeService], placement: Placement,
                 room: capacity.Room) -> Plan:
    """The dry run's plan for ``host`` failing now, from listings already
    made (``servers`` on it, Nova's ``services``) and taking from
    ``room``: the failures tolerated and the simulation ask it of hosts
    that are up, for which a dry run would refuse. Asks Nova nothing."""
    ctx = HostContext(env=env, host=host, fencer=None,
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

    _plan(ctx, predict)
    ctx.report.finished_at = env.clock.now()
    return Plan(ctx.report, found[0])


def _plan(ctx: HostContext,
          predict: Callable[[list[tuple[Server, InstanceResult]]],
                            capacity.Forecast | None]) -> None:
    lock_reason = ctx.env.settings.lock_reason
    ctx.env.recorder.step_changed(RECOVER_INSTANCES, StepState.SUCCESS,
                                  f"dry run: {ctx.placement.describe()}")
    selected = _triage(ctx, ctx.servers)
    predicted = predict(selected)
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
        _settle(ctx, result, Outcome.PLANNED, ", ".join(steps))


def _left_by_earlier_runs(ctx: HostContext) -> list[Server]:
    """The instances an earlier run left unfinished that are no longer on
    the host (their evacuation went ahead), as seen from the host."""
    servers = []
    listed = {server.id for server in ctx.servers}
    for prior in list(ctx.journal.values()):
        if prior.uuid in listed:
            continue
        if _finished(prior):
            ctx.report.instances.append(ctx.journal.pop(prior.uuid))
            continue
        try:
            current = ctx.env.nova.get_server(prior.uuid)
        except exception.NovaNotFound:
            ctx.journal.pop(prior.uuid)
            ctx.report.instances.append(prior)
            _settle(ctx, prior, Outcome.SKIPPED, "deleted during recovery")
            continue
        # Seen from the failed host, so that confirmation sees it move.
        servers.append(dataclasses.replace(current, host=ctx.host))
    return servers


def _recover_instances(ctx: HostContext, pool: concurrency.TaskPool) -> None:
    env = ctx.env
    # The count, and the message that a reader of the store reads it
    # back from (``instances_announced``).
    env.recorder.step_changed(
        RECOVER_INSTANCES, StepState.RUNNING,
        f"{len(ctx.servers)} instance(s) on {ctx.host}; "
        f"{ctx.placement.method}", instances=len(ctx.servers))
    seen: set[str] = set()
    pending = ctx.servers + _left_by_earlier_runs(ctx)
    with env.watcher.follow(env.nova, env.settings.poll_interval) as watch:
        for _ in range(MAX_RELISTS):
            seen.update(server.id for server in pending)
            _recover_round(ctx, pending, watch, pool)
            if env.stopping():
                raise exception.Interrupted(
                    f"stopped while recovering {ctx.host}; the rest "
                    f"resumes from the journal")
            # Re-list at the end: recover what landed while we worked.
            pending = [s for s in env.nova.list_servers(ctx.host)
                       if s.id not in seen]
            if not pending:
                break
            LOG.warning("%d instance(s) appeared on %s during recovery",
                        len(pending), ctx.host)
    for server in pending:
        _settle(ctx, _new_result(ctx, server), Outcome.FAILED,
                f"appeared on {ctx.host} during recovery after "
                f"{MAX_RELISTS} listings; run recovery again")
    env.recorder.step_changed(
        RECOVER_INSTANCES,
        StepState.SUCCESS if ctx.report.succeeded else StepState.FAILURE,
        ctx.report.summary())
    _release_locks(ctx)


def _release_locks(ctx: HostContext) -> None:
    """The run's last step: lift recovery's lock wherever it is still on
    one of the run's instances (an unlock that failed, a lock an earlier
    run left), and, when a lock's outcome was unknown, only once that
    lock can no longer reach Nova: a lock held in a load balancer may be
    delivered after the unlock. One listing of the locked instances; a
    lock with any other reason is never lifted. An instance whose unlock
    failed is reported left locked only if the lock is still there and
    cannot be lifted now either.

    No listing when Nova's answers already settled it: every lock of the
    run was answered and every unlock succeeded (the journal says so),
    so none of recovery's locks can be left."""
    env, settings = ctx.env, ctx.env.settings
    results = {r.uuid: r for r in ctx.report.instances}
    uncertain = [r for r in results.values()
                 if r.lock_uncertain_at is not None]
    held = [r for r in results.values() if r.locked_by_us]
    if not uncertain and not held:
        return
    if uncertain:
        last = max(r.lock_uncertain_at for r in uncertain)
        remaining = env.late_request_left(last)
        if remaining > 0:
            env.recorder.step_changed(
                RELEASE_LOCKS, StepState.RUNNING,
                f"{len(uncertain)} lock(s) with an unknown outcome may "
                f"still reach Nova: looking for them in {remaining:.0f}s")
            locks.wait_out(env, last, f"{ctx.host}'s instances")
    try:
        left = {s.id for s in env.nova.list_locked_servers()
                if s.id in results and s.locked_reason == settings.lock_reason}
    except exception.NovaError as exc:
        LOG.error("%s: could not look for recovery's locks left on its "
                  "instances: %s", ctx.host, exc)
        for result in held:
            _left_locked(ctx, result, f"its lock could not be checked: {exc}")
        env.recorder.step_changed(
            RELEASE_LOCKS, StepState.FAILURE,
            f"could not look for recovery's locks: {exc}; list them with "
            f"'openstack server list --all-projects --locked'")
        return
    for result in uncertain:
        result.lock_uncertain_at = None
        env.recorder.instance_changed(result)
    for uuid in sorted(left):
        _release(ctx, results[uuid])
    for result in held:
        if result.uuid not in left:
            # Its unlock reached Nova after all (its answer was lost), or
            # someone lifted the lock.
            result.locked_by_us = False
            env.recorder.instance_changed(result)
    if uncertain or left:
        env.recorder.step_changed(
            RELEASE_LOCKS, StepState.SUCCESS,
            f"{len(left)} lock(s) of recovery lifted, "
            f"{len(uncertain)} late lock(s) looked for")


def _release(ctx: HostContext, result: InstanceResult) -> None:
    try:
        ctx.env.nova.unlock(result.uuid)
    except exception.STOPS_THE_RUN:
        raise
    except exception.RecoveryError as exc:
        _left_locked(ctx, result, f"unlock failed: {exc}")
        return
    LOG.warning("Instance %s: recovery's lock was still on it; lifted",
                result.uuid)
    result.locked_by_us = False
    ctx.env.recorder.instance_changed(result)


def _left_locked(ctx: HostContext, result: InstanceResult, why: str) -> None:
    """The instance keeps recovery's lock: a failure of the run, which a
    retry (or 'openstack server unlock') lifts."""
    LOG.error("Instance %s (%s) left locked: %s", result.uuid, result.name,
              why)
    reason = f"left locked, {why}"
    _settle(ctx, result, Outcome.FAILED,
            f"{result.reason}; {reason}" if result.reason else reason)


def _recover_round(ctx: HostContext, servers: list[Server],
                   watch: Watch, pool: concurrency.TaskPool) -> None:
    selected = _triage(ctx, servers)
    capacity.forecast(ctx.env, ctx.host, selected, ctx.placement,
                      ctx.services)
    recoveries = [InstanceRecovery(ctx.env, watch, server, result,
                                   ctx.placement)
                  for server, result in selected]
    stopped = None
    for outcome in pool.run(_phased(ctx, recoveries), recoveries):
        if isinstance(outcome.error, exception.STOPS_THE_RUN):
            # Not the instance's failure: one line each, no traceback;
            # the run stops once every task has ended.
            _abandoned(outcome.item.result, outcome.error)
            stopped = stopped or outcome.error
        elif outcome.error is not None:
            # run() records its own failures; this is a last line of
            # defence so that no worker's exception is ever lost.
            _settle(ctx, outcome.item.result, Outcome.FAILED,
                    f"unexpected error: {outcome.error!r}")
    if stopped is not None:
        raise stopped


def _abandoned(result: InstanceResult, error: Exception) -> None:
    why = ("lease lost; the run resumes on the engine that owns it"
           if isinstance(error, exception.LeaseLost)
           else f"{error}; the run resumes from its journal")
    LOG.warning("Instance %s abandoned: %s", result.uuid, why)


def _phased(ctx: HostContext, recoveries: list[InstanceRecovery],
            ) -> Callable[[InstanceRecovery], InstanceResult]:
    """The task of each instance: with more than one phase, it waits for
    its phase to open first, and lets the next one open when it ends.
    ``recoveries`` are in phase order, as the pool takes them."""
    numbers = sorted({r.result.priority_phase for r in recoveries
                      if r.result.priority_phase is not None})
    if len(numbers) < 2:
        return _run_unless_stopping
    env = ctx.env
    position = {number: at for at, number in enumerate(numbers, start=1)}
    priority = {r.result.priority_phase: r.result.priority
                for r in recoveries}
    timeout = env.settings.phase_timeout

    def late(at: int) -> None:
        number, following = numbers[at - 1], numbers[at]
        message = (f"phase {number} (priority {priority[number]}) not "
                   f"finished after {timeout:g} s ([host_failure] "
                   f"phase_timeout): phase {following} (priority "
                   f"{priority[following]}) starts, phase {number}'s "
                   f"instances keep running")
        LOG.warning("%s: %s", ctx.host, message)
        env.recorder.step_changed(PHASE_TIMEOUT, StepState.SUCCESS, message,
                                  news=News(EventKind.PHASE_TIMEOUT))

    phases = Phases([sum(r.result.priority_phase == n for r in recoveries)
                     for n in numbers], env.clock, timeout, late)

    def run(recovery: InstanceRecovery) -> InstanceResult:
        at = position[recovery.result.priority_phase]
        try:
            phases.enter(at)
            return _run_unless_stopping(recovery)
        finally:
            phases.leave(at)

    return run


def _run_unless_stopping(recovery: InstanceRecovery) -> InstanceResult:
    """Start no instance once the process is shutting down: it stays
    pending in the journal, and the next run takes it up."""
    if recovery.env.stopping():
        return recovery.result
    return recovery.run()
