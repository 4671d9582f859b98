"""Steps and the orchestrator that runs them in order.

A step is a small named object with ``execute(ctx)`` (which may return
what it did, for the operator) and, where a later failure must undo it,
``rollback(ctx, exc)``. When a step fails, the steps
already done are rolled back in reverse order and the original exception
propagates.
"""

import logging
from collections.abc import Callable
from collections.abc import Sequence
from typing import Generic
from typing import TypeVar

from recovery.results import StepState

LOG = logging.getLogger(__name__)


# The context one flow's steps share (HostContext, RestartContext, ...).
Ctx = TypeVar("Ctx")


class Step(Generic[Ctx]):
    name = "step"

    def execute(self, ctx: Ctx) -> str | None:
        raise NotImplementedError

    def announce(self, ctx: Ctx) -> str:
        """What the step is about to do or wait for."""
        return "started"

    def rollback(self, ctx: Ctx, exc: BaseException) -> None:
        """Undo ``execute``. Most steps have nothing to undo."""


Observer = Callable[[str, StepState, str], None]


def run_steps(steps: Sequence[Step[Ctx]], ctx: Ctx,
              observe: Observer) -> None:
    """Run ``steps`` in order; ``observe(name, state, message)`` hears
    each step start, end, fail or be undone."""
    done: list[Step[Ctx]] = []
    step = None
    try:
        for step in steps:
            LOG.debug("Step %s", step.name)
            observe(step.name, StepState.RUNNING, step.announce(ctx))
            observe(step.name, StepState.SUCCESS, step.execute(ctx) or "done")
            done.append(step)
    except Exception as exc:
        observe(step.name, StepState.FAILURE, str(exc))
        for step in reversed(done):
            try:
                step.rollback(ctx, exc)
                observe(step.name, StepState.REVERTED, "undone")
            except Exception:
                # The original failure is what the operator must see; a
                # failed undo is logged with its own traceback.
                LOG.exception("Rollback of step %s failed", step.name)
        raise
