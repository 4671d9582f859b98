"""Steps and the orchestrator that runs them in order.

A step is a small named object with ``execute(ctx)`` (which may return
what it did, for the operator) and, where a later failure must undo it,
``rollback(ctx, exc)``. When a step fails, the steps
already done are rolled back in reverse order and the original exception
propagates.

A step whose changes are decisions about the host declares the event
each of its states records (``news``): the observer hears it with the
change.
"""

import logging
from collections.abc import Mapping
from collections.abc import Sequence
from typing import ClassVar
from typing import Generic
from typing import Protocol
from typing import TypeVar

from recovery.events import News
from recovery.results import StepState

LOG = logging.getLogger(__name__)


# The context one flow's steps share (HostContext, RestartContext, ...).
Ctx = TypeVar("Ctx")


class Step(Generic[Ctx]):
    # Each step's is a ``StepName``; this one names a step that has none.
    name: str = "step"
    # The event each state of the step records, if any.
    news: ClassVar[Mapping[StepState, News]] = {}

    def execute(self, ctx: Ctx) -> str | None:
        raise NotImplementedError

    def announce(self, ctx: Ctx) -> str:
        """What the step is about to do or wait for."""
        return "started"

    def rollback(self, ctx: Ctx, exc: BaseException) -> None:
        """Undo ``execute``. Most steps have nothing to undo."""


class Observer(Protocol):
    """What hears each change of a step (a ``Recorder``'s
    ``step_changed``)."""

    def __call__(self, step: str, state: StepState, message: str, *,
                 news: News | None = None) -> None: ...


def run_steps(steps: Sequence[Step[Ctx]], ctx: Ctx,
              observe: Observer) -> None:
    """Run ``steps`` in order; ``observe(name, state, message, news=...)``
    hears each step start, end, fail or be undone, with the event the
    step declares for that state."""
    done: list[Step[Ctx]] = []
    step = None

    def tell(changed: Step[Ctx], state: StepState, message: str) -> None:
        observe(changed.name, state, message, news=changed.news.get(state))

    try:
        for step in steps:
            LOG.debug("Step %s", step.name)
            tell(step, StepState.RUNNING, step.announce(ctx))
            tell(step, StepState.SUCCESS, step.execute(ctx) or "done")
            done.append(step)
    except Exception as exc:
        tell(step, StepState.FAILURE, str(exc))
        for step in reversed(done):
            try:
                step.rollback(ctx, exc)
                tell(step, StepState.REVERTED, "undone")
            except Exception:
                # The original failure is what the operator must see; a
                # failed undo is logged with its own traceback.
                LOG.exception("Rollback of step %s failed", step.name)
        raise
