"""The host-return flow: bring a repaired host back into scheduling.

The order is Nova's, and each step starts only once the one before it is
confirmed:

1. Refuse while an evacuation from the host is still in flight: its
   guest is being rebuilt elsewhere right now.
2. Wait for the host's nova-compute to heartbeat again. On start it
   destroys the local copies of the guests that were evacuated away and
   completes their evacuation migrations; wait for that too, since Nova
   refuses to clear force-down while any of them is still "done" (not
   yet "completed").
3. Lift the host's storage fences (a Ceph blocklist), if it has any,
   once Nova shows every evacuation from it completed, and never before:
   until its nova-compute has destroyed an evacuated guest, that guest
   could write again to the disk its evacuated copy now uses.
4. Clear force-down, and wait until Nova reports the service up.
5. Enable the service, if recovery disabled it: a service enabled while
   still down keeps its COMPUTE_STATUS_DISABLED trait in placement, and
   boots on it fail. A host an operator disabled for another reason stays
   disabled.
"""

import dataclasses
import datetime

from recovery import exception
from recovery.census import Census
from recovery.events import EventKind
from recovery.events import News
from recovery.fencing import HostFence
from recovery.fencing.fencer import DeviceKind
from recovery.fencing.levels import Device
from recovery.flows import base
from recovery.flows import enabling
from recovery.flows.context import Env
from recovery.models import ComputeService
from recovery.models import Migration
from recovery.results import StepName
from recovery.results import StepState
from recovery.waiting import wait_for


@dataclasses.dataclass
class ReturnContext:
    env: Env
    host: str
    fence: HostFence | None = None
    service: ComputeService | None = None

    def census(self) -> Census:
        return Census.take(self.env.nova,
                           self.env.settings.service_down_time)

    def wait(self, check, what: str, timeout: float) -> None:
        wait_for(check, what=what, timeout=timeout,
                 interval=self.env.settings.poll_interval,
                 clock=self.env.clock)


def _evacuations(ctx: ReturnContext) -> list[Migration]:
    return ctx.env.nova.list_evacuations(ctx.host)


class CheckEvacuations(base.Step[ReturnContext]):
    name = StepName.CHECK_EVACUATIONS

    def execute(self, ctx: ReturnContext) -> str:
        ctx.service = ctx.census().compute(ctx.host)
        moving = [m for m in _evacuations(ctx) if not m.finished]
        if moving:
            raise exception.EvacuationsUnfinished(
                f"{len(moving)} evacuation(s) from {ctx.host} are still in "
                f"flight (instance {moving[0].instance_uuid} is "
                f"{moving[0].status}); the host returns once they end")
        return "no evacuation from the host is in flight"


class AwaitHeartbeat(base.Step[ReturnContext]):
    """A heartbeat newer than the one seen when the step started: the
    service restarted (a forced-down service keeps its ``updated_at``
    moving, so this is seen before force-down is cleared)."""

    name = StepName.AWAIT_HEARTBEAT

    def announce(self, ctx: ReturnContext) -> str:
        return (f"waiting for nova-compute on {ctx.host} to heartbeat and "
                f"complete its evacuations (restart it if it is not "
                f"running)")

    def execute(self, ctx: ReturnContext) -> str:
        seen = ctx.service.updated_at
        timeout = ctx.env.settings.host_return_timeout

        def heartbeat() -> bool:
            census = ctx.census()
            ctx.service = census.compute(ctx.host)
            if ctx.service.is_up and not ctx.service.forced_down:
                return True
            return _newer(ctx.service.updated_at, seen) and (
                census.heartbeats(ctx.service))

        ctx.wait(heartbeat, f"nova-compute on {ctx.host} to heartbeat",
                 timeout)
        ctx.wait(lambda: not any(m.done for m in _evacuations(ctx)),
                 f"nova-compute on {ctx.host} to complete its evacuations",
                 timeout)
        return "nova-compute heartbeats and has completed its evacuations"


def _newer(stamp: datetime.datetime | None,
           than: datetime.datetime | None) -> bool:
    return stamp is not None and (than is None or stamp > than)


def _storage(fence: HostFence | None) -> list[Device]:
    """The host's storage fences (of any level)."""
    return [device for _, device in (fence.devices if fence else [])
            if device.fencer.kind is DeviceKind.STORAGE]


def _not_completed(ctx: ReturnContext) -> list[Migration]:
    """The evacuations from the host whose guest its nova-compute has not
    destroyed yet: in flight, or "done" and not yet "completed". (One
    that failed moved nothing its compute would destroy.)"""
    return [m for m in _evacuations(ctx) if not m.finished or m.done]


class LiftStorageFence(base.Step[ReturnContext]):
    """Lift every storage fence of the host (for Ceph: its blocklist
    entries, and those librbd added for its clients), once Nova shows no
    evacuation from the host left to complete. Each device says what it
    removed."""

    name = StepName.LIFT_STORAGE_FENCE
    news = {StepState.SUCCESS: News(EventKind.UNFENCED),
            StepState.FAILURE: News(EventKind.UNFENCE_FAILED)}

    def announce(self, ctx: ReturnContext) -> str:
        return (f"lifting the storage fence of {ctx.host} ("
                + ", ".join(d.describe() for d in _storage(ctx.fence))
                + ") once every evacuation from it is completed")

    def execute(self, ctx: ReturnContext) -> str:
        left = _not_completed(ctx)
        if left:
            ctx.env.recorder.step_changed(
                self.name, StepState.RUNNING,
                f"waiting: {len(left)} evacuation(s) from {ctx.host} not "
                f"completed yet (instance {left[0].instance_uuid} is "
                f"{left[0].status}); its nova-compute destroys the "
                f"evacuated guests when it starts, and until then one could "
                f"write to the disks its evacuated copy uses")
            ctx.wait(lambda: not _not_completed(ctx),
                     f"every evacuation from {ctx.host} to be completed, "
                     f"before its storage fence is lifted",
                     ctx.env.settings.host_return_timeout)
        try:
            return "; ".join(f"{device.name}: "
                             f"{device.fencer.unfence(ctx.env.clock)}"
                             for device in _storage(ctx.fence))
        except exception.FencingError as exc:
            raise type(exc)(f"the storage fence of {ctx.host} could not "
                            f"be lifted: {exc}") from exc


class ClearForceDown(base.Step[ReturnContext]):
    name = StepName.CLEAR_FORCE_DOWN

    def execute(self, ctx: ReturnContext) -> str:
        nova = ctx.env.nova
        if ctx.service.forced_down:
            nova.force_down(ctx.service, False)
        ctx.wait(lambda: nova.get_compute_service(ctx.host).is_up,
                 f"Nova to report {ctx.host} up",
                 ctx.env.settings.state_change_timeout)
        return "Nova reports the service up"


class Enable(enabling.Enable[ReturnContext]):
    def ours(self, env: Env) -> tuple[str, ...]:
        # Recovery's own: a host failure's, or a process failure's that
        # the host failure found (its nova-compute is running again).
        return (env.settings.disable_reason,
                env.settings.process_disable_reason)


def _steps(fence: HostFence | None) -> list[base.Step[ReturnContext]]:
    lift = [LiftStorageFence()] if _storage(fence) else []
    return [CheckEvacuations(), AwaitHeartbeat(), *lift, ClearForceDown(),
            Enable()]


def return_host(env: Env, host: str, fence: HostFence | None = None) -> str:
    """Bring ``host`` back; return what was done. ``fence``: the host's
    fencing, whose storage fences are lifted. Raises
    ``EvacuationsUnfinished`` (nothing changed) while a guest is still
    moving away, ``WaitTimeout`` naming the step waited on,
    ``FencingError`` when a storage fence cannot be lifted (the host
    stays forced down)."""
    ctx = ReturnContext(env=env, host=host, fence=fence)
    base.run_steps(_steps(fence), ctx, env.recorder.step_changed)
    service = env.nova.get_compute_service(host)
    return (f"{host} is back: service {service.state}, {service.status}"
            f"{', forced down' if service.forced_down else ''}")
