"""Isolating a failed host, the first half of a host-failure run: make
sure it is really down (or prove it off), then take it out of scheduling,
then list its instances. Each is a step, undone in reverse if a later one
fails (``base.run_steps``)."""

import dataclasses
import logging

from recovery import exception
from recovery.census import Census
from recovery.confirmation import Confirmation
from recovery.events import EventKind
from recovery.events import News
from recovery.fencing import DeviceAttempt
from recovery.fencing import Proof
from recovery.flows import base
from recovery.flows.evidence import Evidence
from recovery.flows.host_context import HostContext
from recovery.models import ServiceStatus
from recovery.results import StepName
from recovery.results import StepState
from recovery.waiting import wait_for

LOG = logging.getLogger(__name__)


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

    name = StepName.VERIFY_HOST_DOWN

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
    device of one has (a power-off read back Off, a kdump message, or a
    storage fence on the evidence rule, ``evidence``). Each device's
    attempt is an event, and so is each decision on the evidence. An
    operator's confirmation for this failure is a proof too: asked
    first, and again when fencing fails. Nothing is forced down or
    evacuated unless this succeeds; else the host is held
    (``FenceHeld``, with its cause)."""

    name = StepName.FENCE
    news = {StepState.SUCCESS: News(EventKind.FENCED),
            StepState.FAILURE: News(EventKind.FENCE_FAILED)}

    def announce(self, ctx: HostContext) -> str:
        return ctx.fencer.describe()

    def execute(self, ctx: HostContext) -> str:
        confirmation = _confirmation(ctx)
        if confirmation is not None:
            return _confirmed(ctx, confirmation)

        def tell(attempt: DeviceAttempt) -> None:
            self._progress(ctx, attempt.describe(), EventKind.FENCE_ATTEMPT)

        def say(decision: str) -> None:
            self._progress(ctx, decision, EventKind.EVIDENCE)

        try:
            ctx.proof = ctx.fencer.power_off(ctx.env.clock, tell,
                                             gate=Evidence(ctx, say),
                                             lags=ctx.lags)
        except exception.FencingError as exc:
            confirmation = _confirmation(ctx)
            if confirmation is None:
                raise _held(ctx, exc) from exc
            LOG.warning("%s could not be proved off (%s), but an operator "
                        "confirmed it off", ctx.host, exc)
            return _confirmed(ctx, confirmation)
        if ctx.proof.storage_only:
            ctx.report.evidence = ctx.proof.text
        return ctx.proof.text

    def _progress(self, ctx: HostContext, message: str,
                  kind: EventKind) -> None:
        ctx.env.recorder.step_changed(self.name, StepState.RUNNING, message,
                                      news=News(kind))


def _confirmation(ctx: HostContext) -> Confirmation | None:
    return ctx.confirmed() if ctx.confirmed is not None else None


def _confirmed(ctx: HostContext, confirmation: Confirmation) -> str:
    """An operator's word is a full proof: every instance may move."""
    ctx.proof = Proof(confirmation.describe())
    ctx.report.evidence = confirmation.describe()
    LOG.info("%s: %s", ctx.host, confirmation.describe())
    return confirmation.describe()


def _held(ctx: HostContext, exc: exception.FencingError
          ) -> exception.FenceHeld:
    """The hold, named after the host, with its cause; a WARNING line
    (the engine raises the ALARM, once per host or failure domain)."""
    cause, unreachable = exception.FenceHoldCause.FENCE_FAILED, False
    if isinstance(exc, exception.FenceHeld):
        cause, unreachable = exc.cause, exc.bmcs_unreachable
    LOG.warning("%s could not be proved off (held: %s): %s. Nothing is "
                "forced down or evacuated until it is, or until an "
                "operator confirms it off ('recovery fencing confirm %s')",
                ctx.host, cause, exc, ctx.host)
    # The run's message names the host, as the engine's alarm does.
    return exception.FenceHeld(f"{ctx.host} could not be proved off: {exc}",
                               cause, bmcs_unreachable=unreachable)


class ProbeSilent(base.Step[HostContext]):
    """For a host proved off only by its liveness probe's silence (a
    detected failure, with no fencing driver): probe again, just before
    anything changes in Nova. A host that answers now may run its guests,
    and is not evacuated."""

    name = StepName.LIVENESS_PROBE
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
    force-down first is kept within the one request. If Nova then never
    reports the host down, both changes are undone before the step
    fails."""

    name = StepName.FORCE_DOWN
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
        try:
            wait_for(lambda: nova.get_compute_service(ctx.host).is_down,
                     what=f"Nova to report {ctx.host} down",
                     timeout=settings.state_change_timeout,
                     interval=settings.poll_interval, clock=ctx.env.clock)
        except Exception as exc:
            # The orchestrator undoes only the steps that finished, and
            # this one's request also disabled the host: undone here, so
            # the host is left as it was found.
            _undo_isolation(ctx, exc)
            raise

    def rollback(self, ctx: HostContext, exc: BaseException) -> None:
        if ctx.forced_down_by_us:
            ctx.env.nova.force_down(ctx.service, False)


class Disable(base.Step[HostContext]):
    """Take the host out of scheduling, with a reason operators can read:
    sent here only for a host someone else had forced down (force-down's
    request disables the others). Force-down comes first: newer Nova may
    wait on the node for a disable."""

    name = StepName.DISABLE
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
                ctx.service, status=ServiceStatus.DISABLED,
                disabled_reason=ctx.env.settings.disable_reason)

    def rollback(self, ctx: HostContext, exc: BaseException) -> None:
        if ctx.disabled_by_us:
            ctx.env.nova.enable(ctx.service)


def _undo_isolation(ctx: HostContext, exc: BaseException) -> None:
    """Undo force-down's one request as the two steps' rollbacks would,
    in reverse: enable (if it disabled), then lift the force-down. A
    failed undo is logged; the step's own failure is what propagates."""
    for step in (Disable(), ForceDown()):
        try:
            step.rollback(ctx, exc)
        except Exception:
            LOG.exception("%s: could not undo step %s", ctx.host, step.name)


class ListInstances(base.Step[HostContext]):
    """List the host's instances once it is isolated, so that nothing new
    lands on it between the listing and the disable."""

    name = StepName.LIST_INSTANCES

    def execute(self, ctx: HostContext) -> None:
        ctx.servers = ctx.env.nova.list_servers(ctx.host)
