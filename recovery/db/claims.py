"""Who runs which notification: claims and their leases.

A claim is a compare-and-swap on the notification's version, made under
the "claims" lock (``recovery.db.claims_lock``), so a notification never
runs twice and a host never has two live runs, however many engines
share the database, and whichever nodes of a Galera cluster they write
to.

A run is abandoned when its lease expired by the database's clock, or
when its owner was a process of this machine that has exited; another
engine, or the CLI, then resumes it from the journal.

The version a run was taken at is its fencing token: only a take changes
it while the notification runs. Every write a holder makes for its run
(the journal entry before each side effect, a step event, a renewal, the
end) checks the token and the lease in the same transaction, and fails
with ``LeaseLost`` once another process has taken over or the lease ran
out, whatever the holder's own clock says.
"""

import dataclasses
import datetime
import uuid as uuidlib
from collections.abc import Collection
from collections.abc import Iterator
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from recovery import exception
from recovery.db import events
from recovery.db.claims_lock import lock_claims
from recovery.db.claims_lock import retry_conflicts
from recovery.db.confirmations import RETRY_CONFIRMED
from recovery.db.confirmations import confirmed_since_claim
from recovery.db.confirmations import confirmed_waiting
from recovery.db.notifications import NotificationStore
from recovery.db.notifications import canonical_payload
from recovery.db.notifications import row_to_notification
from recovery.db.tables import notifications
from recovery.events import Decision
from recovery.events import EventKind
from recovery.identity import owner_gone
from recovery.notification import COMMANDS
from recovery.notification import Kind
from recovery.notification import Notification
from recovery.notification import Status


@dataclasses.dataclass(frozen=True)
class Window:
    """The per-window cap a new host recovery's start must fit: at most
    ``cap`` starts in ``seconds``. A start as part of ``domain``, a
    failure domain down as a whole, counts with the others of that
    domain as one. ``released``: why the gates let it go after holding
    it, recorded with the claim."""

    cap: int
    seconds: float
    domain: str | None = None
    released: str | None = None


@dataclasses.dataclass(frozen=True)
class Start:
    """A start the per-window cap counts: how long ago (seconds, by the
    database's clock), and the failure domain it stands for, if any."""

    age: float
    domain: str | None


def fits(starts: list[Start], window: Window) -> bool:
    """Whether one more start fits ``window``, given the ``starts``
    within it: its domain's event is counted already, or there is a
    slot left."""
    if window.domain is not None and any(
            start.domain == window.domain for start in starts):
        return True
    return len(starts) < window.cap


@dataclasses.dataclass(frozen=True)
class Holder:
    """A run as its holder proves it holds it: the owner, the fencing
    token (the version it took the run at), and the lease each write
    extends, in seconds."""

    owner: str
    token: int
    lease: float


def _later(now: datetime.datetime, seconds: float) -> datetime.datetime:
    return now + datetime.timedelta(seconds=seconds)


# Built once: it runs in the transaction of every write a holder makes,
# and building it each time cost more CPU than running it.
_HOLD_RUN = notifications.update().where(
    notifications.c.uuid == sa.bindparam("key_uuid"),
    notifications.c.owner == sa.bindparam("key_owner"),
    notifications.c.version == sa.bindparam("key_token"),
    notifications.c.status == Status.RUNNING.value,
    notifications.c.lease_until > sa.bindparam("key_now"))


def _held(conn: Any, item: Notification) -> bool:
    """Whether ``item``'s last event is a gate's hold."""
    last = events.last(conn, item.uuid)
    return last is not None and last.kind == EventKind.HELD.value


def hold_run(conn: Any, uuid: str, holder: Holder,
             now: datetime.datetime) -> None:
    """Extend ``holder``'s lease on its run, or raise ``LeaseLost``. In the
    transaction of a write, this is the write's fencing check; the row
    stays locked until it commits, so no takeover comes in between."""
    done = conn.execute(_HOLD_RUN, {
        "key_uuid": uuid, "key_owner": holder.owner,
        "key_token": holder.token, "key_now": now,
        "lease_until": _later(now, holder.lease)})
    if done.rowcount != 1:
        raise exception.LeaseLost(
            f"notification {uuid} is no longer held by {holder.owner} "
            f"(its lease ran out by the database's clock, or another "
            f"process took the run over)")


class ClaimStore(NotificationStore):
    """The claim and lease methods of ``Store``, over its notifications."""

    def _live_runs(self, conn: Any, now: datetime.datetime,
                   hostname: str | None = None) -> Iterator[Notification]:
        query = notifications.select().where(
            notifications.c.status == Status.RUNNING.value)
        if hostname is not None:
            query = query.where(notifications.c.hostname == hostname)
        for row in conn.execute(query):
            item = row_to_notification(row)
            if not self._abandoned(item, now):
                yield item

    @staticmethod
    def _abandoned(item: Notification, now: datetime.datetime) -> bool:
        return ((item.lease_until is not None and item.lease_until <= now)
                or owner_gone(item.owner))

    def _take(self, conn: Any, item: Notification, owner: str,
              now: datetime.datetime, lease: float, actor: str,
              window: Window | None = None) -> Notification | None:
        """Compare-and-swap ``item`` to running under ``owner``, recorded
        as ``actor``'s claim, or its takeover of an abandoned run. A
        first start records ``window``'s domain, for the cap's count,
        and its release from a hold."""
        resumed = item.status is Status.RUNNING
        values = dict(status=Status.RUNNING.value, owner=owner,
                      lease_until=_later(now, lease),
                      next_attempt_at=None, updated_at=now,
                      version=item.version + 1,
                      started_at=item.started_at or now,
                      # A resumed run continues its attempt.
                      attempts=item.attempts + (0 if resumed else 1))
        domain = window.domain if window is not None else None
        # Only a first start is counted by the per-window cap.
        recorded = ({"failure_domain": domain}
                    if domain is not None and item.started_at is None
                    else {})
        done = conn.execute(notifications.update().where(
            notifications.c.uuid == item.uuid,
            notifications.c.version == item.version).values(
                **values, **recorded))
        if done.rowcount != 1:
            return None
        attempt = values["attempts"]
        if window is not None and window.released and _held(conn, item):
            events.insert(conn, item.uuid, now, Decision(
                actor, item.hostname, EventKind.RELEASED, window.released))
        if resumed:
            why = ("its process has exited" if owner_gone(item.owner)
                   else f"its lease ran out at "
                        f"{item.lease_until:%H:%M:%S} UTC")
            decision = Decision(
                actor, item.hostname, EventKind.TAKEN_OVER,
                f"taken over from {item.owner} ({why}): attempt {attempt} "
                f"resumes from its journal on {owner}")
        else:
            part = (f", one of failure domain {domain}, down as a whole"
                    if domain is not None else "")
            decision = Decision(actor, item.hostname, EventKind.CLAIMED,
                                f"attempt {attempt} starts on {owner}{part}")
        events.insert(conn, item.uuid, now, decision)
        return dataclasses.replace(item, status=Status.RUNNING, **recorded,
                                   **{k: v for k, v in values.items()
                                      if k != "status"})

    def _runnable(self, item: Notification, now: datetime.datetime) -> bool:
        if item.status is Status.RUNNING:
            return self._abandoned(item, now)
        return item.status in (Status.NEW, Status.ERROR) and (
            item.next_attempt_at is None or item.next_attempt_at <= now)

    def next_runnable(self, *, resume_only: bool = False,
                      skip: Collection[str] = ()) -> Notification | None:
        """The oldest runnable notification, unclaimed: new or in error,
        once due; or running under an owner that is gone. Never one for
        a host another live run is working on. ``resume_only`` looks at
        abandoned runs only; ``skip``: the uuids of those the caller
        passes over."""
        waiting = notifications.c.status.in_(
            [Status.NEW.value, Status.ERROR.value])
        running = notifications.c.status == Status.RUNNING.value
        query = notifications.select().where(
            running if resume_only else sa.or_(waiting, running),
        ).order_by(
            # Abandoned runs first: they may hold locks.
            sa.case((running, 0), else_=1),
            notifications.c.created_at, notifications.c.id)
        with self._tx() as conn:
            now = self.lease_clock(conn)
            busy = {n.hostname for n in self._live_runs(conn, now)}
            for row in conn.execute(query):
                item = row_to_notification(row)
                if (item.hostname not in busy and item.uuid not in skip
                        and self._runnable(item, now)):
                    return item
        return None

    def take(self, item: Notification, owner: str, lease: float, *,
             window: Window | None = None) -> Notification | None:
        """Claim ``item`` (from ``next_runnable``) for ``owner``; None if
        another process changed it first, if another live run now holds
        its host, or if it would start a host recovery beyond
        ``window``."""
        return retry_conflicts(
            lambda: self._take_under_lock(item, owner, lease, window))

    def _take_under_lock(self, item: Notification, owner: str,
                         lease: float, window: Window | None
                         ) -> Notification | None:
        with self._tx() as conn:
            lock_claims(conn)
            now = self.lease_clock(conn)
            row = conn.execute(notifications.select().where(
                notifications.c.uuid == item.uuid)).first()
            current = row_to_notification(row)
            if (current.version != item.version
                    or not self._runnable(current, now)
                    or any(live.uuid != current.uuid for live in
                           self._live_runs(conn, now, current.hostname))):
                return None
            if (window is not None and current.status is not Status.RUNNING
                    and current.kind is Kind.HOST_FAILURE
                    and not fits(self._started_within(
                        conn, now, window.seconds), window)):
                return None
            return self._take(conn, current, owner, now, lease, owner,
                              window)

    def hold(self, item: Notification, message: str, delay: float, *,
             event: Decision | None = None) -> bool:
        """Leave ``item`` waiting (new or error, attempts untouched) with
        the reason, for ``delay`` seconds. False if it changed
        meanwhile. ``event`` is recorded unless it is what the
        notification's last event says already."""
        return retry_conflicts(
            lambda: self._hold_once(item, message, delay, event))

    def _hold_once(self, item: Notification, message: str, delay: float,
                   event: Decision | None) -> bool:
        with self._tx() as conn:
            now = self.lease_clock(conn)
            done = conn.execute(notifications.update().where(
                notifications.c.uuid == item.uuid,
                notifications.c.version == item.version).values(
                    message=message, next_attempt_at=_later(now, delay),
                    updated_at=now, version=item.version + 1))
            if (done.rowcount == 1 and event is not None
                    and not events.repeats(conn, item.uuid, event)):
                events.insert(conn, item.uuid, now, event)
        return done.rowcount == 1

    def _started_within(self, conn: Any, now: datetime.datetime,
                        seconds: float) -> list[Start]:
        rows = conn.execute(sa.select(
            notifications.c.started_at, notifications.c.failure_domain
        ).where(
            notifications.c.kind == Kind.HOST_FAILURE.value,
            notifications.c.started_at > _later(now, -seconds)).order_by(
                notifications.c.started_at))
        starts: list[Start] = []
        seen: set[str] = set()
        for row in rows:
            if row.failure_domain in seen:
                continue
            if row.failure_domain is not None:
                seen.add(row.failure_domain)
            starts.append(Start((now - row.started_at).total_seconds(),
                                row.failure_domain))
        return starts

    def recoveries_started_within(self, seconds: float) -> list[Start]:
        """The host recovery starts of the last ``seconds``, oldest
        first; a failure domain's hosts down as a whole count once, at
        its first start."""
        with self._tx() as conn:
            return self._started_within(conn, self.lease_clock(conn),
                                        seconds)

    def claim_host(self, *, type: str, kind: Kind, hostname: str,
                   payload: dict[str, Any], origin: str, owner: str,
                   lease: float, actor: str, event: Decision,
                   source_host_uuid: str | None = None,
                   failover_segment_uuid: str | None = None
                   ) -> tuple[Notification, bool]:
        """Claim a run of ``hostname`` by hand, as the intake makes it
        (``intake.by_hand``): resume an abandoned one of ``kind``, or a
        host failure confirmed off that waits for its next attempt
        (returned with True; its claim names ``actor``), or record a
        new one, running under ``owner``, with ``event`` as its first
        event. Raise ``RecoveryInProgress`` if a live process is
        recovering the host, or an abandoned run of the other kind
        must finish first."""
        return retry_conflicts(lambda: self._claim_host_under_lock(
            type=type, kind=kind, hostname=hostname, payload=payload,
            origin=origin, owner=owner, lease=lease, actor=actor,
            event=event, source_host_uuid=source_host_uuid,
            failover_segment_uuid=failover_segment_uuid))

    def _claim_host_under_lock(self, *, type: str, kind: Kind,
                               hostname: str, payload: dict[str, Any],
                               origin: str, owner: str, lease: float,
                               actor: str, event: Decision,
                               source_host_uuid: str | None,
                               failover_segment_uuid: str | None
                               ) -> tuple[Notification, bool]:
        with self._tx() as conn:
            lock_claims(conn)
            now = self.lease_clock(conn)
            for live in self._live_runs(conn, now, hostname):
                raise exception.RecoveryInProgress(
                    f"{hostname} is being recovered by {live.owner} "
                    f"(notification {live.uuid}, since "
                    f"{live.updated_at:%Y-%m-%d %H:%M:%S} UTC)")
            # An interrupted drain holds back no failure or return of
            # the host: its next attempt finds the host changed and ends.
            kinds = [k.value for k in COMMANDS if k is kind
                     or Kind.HOST_DRAIN not in (k, kind)]
            row = conn.execute(notifications.select().where(
                notifications.c.hostname == hostname,
                notifications.c.kind.in_(kinds),
                notifications.c.status == Status.RUNNING.value)
                .order_by(notifications.c.id).limit(1)).first()
            if row is None and kind is Kind.HOST_FAILURE:
                row = confirmed_waiting(conn, hostname)
            if row is not None:
                item = row_to_notification(row)
                if item.kind is not kind:
                    raise exception.RecoveryInProgress(
                        f"an interrupted {item.event} run of {hostname} "
                        f"(notification {item.uuid}) must finish first: "
                        f"run 'recovery {COMMANDS[item.kind]} "
                        f"{hostname}'")
                taken = self._take(conn, item, owner, now, lease, actor)
                if taken is not None:
                    return taken, True
            # In the transaction of the check: no engine or other CLI can
            # claim the host in between.
            uuid = str(uuidlib.uuid4())
            conn.execute(notifications.insert().values(
                uuid=uuid, type=type, kind=kind.value,
                hostname=hostname, source_host_uuid=source_host_uuid,
                failover_segment_uuid=failover_segment_uuid,
                generated_time=now, payload=canonical_payload(payload),
                origin=origin, status=Status.RUNNING.value, attempts=1,
                owner=owner, started_at=now,
                lease_until=_later(now, lease), version=0, created_at=now,
                updated_at=now))
            events.insert(conn, uuid, now, event)
            return self._read(conn, uuid), False

    def renew_leases(self, holders: Mapping[str, Holder]) -> set[str]:
        """Extend each holder's lease on its run (``holders`` by the
        run's uuid), in one transaction and, for the leases of one owner
        and length (an engine's), one statement; return the runs no longer
        held (their lease ran out by the database's clock, or another
        process took them over). A lease that ran out is never
        revived."""
        groups: dict[tuple[str, float], list[tuple[str, int]]] = {}
        for uuid, holder in holders.items():
            groups.setdefault((holder.owner, holder.lease), []).append(
                (uuid, holder.token))
        lost: set[str] = set()
        with self._tx() as conn:
            now = self.lease_clock(conn)
            for (owner, lease), keys in groups.items():
                held = (sa.tuple_(notifications.c.uuid,
                                  notifications.c.version).in_(keys),
                        notifications.c.owner == owner,
                        notifications.c.status == Status.RUNNING.value,
                        notifications.c.lease_until > now)
                done = conn.execute(notifications.update().where(
                    *held).values(lease_until=_later(now, lease)))
                if done.rowcount == len(keys):
                    continue
                # Some are no longer held: the rows the update extended
                # are the ones that still match it.
                still = set(conn.execute(sa.select(
                    notifications.c.uuid).where(*held)).scalars())
                lost.update(uuid for uuid, _ in keys if uuid not in still)
        return lost

    def finish(self, uuid: str, status: Status, message: str, *,
               holder: Holder, retry_in: float | None = None,
               event: Decision | None = None) -> None:
        """End ``holder``'s run of a notification; ``retry_in`` seconds
        until the next attempt may start. ``LeaseLost`` if it no longer
        holds the run. ``event``: recorded with the end. A run that
        ends in error or failed after an operator confirmed its host off
        during the attempt is due again at once, in error."""
        with self._tx() as conn:
            now = self.lease_clock(conn)
            hold_run(conn, uuid, holder, now)
            if status in (Status.ERROR, Status.FAILED) and (
                    confirmed_since_claim(conn, uuid)):
                status, retry_in = Status.ERROR, None
                message = f"{message}; {RETRY_CONFIRMED}"
                event = event and dataclasses.replace(
                    event, kind=EventKind.ERROR, message=message)
            conn.execute(notifications.update().where(
                notifications.c.uuid == uuid).values(
                    status=status.value, message=message, owner=None,
                    lease_until=None, updated_at=now,
                    next_attempt_at=(None if retry_in is None
                                     else _later(now, retry_in)),
                    version=notifications.c.version + 1))
            if event is not None:
                events.insert(conn, uuid, now, event)
