"""The lock sweep, the last step of a host-failure run: lift
recovery's locks still on the run's instances, and report those that
stay."""

import logging

from recovery import exception
from recovery.flows import locks
from recovery.flows.host_context import HostContext
from recovery.flows.triage import settle
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import StepName
from recovery.results import StepState

LOG = logging.getLogger(__name__)


def release_locks(ctx: HostContext) -> None:
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
                StepName.RELEASE_LOCKS, StepState.RUNNING,
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
            StepName.RELEASE_LOCKS, StepState.FAILURE,
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
            StepName.RELEASE_LOCKS, StepState.SUCCESS,
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
    settle(ctx, result, Outcome.FAILED,
           f"{result.reason}; {reason}" if result.reason else reason)
