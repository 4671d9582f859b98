"""The store's one choke point: every transaction, and its errors.

Each part of the store runs its statements in ``self._tx()``. What
SQLAlchemy raises there leaves as the project's exceptions, so no caller
ever sees, or catches, a driver's error: ``StoreUnavailable`` when the
database cannot be reached, is locked by another writer past the busy
timeout, or the pool has no connection in time (a later try may work);
``StoreError`` for anything else. Errors the store raises on purpose
inside a transaction (``Duplicate``, ``RecoveryInProgress``...) roll it
back and pass unchanged.
"""

import contextlib
import datetime
from collections.abc import Callable
from collections.abc import Iterator

import sqlalchemy as sa
from oslo_db import exception as db_exc

from recovery import exception
from recovery.db.connection import database_now

# What says "not now" rather than "never": the connection, a lock or the
# pool, not the statement. oslo.db names a server database's lost
# connection and its deadlocks (a Galera write conflict among them).
_UNAVAILABLE = (sa.exc.OperationalError, sa.exc.DisconnectionError,
                sa.exc.TimeoutError, db_exc.DBConnectionError,
                db_exc.DBDeadlock)


def translate(exc: Exception) -> exception.StoreError:
    """The project's exception for one of SQLAlchemy's."""
    # The driver's own words ("database is locked") on one line, without
    # SQLAlchemy's statement dump, its parameters and documentation link:
    # oslo.db wraps SQLAlchemy's error, which wraps the driver's.
    inner = getattr(exc, "inner_exception", None) or exc
    detail = " ".join(str(getattr(inner, "orig", None) or inner).split())
    if isinstance(exc, _UNAVAILABLE):
        return exception.StoreUnavailable(
            f"the database is unavailable: {detail} (unreachable, locked "
            f"by another writer for longer than [database] busy_timeout, "
            f"or out of connections); a later try may work")
    return exception.StoreError(f"the database refused a statement: "
                                f"{detail}")


class Transactional:
    """The base of every part of ``Store``: one way into the database."""

    _engine: sa.engine.Engine
    # The clock that leases and schedules are judged by: the database's,
    # never an engine's own (tests put a fake one here).
    lease_clock: Callable[[sa.engine.Connection], datetime.datetime] = (
        staticmethod(database_now))

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sa.engine.Connection]:
        """One transaction, committed when the block ends, rolled back if
        it raises."""
        try:
            with self._engine.begin() as conn:
                yield conn
        except (sa.exc.SQLAlchemyError, db_exc.DBError) as exc:
            raise translate(exc) from exc
