"""Steps and the orchestrator that runs them in order.

A step is a small named object with ``execute(ctx)`` and, where a later
failure must undo it, ``rollback(ctx, exc)``. When a step fails, the steps
already done are rolled back in reverse order and the original exception
propagates.
"""

import logging
from typing import Any

LOG = logging.getLogger(__name__)


class Step:
    name = "step"

    def execute(self, ctx: Any) -> None:
        raise NotImplementedError

    def rollback(self, ctx: Any, exc: BaseException) -> None:
        """Undo ``execute``. Most steps have nothing to undo."""


def run_steps(steps: list[Step], ctx: Any) -> None:
    done: list[Step] = []
    try:
        for step in steps:
            LOG.debug("Step %s", step.name)
            step.execute(ctx)
            done.append(step)
    except Exception as exc:
        for step in reversed(done):
            try:
                step.rollback(ctx, exc)
            except Exception:
                # The original failure is what the operator must see; a
                # failed undo is logged with its own traceback.
                LOG.exception("Rollback of step %s failed", step.name)
        raise
