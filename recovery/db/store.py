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
failover segments (``segments``), and the operator's decision log
(``events``). Every part runs its transactions
through one choke point (``transaction``), where database errors become
the project's.
"""

import dataclasses
from typing import Any

import sqlalchemy as sa

from recovery import exception
from recovery.db import connection
from recovery.db.claims import ClaimStore
from recovery.db.control import ControlStore
from recovery.db.events import EventStore
from recovery.db.journal import CommitGroup
from recovery.db.journal import JournalStore
from recovery.db.segments import SegmentStore


class Store(ClaimStore, JournalStore, ControlStore, SegmentStore,
            EventStore):
    def __init__(self, engine: sa.engine.Engine):
        self._engine = engine
        self._group = CommitGroup()

    def close(self) -> None:
        self._engine.dispose()


def open_conf_store(conf: Any, *, wait: bool = False) -> Store:
    """The store ``[database]`` names. A command fails at once when a
    server database does not answer; ``wait`` (the engine's start) takes
    oslo.db's connect retries ([database] max_retries)."""
    overrides = {} if wait else {"max_retries": 0}
    return _open(connection.Options.from_conf(conf.database, **overrides))


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
            connection.upgrade(engine)
        else:
            connection.check_schema(engine)
    except sa.exc.SQLAlchemyError as exc:
        engine.dispose()
        raise connection.cannot_open(engine.url, exc) from exc
    except exception.RecoveryError:
        engine.dispose()
        raise
    return Store(engine)
