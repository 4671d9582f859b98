"""Each fencing device's lag, in the store: the longest and the last time
its past fencings took from an accepted power-off request to the power
read Off, and over how many fencings (``recovery.pacing``).

Some BMCs start their power-off delay anew on each request they receive:
one sent again before that delay is over makes the host die later, not
sooner. The fencing step paces a device by its lag, and learns it again
from each fencing; kept here, every engine that shares the database, and
every later run, paces the device the same way.

A device is named by its key (driver and target, never a secret); the
host last fenced through it is kept for an operator reading the table.
Two engines may learn the same device at once, each fencing one of its
hosts: neither fencing is lost, on any backend (``learn_fence_lag``).
"""

import datetime
from typing import Any

import sqlalchemy as sa
from oslo_db import exception as db_exc

from recovery.db.claims_lock import retry_conflicts
from recovery.db.tables import fence_lags
from recovery.db.transaction import Transactional
from recovery.pacing import Lag


def _row_to_lag(row: Any) -> Lag:
    return Lag(longest=row.longest, last=row.last, fencings=row.fencings)


class FenceLagStore(Transactional):
    """The fencing devices' lags, methods of ``Store``."""

    def fence_lag(self, device: str) -> Lag | None:
        """The lag learned for ``device``; None before its first
        fencing."""
        with self._tx() as conn:
            row = conn.execute(fence_lags.select().where(
                fence_lags.c.device == device)).first()
        return None if row is None else _row_to_lag(row)

    def learn_fence_lag(self, device: str, host: str,
                        seconds: float) -> Lag:
        """Record one more fencing of ``device`` (of ``host``), which took
        ``seconds`` from its accepted request to Off, and return the lag
        learned with it. A lost deadlock (MariaDB's two duplicate
        inserts, a Galera conflict) is tried again: nothing of it was
        written."""
        return retry_conflicts(
            lambda: self._learn_once(device, host, seconds))

    def _learn_once(self, device: str, host: str, seconds: float) -> Lag:
        with self._tx() as conn:
            now = self.lease_clock(conn)
            if not self._add_fencing(conn, device, host, seconds, now):
                try:
                    # In a savepoint: on PostgreSQL a failed statement
                    # would otherwise abort the whole transaction.
                    with conn.begin_nested():
                        conn.execute(fence_lags.insert().values(
                            device=device, host=host, longest=seconds,
                            last=seconds, fencings=1, updated_at=now))
                except (sa.exc.IntegrityError, db_exc.DBDuplicateEntry):
                    # Another engine learned the device's first fencing
                    # since the update: add this one to it.
                    self._add_fencing(conn, device, host, seconds, now)
            return _row_to_lag(conn.execute(fence_lags.select().where(
                fence_lags.c.device == device)).one())

    @staticmethod
    def _add_fencing(conn: sa.engine.Connection, device: str, host: str,
                     seconds: float, now: datetime.datetime) -> bool:
        """Add one fencing to ``device``'s row, if it has one. Each value
        is computed from the row as the update finds it (the row locked
        by it), so two engines' fencings at once both count."""
        longest = sa.case((fence_lags.c.longest < seconds, seconds),
                          else_=fence_lags.c.longest)
        return bool(conn.execute(fence_lags.update().where(
            fence_lags.c.device == device).values(
                host=host, longest=longest, last=seconds,
                fencings=fence_lags.c.fencings + 1,
                updated_at=now)).rowcount)
