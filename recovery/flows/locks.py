"""Whose lock is it: the instance-lock policy of every flow that locks.

Nova keeps one lock per instance, with a free-text reason. Recovery locks
with a reason of its own (one per flow), so the reason says who locked:

- not locked: recovery locks it, and lifts its lock when done;
- locked with recovery's reason: a lock an earlier run of recovery left
  (it crashed, or its unlock failed); recovery lifts it when done;
- locked with any other reason: someone else's. It is kept, and never
  lifted by recovery.

A lock that times out, or whose connection drops, may still reach Nova
later, even after recovery's unlock (a request held in a load balancer):
the flow looks at the instance again once that lock can no longer arrive
(``wait_out``) and lifts recovery's lock if it is there.
"""

import datetime
import enum
import logging

from recovery import exception
from recovery.flows.context import Env
from recovery.models import Server
from recovery.waiting import wait_for

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


def wait_out(env: Env, since: datetime.datetime, what: str) -> None:
    """Until a request sent at ``since`` can no longer reach Nova
    (``late_request_window`` after it); ``Interrupted`` if the process
    starts shutting down first (what is uncertain stays recorded, and
    the run that resumes waits the rest)."""
    remaining = env.late_request_left(since)
    if remaining <= 0:
        return
    try:
        wait_for(env.stopping, what="the process to stop",
                 timeout=remaining, interval=1.0, clock=env.clock)
    except exception.WaitTimeout:
        return
    raise exception.Interrupted(
        f"stopped while waiting for late locks ({what}); the wait resumes "
        f"from the journal")
