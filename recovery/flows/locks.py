"""Whose lock is it: the instance-lock policy of every flow that locks.

Nova keeps one lock per instance, with a free-text reason. Recovery locks
with a reason of its own (one per flow), so the reason says who locked:

- not locked: recovery locks it, and lifts its lock when done;
- locked with recovery's reason: a lock an earlier run of recovery left
  (it crashed, or its unlock failed); recovery lifts it when done;
- locked with any other reason: someone else's. It is kept, and never
  lifted by recovery.
"""

import enum
import logging

from recovery.models import Server

LOG = logging.getLogger(__name__)


class Holder(enum.Enum):
    NOBODY = "nobody"
    RECOVERY = "recovery"
    SOMEONE_ELSE = "someone else"


def holder(server: Server, reason: str) -> Holder:
    """Who holds ``server``'s lock, when recovery locks with ``reason``."""
    if not server.locked:
        return Holder.NOBODY
    if server.locked_reason == reason:
        return Holder.RECOVERY
    return Holder.SOMEONE_ELSE


def keep_theirs(server: Server) -> None:
    """Say that someone else's lock on ``server`` is left as it is."""
    LOG.info("Instance %s is locked by someone else (%s); leaving the lock",
             server.id, server.locked_reason)
