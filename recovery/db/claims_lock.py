"""The "claims" lock: claims (and holds) are serialized across engines
by it, whichever nodes of a Galera cluster the engines write to. On
MariaDB/MySQL the lock is also a write that Galera certifies, so of two
claims made at once on two nodes one fails with a deadlock and is tried
again (``retry_conflicts``), and then sees the other's."""

import time
from collections.abc import Callable
from typing import Any
from typing import TypeVar

import sqlalchemy as sa
from oslo_db import exception as db_exc

from recovery import exception
from recovery.db.tables import locks

_T = TypeVar("_T")

# A row that no transaction leaves behind: written and deleted by each
# claim, so that Galera certifies claims against each other.
_CERTIFIED = "claims:certified"
# How many times a claim that lost a deadlock (a Galera certification
# conflict among them) is tried again, and the pause before each try.
CONFLICT_RETRIES = 4
CONFLICT_PAUSE = 0.05


def lock_claims(conn: Any) -> None:
    """Serialize claims across engines until the transaction ends.

    The row lock serializes the claims made through one server. On a
    Galera cluster that is all it does: a row lock is held on the node
    that took it, and Galera certifies writes only, never a read, locking
    or not. So a claim also writes: it inserts and deletes a row of its
    own, which every claim's write set then names, and of two claims
    made at once on two nodes, the second to be certified fails with a
    deadlock (error 1213) and is rolled back. (An ``UPDATE`` that writes
    a row's own values back is no write to Galera: nothing changes, and
    nothing is certified.) Elsewhere the row lock is the whole story.
    """
    conn.execute(sa.select(locks.c.name).where(
        locks.c.name == "claims").with_for_update())
    if conn.dialect.name in ("mysql", "mariadb"):
        conn.execute(locks.insert().values(name=_CERTIFIED))
        conn.execute(locks.delete().where(locks.c.name == _CERTIFIED))


def _lost_conflict(exc: exception.StoreError) -> bool:
    """``exc`` (from ``_tx``) is a deadlock: the transaction was rolled
    back, nothing of it is written, and trying it again is safe."""
    cause = exc.__cause__
    if isinstance(cause, db_exc.DBDeadlock):
        return True
    orig = getattr(cause, "orig", None)
    return bool(getattr(orig, "args", None)) and orig.args[0] == 1213


def retry_conflicts(claim: Callable[[], _T]) -> _T:
    """``claim()``, tried again (up to ``CONFLICT_RETRIES`` times) while it
    loses a deadlock to another claim; after that, its StoreUnavailable.
    The try after a lost conflict reads what the winner wrote, so it
    mostly finds the work taken and says so, as on one server."""
    for attempt in range(CONFLICT_RETRIES):
        try:
            return claim()
        except exception.StoreUnavailable as exc:
            if not _lost_conflict(exc):
                raise
            time.sleep(CONFLICT_PAUSE * (attempt + 1))
    return claim()
