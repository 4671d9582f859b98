"""The process-failure flow: a host's nova-compute process stopped, or
started again (PROCESS notifications; the intake records every other
process as ignored).

- STOPPED: take the host out of scheduling. Disable its nova-compute
  service with ``[process_failure] disable_reason`` and wait until Nova
  shows it disabled. A service already disabled, by anyone, is left as it
  is. Nothing is evacuated: the guests still run.
- STARTED: wait until Nova reports the service up again, then enable it,
  but only if it is still disabled with the process-failure reason. One
  disabled for any other reason (an operator's, or a host failure's
  ``[host_failure] service_disable_reason``) stays disabled.

Unlike Masakari, this flow never puts the host "on maintenance": Masakari
latches that flag after a process failure and then refuses the host's
next real failure. Here a host failure that follows a process failure is
recovered like any other.
"""

import dataclasses

from recovery import exception
from recovery.events import News
from recovery.flows import base
from recovery.flows import enabling
from recovery.flows.context import Env
from recovery.models import ComputeService
from recovery.notification import Notification
from recovery.results import StepName
from recovery.results import StepState
from recovery.waiting import wait_for


@dataclasses.dataclass
class ProcessContext:
    env: Env
    host: str

    def service(self) -> ComputeService:
        return self.env.nova.get_compute_service(self.host)

    def wait(self, check, what: str) -> ComputeService:
        settings = self.env.settings
        return wait_for(check, what=what,
                        timeout=settings.state_change_timeout,
                        interval=settings.poll_interval,
                        clock=self.env.clock)


class Disable(base.Step[ProcessContext]):
    name = StepName.DISABLE

    def execute(self, ctx: ProcessContext) -> str:
        service = ctx.service()
        if service.is_disabled:
            return (f"already disabled ({service.disabled_reason!r}): left "
                    f"as it is")
        ctx.env.nova.disable(service, ctx.env.settings.process_disable_reason)
        ctx.wait(lambda: ctx.service().is_disabled,
                 f"Nova to report nova-compute on {ctx.host} disabled")
        return "disabled"


class AwaitUp(base.Step[ProcessContext]):
    name = StepName.AWAIT_SERVICE_UP

    def announce(self, ctx: ProcessContext) -> str:
        return f"waiting for Nova to report nova-compute on {ctx.host} up"

    def execute(self, ctx: ProcessContext) -> str:
        try:
            ctx.wait(lambda: ctx.service().is_up,
                     f"Nova to report nova-compute on {ctx.host} up")
        except exception.WaitTimeout as exc:
            if ctx.service().forced_down:
                raise exception.WaitTimeout(
                    f"{exc}: it is forced down, by a host failure "
                    f"recovery; its host return (COMPUTE_HOST STARTED) "
                    f"clears that") from exc
            raise
        return "up"


class Enable(enabling.Enable[ProcessContext]):
    waits_for = "Nova to report nova-compute on {host} enabled"

    def ours(self, env: Env) -> tuple[str, ...]:
        # Its own only: a host failure's stays until the host returns.
        return (env.settings.process_disable_reason,)


STEPS = {"STOPPED": (Disable,), "STARTED": (AwaitUp, Enable)}


def handle_process_event(env: Env, notification: Notification) -> str:
    """Act on a nova-compute process that stopped or started; return what
    was done. Raises ``UnknownHost`` for a host Nova has no nova-compute
    on, ``WaitTimeout`` naming what Nova did not show in time."""
    host, event = notification.hostname, notification.event
    steps = STEPS.get(event)
    if steps is None:
        raise exception.Ignored(f"process event {event!r} is not acted on")
    ctx = ProcessContext(env=env, host=host)
    messages: list[str] = []

    def observe(step: str, state: StepState, message: str, *,
                news: News | None = None) -> None:
        env.recorder.step_changed(step, state, message, news=news)
        if state == StepState.SUCCESS:
            messages.append(message)

    base.run_steps([step() for step in steps], ctx, observe)
    process = notification.payload.get("process_name", "nova-compute")
    return (f"{process} {event.lower()} on {host}: nova-compute service "
            f"{messages[-1]}")
