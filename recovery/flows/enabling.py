"""Enabling a compute service recovery disabled: the step the host return
and the process failure share.

Only recovery's own disable is lifted: a service an operator (or
anything else) disabled for another reason stays disabled, and the step
says so. Which of recovery's reasons a flow lifts is the flow's: a host
return lifts both the host failure's and the process failure's (its
nova-compute runs again), a process failure only its own.
"""

from typing import Generic
from typing import Protocol
from typing import TypeVar

from recovery.flows import base
from recovery.flows.context import Env
from recovery.results import StepName
from recovery.waiting import wait_for


class ServiceCtx(Protocol):
    """What the step reads of a flow's context."""

    env: Env
    host: str


C = TypeVar("C", bound=ServiceCtx)


class Enable(base.Step[C], Generic[C]):
    """Enable the host's nova-compute if recovery disabled it, and wait
    until Nova shows it enabled."""

    name = StepName.ENABLE
    # How the wait names what it waits for ("{host}" is filled in).
    waits_for = "Nova to report {host} enabled"

    def ours(self, env: Env) -> tuple[str, ...]:
        """The disable reasons this flow lifts."""
        raise NotImplementedError

    def execute(self, ctx: C) -> str:
        nova, settings = ctx.env.nova, ctx.env.settings
        service = nova.get_compute_service(ctx.host)
        if service.is_enabled:
            return "already enabled"
        if service.disabled_reason not in self.ours(ctx.env):
            return (f"left disabled: it was disabled for another reason "
                    f"({service.disabled_reason!r}); enable it yourself "
                    f"when that is resolved")
        nova.enable(service)
        wait_for(lambda: nova.get_compute_service(ctx.host).is_enabled,
                 what=self.waits_for.format(host=ctx.host),
                 timeout=settings.state_change_timeout,
                 interval=settings.poll_interval, clock=ctx.env.clock)
        return "enabled"
