"""The operator's decision log: each decision and each state change of a
host or an instance, with when, who decided it (an engine, the
detector, the API, an operator at the command line) and why.

An event is written in the transaction of what it records, by the part
of the store that owns that: a notification stored (``add``), held
(``hold``), claimed or taken over (``take``, ``claim_host``), a step of
its run or an instance's journal entry (``add_step_event``,
``save_instance``), its run's end (``finish``); arming and disarming
(``set_arming``). A run's events go through its lease check with the
write they belong to, so an engine that lost a run records nothing more
for it, and an event costs no transaction of its own. Only what has no
such write (the detector's view of a host before any notification) is
written alone (``add_event``).
"""

import datetime
from collections.abc import Collection
from typing import Any

import sqlalchemy as sa

from recovery.db.tables import events as events_table
from recovery.db.tables import notifications
from recovery.db.transaction import Transactional
from recovery.events import Decision
from recovery.events import Event
from recovery.events import EventKind

# What the store records, defined below it (``recovery.events``) so that
# the flows can declare their events; named here too for the store's
# callers.
__all__ = ["Decision", "Event", "EventKind", "EventStore", "insert",
           "repeats"]


# Built once: an instance's events are written with its journal entries.
_INSERT = events_table.insert()


def insert(conn: Any, notification_uuid: str | None,
           now: datetime.datetime, decision: Decision) -> None:
    """Record ``decision`` in the caller's transaction."""
    conn.execute(_INSERT, {
        "notification_uuid": notification_uuid, "created_at": now,
        "actor": decision.actor, "subject": decision.subject,
        "kind": decision.kind.value, "message": decision.message})


def last(conn: Any, notification_uuid: str) -> Any:
    """The notification's last event (its ``kind`` and ``message``), or
    None."""
    return conn.execute(
        sa.select(events_table.c.kind, events_table.c.message).where(
            events_table.c.notification_uuid == notification_uuid)
        .order_by(events_table.c.id.desc()).limit(1)).first()


def repeats(conn: Any, notification_uuid: str, decision: Decision) -> bool:
    """Whether the notification's last event already says ``decision``
    (the same kind and words): a gate that holds it again and again for
    the same reason is recorded once."""
    said = last(conn, notification_uuid)
    return said is not None and (said.kind, said.message) == (
        decision.kind.value, decision.message)


class EventStore(Transactional):
    """The event methods of ``Store``."""

    def add_event(self, decision: Decision, now: datetime.datetime) -> None:
        """Record a decision that belongs to no notification."""
        with self._tx() as conn:
            insert(conn, None, now, decision)

    def events(self, notification_uuid: str | None = None,
               since: datetime.datetime | None = None,
               limit: int | None = None,
               host: str | None = None,
               kinds: Collection[str] | None = None) -> list[Event]:
        """Events in the order they were recorded: those of one
        notification, those at or after ``since``, those about ``host``
        (its own, and its notifications'), those of ``kinds``; the last
        ``limit`` of them."""
        table = events_table
        query = table.select()
        if kinds is not None:
            query = query.where(table.c.kind.in_(sorted(kinds)))
        if notification_uuid is not None:
            query = query.where(table.c.notification_uuid
                                == notification_uuid)
        if since is not None:
            query = query.where(table.c.created_at >= since)
        if host is not None:
            query = query.where(sa.or_(
                table.c.subject == host,
                table.c.notification_uuid.in_(
                    sa.select(notifications.c.uuid).where(
                        notifications.c.hostname == host))))
        query = query.order_by(table.c.id.desc())
        if limit is not None:
            query = query.limit(limit)
        with self._tx() as conn:
            rows = conn.execute(query).all()
        return [Event(r.id, r.notification_uuid, r.created_at, r.actor,
                      r.subject, r.kind, r.message) for r in reversed(rows)]
