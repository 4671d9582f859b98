"""An operator's confirmation that a failed host is off, in the store.

The confirmation is an event (``confirmed``: the operator as its actor,
their reason as its message) of the host failure it is for, and of no
other: a later failure of the same host is a new notification, with
none. No table of its own: the decision log is the record.

Recording it makes that host failure due at once: one waiting (new, or
in error until its next retry) is due now, one given up (failed) is
re-opened in error, due now, and a running one is left to its run (its
Fence step asks for the confirmation again when its fencing fails). A
confirmation that comes while an attempt runs, and that attempt then
ends in error or failed, makes the next attempt due at once
(``finish``): it is never lost between the Fence step's look and the
end of the run. An operator's run by hand (``recovery host-failure``)
takes up a confirmed failure that waits (``claim_host``), rather than
record a new one without the confirmation.

"Due at once" is ``next_attempt_at`` NULL, which every backend reads as
due (``ClaimStore._runnable``); the next poll of any engine takes it up.
"""

import datetime
from typing import Any

import sqlalchemy as sa

from recovery import exception
from recovery.confirmation import Confirmation
from recovery.db import events
from recovery.db.claims_lock import retry_conflicts
from recovery.db.notifications import row_to_notification
from recovery.db.tables import events as events_table
from recovery.db.tables import notifications
from recovery.db.transaction import Transactional
from recovery.events import Decision
from recovery.events import EventKind
from recovery.notification import Kind
from recovery.notification import Notification
from recovery.notification import Status

# A host's notifications that say what state it is in: its failures and
# its returns, those ignored left out (nothing was done about them).
_HOST_RUNS = (Kind.HOST_FAILURE.value, Kind.HOST_RETURN.value)
# Which events tell whether a confirmation came during the last attempt.
_ATTEMPT_MARKS = (EventKind.CONFIRMED.value, EventKind.CLAIMED.value,
                  EventKind.TAKEN_OVER.value)

# What the message of a run that ended after a confirmation adds.
RETRY_CONFIRMED = ("its host was confirmed off during the attempt: due "
                   "again at once")


def nothing_to_confirm(hostname: str, detail: str) -> exception.NotFound:
    return exception.NotFound(
        f"nothing to confirm: no recovery of {hostname} is waiting for a "
        f"proof ({detail}); run 'recovery host-failure {hostname}' first")


def confirmed_since_claim(conn: Any, uuid: str) -> bool:
    """Whether a confirmation of notification ``uuid`` was recorded
    since its last attempt was claimed (during it, or for the next), in
    the caller's transaction."""
    last = conn.execute(sa.select(events_table.c.kind).where(
        events_table.c.notification_uuid == uuid,
        events_table.c.kind.in_(_ATTEMPT_MARKS))
        .order_by(events_table.c.id.desc()).limit(1)).scalar()
    return last == EventKind.CONFIRMED.value


def confirmed_waiting(conn: Any, hostname: str) -> Any:
    """The host's latest host failure (its row) if it waits, new or in
    error, with a confirmation no attempt has had yet: what an
    operator's run by hand takes up (``claim_host``), rather than record
    a new failure without it. None otherwise."""
    row = conn.execute(notifications.select().where(
        notifications.c.hostname == hostname,
        notifications.c.kind == Kind.HOST_FAILURE.value,
        notifications.c.status.in_([Status.NEW.value, Status.ERROR.value]))
        .order_by(notifications.c.id.desc()).limit(1)).first()
    if row is None or not confirmed_since_claim(conn, row.uuid):
        return None
    return row


class ConfirmationStore(Transactional):
    """The confirmation methods of ``Store``."""

    def confirm_fenced(self, hostname: str, user: str, reason: str,
                       now: datetime.datetime) -> Confirmation:
        """Record ``user``'s confirmation that ``hostname`` is off, for
        its latest host failure, and make that failure due at once (see
        the module). ``NotFound`` when the host's latest run (failures
        and returns, ignored ones left out) is not an unfinished host
        failure: no recovery waits for a proof."""
        return retry_conflicts(
            lambda: self._confirm_once(hostname, user, reason, now))

    def _confirm_once(self, hostname: str, user: str, reason: str,
                      now: datetime.datetime) -> Confirmation:
        with self._tx() as conn:
            item = self._waiting_failure(conn, hostname)
            confirmation = Confirmation(hostname, item.uuid, user, reason,
                                        now)
            # The row is written in any case: on Galera, a write is what
            # certifies this against the run's own end.
            changes: dict[str, Any] = {"updated_at": self.lease_clock(conn)}
            if item.status is not Status.RUNNING:
                # A running one keeps its version: it is its holder's
                # fencing token.
                changes.update(
                    status=(Status.ERROR if item.status is Status.FAILED
                            else item.status).value,
                    next_attempt_at=None, version=item.version + 1,
                    message=f"{confirmation.describe()}; due again now")
            conn.execute(notifications.update().where(
                notifications.c.uuid == item.uuid).values(**changes))
            events.insert(conn, item.uuid, now, Decision(
                user, hostname, EventKind.CONFIRMED, reason))
            return confirmation

    @staticmethod
    def _waiting_failure(conn: Any, hostname: str) -> Notification:
        """The host's latest run, locked until the transaction ends, if
        it is a host failure still to finish; else ``NotFound``."""
        row = conn.execute(notifications.select().where(
            notifications.c.hostname == hostname,
            notifications.c.kind.in_(_HOST_RUNS),
            notifications.c.status != Status.IGNORED.value)
            .order_by(notifications.c.id.desc()).limit(1)
            .with_for_update()).first()
        if row is None:
            raise nothing_to_confirm(hostname, "no host failure of it is "
                                               "recorded")
        item = row_to_notification(row)
        if item.kind is Kind.HOST_RETURN:
            raise nothing_to_confirm(hostname, f"its last run is a host "
                                               f"return, {item.uuid}")
        if item.status is Status.FINISHED:
            raise nothing_to_confirm(hostname, f"its last host failure, "
                                               f"{item.uuid}, finished")
        return item

    def confirmation(self, notification_uuid: str) -> Confirmation | None:
        """The latest confirmation recorded for this notification, if
        any: never one of another notification of the same host."""
        with self._tx() as conn:
            row = conn.execute(events_table.select().where(
                events_table.c.notification_uuid == notification_uuid,
                events_table.c.kind == EventKind.CONFIRMED.value)
                .order_by(events_table.c.id.desc()).limit(1)).first()
        if row is None:
            return None
        return Confirmation(row.subject, notification_uuid, row.actor,
                            row.message, row.created_at)
