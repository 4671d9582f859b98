"""The host-failure flow: isolate a dead host, then recover its instances.

1. Make sure the host is really down: refuse if Nova still hears from it,
   unless a fencing driver powers it off (and verifies it is Off) first,
   or fences its storage on the evidence rule (``evidence``), or an
   operator confirmed it off. Then take it out of scheduling: force-down
   and disable, in one request.
2. List its instances after it is isolated, so nothing new lands between
   the listing and the disable; select them. With a storage fence alone
   as the proof, hold those it does not cover (``coverage``).
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

This module is the orchestration, in that order; the steps are in the
rooms beside it: ``isolation`` (1), ``evidence`` (1's storage fence),
``triage`` and ``coverage`` (the selection and phases of 2 and 3),
``plan`` (a dry run's report, and what earlier runs left),
``lock_sweep`` (the locks left, after 5).
"""

import datetime
import logging
from collections.abc import Callable
from collections.abc import Sequence

from recovery import concurrency
from recovery import exception
from recovery.events import EventKind
from recovery.events import News
from recovery.fencing import HostFence
from recovery.flows import base
from recovery.flows import capacity
from recovery.flows import coverage
from recovery.flows.context import Env
from recovery.flows.host_context import Confirmed
from recovery.flows.host_context import EngineViews
from recovery.flows.host_context import HostContext
from recovery.flows.instance import InstanceRecovery
from recovery.flows.isolation import Disable
from recovery.flows.isolation import Fence
from recovery.flows.isolation import ForceDown
from recovery.flows.isolation import ListInstances
from recovery.flows.isolation import ProbeSilent
from recovery.flows.isolation import VerifyHostDown
from recovery.flows.lock_sweep import release_locks
from recovery.flows.placement import Placement
from recovery.flows.placement import auto
from recovery.flows.plan import dry_run as plan_dry_run
from recovery.flows.plan import left_by_earlier_runs
from recovery.flows.priority import Phases
from recovery.flows.triage import new_result
from recovery.flows.triage import settle
from recovery.flows.triage import triage
from recovery.flows.watcher import Watch
from recovery.models import Server
from recovery.pacing import LagBook
from recovery.probe import Probe
from recovery.results import HostReport
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import StepName
from recovery.results import StepState

LOG = logging.getLogger(__name__)

# Listings of the host after the first one; an instance still appearing
# after that many rounds is reported, not chased forever.
MAX_RELISTS = 3

PoolFactory = Callable[[int], concurrency.TaskPool]


def recover_host(env: Env, host: str, *, fencer: HostFence | None = None,
                 liveness: Probe | None = None,
                 heartbeat: datetime.datetime | None = None,
                 dry_run: bool = False,
                 pool_factory: PoolFactory = concurrency.task_pool,
                 journal: Sequence[InstanceResult] = (),
                 placement: Placement | None = None,
                 confirmed: Confirmed | None = None,
                 engines: EngineViews | None = None,
                 lags: LagBook | None = None) -> HostReport:
    """Recover every instance of a failed host; return the report.

    ``journal`` holds the results of earlier runs of the same recovery (a
    crashed engine, an earlier attempt): what they finished is kept, what
    they left in flight or failed is reconciled with Nova and finished.
    ``placement`` holds the recovery methods (default: auto).
    ``liveness``: a probe whose silence proves the host off when there is
    no ``fencer`` (a detected failure); run just before the isolation.
    ``heartbeat``: the one a detected failure was judged on; a newer one
    ends the run with ``HostAlive``, nothing changed.
    ``confirmed``: the operator's confirmation that the host is off, if
    one was given for this failure (asked when fencing starts and when
    it fails): a proof of its own. ``engines``: the engines' views of
    the host, for the evidence rule of a storage fence. ``lags``: where
    the fencing devices' lags are learned, to pace their requests.

    Raises ``HostNotDown`` (nothing changed in Nova) when the host may be
    alive and there is no ``fencer`` (or it answers ``liveness``),
    ``FenceHeld`` (nothing changed in
    Nova) when fencing fails, ``UnknownHost`` or a Nova error when it
    cannot start, and
    ``Interrupted`` when ``env.stopping()`` turned true. If the isolation
    or the first listing fails, what it changed is undone.
    """
    ctx = HostContext(env=env, host=host, fencer=fencer, liveness=liveness,
                      heartbeat=heartbeat, confirmed=confirmed,
                      engines=engines, lags=lags,
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
            env.recorder.step_changed(StepName.FENCE, StepState.SUCCESS,
                                      f"dry run: would {fencer.describe()}")
        elif liveness is not None:
            env.recorder.step_changed(
                StepName.LIVENESS_PROBE, StepState.SUCCESS,
                f"dry run: would probe {liveness.describe(host)}")
        plan_dry_run(ctx, lambda selected: capacity.forecast(
            ctx.env, ctx.host, selected, ctx.placement, ctx.services))
    else:
        _recover_instances(ctx, pool_factory(env.settings.threads))
    ctx.report.finished_at = env.clock.now()
    return ctx.report


def _recover_instances(ctx: HostContext, pool: concurrency.TaskPool) -> None:
    env = ctx.env
    # The count goes to the store as data: a view of the run shows the
    # instances not started yet as pending.
    env.recorder.step_changed(
        StepName.RECOVER_INSTANCES, StepState.RUNNING,
        f"{len(ctx.servers)} instance(s) on {ctx.host}; "
        f"{ctx.placement.method}", instances=len(ctx.servers))
    seen: set[str] = set()
    pending = ctx.servers + left_by_earlier_runs(ctx)
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
        settle(ctx, new_result(ctx, server), Outcome.FAILED,
               f"appeared on {ctx.host} during recovery after "
               f"{MAX_RELISTS} listings; run recovery again")
    env.recorder.step_changed(
        StepName.RECOVER_INSTANCES,
        StepState.SUCCESS if ctx.report.succeeded else StepState.FAILURE,
        ctx.report.summary())
    release_locks(ctx)


def _recover_round(ctx: HostContext, servers: list[Server],
                   watch: Watch, pool: concurrency.TaskPool) -> None:
    selected = coverage.hold_uncovered(ctx, triage(ctx, servers))
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
            settle(ctx, outcome.item.result, Outcome.FAILED,
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
        env.recorder.step_changed(StepName.PHASE_TIMEOUT, StepState.SUCCESS,
                                  message, news=News(EventKind.PHASE_TIMEOUT))

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
