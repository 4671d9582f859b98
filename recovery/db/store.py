"""The store: one object over SQLAlchemy that the API, the engine and the
CLI share.

Every write is its own transaction, committed when the method returns: a
notification is durable before the API answers 202, and a journal entry is
durable before the side effect it announces. On SQLite every transaction
begins IMMEDIATE, so "check, then write" (the duplicate check, claiming a
notification) is atomic across processes.

``Store`` is one face over its parts, each in its own module by what it
owns: notifications (``notifications``) and who runs them (``claims``),
what runs did (``journal``), the engine's control state (``control``),
failover segments (``segments``), the operator's decision log
(``events``) and their confirmations that a host is off
(``confirmations``), and each fencing device's lag learned from its
past fencings (``fence_lags``). Every part runs its transactions
through one choke point (``transaction``), where database errors become
the project's.
"""

import dataclasses
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from oslo_db import exception as db_exc

from recovery import concurrency
from recovery import exception
from recovery.db import connection
from recovery.db import migrate
from recovery.db import revisions
from recovery.db.claims import ClaimStore
from recovery.db.confirmations import ConfirmationStore
from recovery.db.control import ControlStore
from recovery.db.events import EventStore
from recovery.db.fence_lags import FenceLagStore
from recovery.db.journal import CommitGroup
from recovery.db.journal import JournalStore
from recovery.db.segments import SegmentStore


class Store(ClaimStore, JournalStore, ControlStore, SegmentStore,
            EventStore, ConfirmationStore, FenceLagStore):
    def __init__(self, engine: sa.engine.Engine):
        self._engine = engine
        self._group = CommitGroup()

    def close(self) -> None:
        self._engine.dispose()


@dataclasses.dataclass(frozen=True)
class Unreachable:
    """One attempt to open the store that found its server not answering:
    ``attempt`` of ``attempts`` (None: no limit), the next ``delay``
    seconds later."""

    attempt: int
    attempts: int | None
    delay: float
    error: exception.StoreUnavailable


def open_conf_store(conf: Any, *,
                    on_unreachable: Callable[[Unreachable], None] | None
                    = None,
                    clock: concurrency.Clock | None = None) -> Store:
    """The store ``[database]`` names. A server database that does not
    answer raises StoreUnavailable: at once for a command; for the
    engine's start (``on_unreachable``), after ``[database] max_retries``
    more attempts (-1: no limit), ``retry_interval`` seconds apart, each
    failed one reported to ``on_unreachable`` first."""
    options = connection.Options.from_conf(conf.database)
    retries = options.max_retries if on_unreachable is not None else 0
    attempts = None if retries < 0 else retries + 1
    clock = clock or concurrency.Clock()
    started, attempt = clock.monotonic(), 1
    while True:
        try:
            return _open(options)
        except exception.StoreUnavailable as exc:
            error = exc
        # Outside the handler: a line logged in it would carry the
        # exception a second time.
        if attempt == 1 and on_unreachable is None:
            raise error
        if attempt == attempts:
            raise exception.StoreUnavailable(
                f"{error}; gave up after {attempt} attempts in "
                f"{clock.monotonic() - started:.0f} s ([database] "
                f"max_retries = {retries}, retry_interval = "
                f"{options.retry_interval})") from error
        on_unreachable(Unreachable(attempt, attempts,
                                   options.retry_interval, error))
        clock.sleep(options.retry_interval)
        attempt += 1


def open_store(url: str, *, upgrade: bool = False,
               **options: Any) -> Store:
    """Open the store at an SQLAlchemy URL with the default options but
    ``options``; ``upgrade`` creates or upgrades a server database's
    schema too (an SQLite one always is)."""
    return _open(dataclasses.replace(connection.Options.defaults(url),
                                     **options), upgrade=upgrade)


def _open(options: connection.Options, upgrade: bool = False) -> Store:
    """SQLite is created and upgraded on first use. A server database is
    shared: only 'recovery db upgrade' (``upgrade``) changes its schema,
    and a store whose schema is not this version's is refused."""
    engine = connection.create_engine(options)
    try:
        if upgrade or not connection.is_shared(engine.url):
            migrate.upgrade(engine)
        else:
            revisions.check_schema(engine)
    except (sa.exc.SQLAlchemyError, db_exc.DBError) as exc:
        engine.dispose()
        if connection.unreachable(exc):
            raise connection.unreachable_error(engine.url, exc) from exc
        raise connection.cannot_open(engine.url, exc) from exc
    except exception.RecoveryError:
        engine.dispose()
        raise
    return Store(engine)
