"""Notifications in the store: recording them, reading them, and the
counts the safety gates and the crash-loop brake ask for.

Each notification's kind was decided at intake and is a column: the
counts select on it and never read a payload to find out what a
notification is.
"""

import datetime
import json
import uuid as uuidlib
from typing import Any

import sqlalchemy as sa
from oslo_db import exception as db_exc

from recovery import exception
from recovery.db import paging
from recovery.db.events import Decision
from recovery.db.events import insert as insert_event
from recovery.db.tables import instance_journal
from recovery.db.tables import notifications
from recovery.db.transaction import Transactional
from recovery.notification import IN_FLIGHT
from recovery.notification import Kind
from recovery.notification import Notification
from recovery.notification import Status

# Masakari's columns that are never NULL (a keyset page needs that).
SORT_KEYS = frozenset({"id", "created_at", "updated_at", "generated_time",
                       "status", "type", "hostname"})


def row_to_notification(row: Any) -> Notification:
    data = dict(row._mapping)
    data["payload"] = json.loads(data["payload"])
    data["status"] = Status(data["status"])
    data["kind"] = Kind(data["kind"])
    return Notification(**data)


def _shift(value: datetime.datetime,
           delta: datetime.timedelta) -> datetime.datetime:
    """``value + delta``, stopping at the ends of the datetime range."""
    try:
        return value + delta
    except OverflowError:
        end = datetime.datetime.max if delta > datetime.timedelta(0) else (
            datetime.datetime.min)
        return end.replace(tzinfo=datetime.timezone.utc)


def canonical_payload(payload: dict[str, Any]) -> str:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"))


class NotificationStore(Transactional):
    """The notification methods of ``Store``."""

    def add(self, *, type: str, kind: Kind, hostname: str,
            generated_time: datetime.datetime, payload: dict[str, Any],
            origin: str, status: Status, now: datetime.datetime,
            message: str | None = None, source_host_uuid: str | None = None,
            failover_segment_uuid: str | None = None,
            duplicate_window: float = 0,
            detection: str | None = None,
            event: Decision | None = None) -> Notification:
        """Store a notification; raise ``Duplicate`` if the same type, host
        and payload arrived with a generated_time no more than the window
        before this one's, or after it: as in Masakari, an event older
        than one already stored is stale, however much older. Unlike
        Masakari, one dated past the window beyond ``now`` (a monitor's
        clock ahead, a typo) blocks nothing: it would otherwise refuse
        every later report of the host's failure until that date.

        ``detection`` (the detector's): the failure's name. ``Duplicate``
        if it was stored already, by any engine, or if the host has an
        open host failure from anyone. ``event``: recorded with it."""
        values = dict(
            uuid=str(uuidlib.uuid4()), type=type, kind=kind.value,
            hostname=hostname, source_host_uuid=source_host_uuid,
            failover_segment_uuid=failover_segment_uuid,
            generated_time=generated_time,
            payload=canonical_payload(payload), origin=origin,
            status=status.value, message=message, attempts=0, version=0,
            created_at=now, updated_at=now, detection=detection)
        with self._tx() as conn:
            if detection is not None:
                self._check_undetected(conn, hostname, detection)
            if duplicate_window:
                window = datetime.timedelta(seconds=duplicate_window)
                earlier = conn.execute(
                    sa.select(notifications.c.uuid).where(
                        notifications.c.type == type,
                        notifications.c.hostname == hostname,
                        notifications.c.payload == values["payload"],
                        notifications.c.generated_time >= _shift(
                            generated_time, -window),
                        notifications.c.generated_time < _shift(
                            max(generated_time, now), window)
                    ).limit(1)).scalar()
                if earlier:
                    raise exception.Duplicate(
                        f"a {type} notification for {hostname} with the "
                        f"same payload was received within "
                        f"{duplicate_window:g} s: {earlier}")
            try:
                conn.execute(notifications.insert().values(**values))
            except (sa.exc.IntegrityError, db_exc.DBDuplicateEntry) as exc:
                if detection is None:
                    raise
                # Another engine stored it since the check.
                raise exception.Duplicate(
                    f"{detection} was detected already") from exc
            if event is not None:
                insert_event(conn, values["uuid"], now, event)
            # Read back in the same transaction: once it commits, the
            # caller has the notification (no second round trip to fail
            # after the notification was stored).
            return self._read(conn, values["uuid"])

    @staticmethod
    def _check_undetected(conn: sa.Connection, hostname: str,
                          detection: str) -> None:
        found = conn.execute(
            sa.select(notifications.c.uuid, notifications.c.detection)
            .where(sa.or_(
                notifications.c.detection == detection,
                sa.and_(notifications.c.hostname == hostname,
                        notifications.c.kind == Kind.HOST_FAILURE.value,
                        notifications.c.status.in_(
                            [s.value for s in IN_FLIGHT]))))
            .limit(1)).first()
        if found is not None:
            raise exception.Duplicate(
                f"{detection} was detected already" if found.detection
                == detection else f"{hostname} has an open host failure "
                f"already: {found.uuid}")

    def get(self, uuid: str) -> Notification:
        with self._tx() as conn:
            return self._read(conn, uuid)

    @staticmethod
    def _read(conn: sa.Connection, uuid: str) -> Notification:
        row = conn.execute(notifications.select().where(
            notifications.c.uuid == uuid)).first()
        if row is None:
            raise exception.NotFound(f"no notification {uuid}")
        return row_to_notification(row)

    def list_notifications(self, *, filters: dict[str, Any] | None = None,
             generated_since: datetime.datetime | None = None,
             limit: int | None = None, marker: str | None = None,
             sort_key: str = "created_at", sort_dir: str = "desc",
             project_id: str | None = None) -> list[Notification]:
        """``marker``: the id or uuid of the last one seen;
        ``project_id``: only those with an instance of that project in
        their journal, the marker one of them."""
        query, owned = notifications.select(), sa.true()
        if project_id is not None:
            owned = notifications.c.uuid.in_(
                sa.select(instance_journal.c.notification_uuid).where(
                    instance_journal.c.project_id == project_id))
            query = query.where(owned)
        for key, value in (filters or {}).items():
            query = query.where(notifications.c[key] == value)
        if generated_since is not None:
            query = query.where(
                notifications.c.generated_time >= generated_since)
        with self._tx() as conn:
            return [row_to_notification(r) for r in paging.page(
                conn, query, notifications, sort_key=sort_key,
                sort_dir=sort_dir, marker=marker, limit=limit,
                marker_where=marker and sa.and_(paging.by_id_or(
                    notifications, marker, notifications.c.uuid), owned))]

    def count_notifications(self) -> dict[tuple[str, str], int]:
        """How many notifications of each (type, status) are stored."""
        with self._tx() as conn:
            return {(r.type, r.status): r.n for r in conn.execute(
                sa.select(notifications.c.type, notifications.c.status,
                          sa.func.count().label("n")).group_by(
                    notifications.c.type, notifications.c.status))}

    # -- what the gates and the crash-loop brake count -----------------------
    def last_host_failure(self, hostname: str) -> str | None:
        """The uuid of ``hostname``'s latest finished host failure."""
        with self._tx() as conn:
            return conn.execute(sa.select(notifications.c.uuid).where(
                notifications.c.hostname == hostname,
                notifications.c.kind == Kind.HOST_FAILURE.value,
                notifications.c.status == Status.FINISHED.value)
                .order_by(notifications.c.id.desc()).limit(1)).scalar()

    def hosts_in_recovery(self) -> set[str]:
        """Hosts with a host failure being recovered."""
        with self._tx() as conn:
            rows = conn.execute(sa.select(notifications.c.hostname).where(
                notifications.c.kind == Kind.HOST_FAILURE.value,
                notifications.c.status == Status.RUNNING.value))
            return {r.hostname for r in rows}

    def hosts_acting(self, kind: Kind) -> set[str]:
        """Hosts with a notification of ``kind`` not ended yet: new,
        running, or due again after an error."""
        with self._tx() as conn:
            rows = conn.execute(sa.select(notifications.c.hostname).where(
                notifications.c.kind == kind.value,
                notifications.c.status.in_([Status.NEW.value,
                                            Status.RUNNING.value,
                                            Status.ERROR.value])))
            return {r.hostname for r in rows}

    def restarts_since(self, instance_uuid: str, since: datetime.datetime,
                       excluding_uuid: str | None = None
                       ) -> list[datetime.datetime]:
        """When each restart of ``instance_uuid`` by the instance-failure
        flow started, if at or after ``since``, oldest first: its
        notifications that ended finished, other than ``excluding_uuid``.
        Ignored ones and crash-loop refusals restarted nothing; one in
        error is retried as itself (up to [engine] retry_max_attempts)."""
        query = sa.select(
            notifications.c.started_at, notifications.c.payload).where(
                notifications.c.kind == Kind.INSTANCE.value,
                notifications.c.status == Status.FINISHED.value,
                notifications.c.started_at >= since)
        if excluding_uuid is not None:
            query = query.where(notifications.c.uuid != excluding_uuid)
        wanted = instance_uuid.lower()
        with self._tx() as conn:
            rows = conn.execute(query.order_by(notifications.c.started_at))
            return [r.started_at for r in rows if str(json.loads(
                r.payload).get("instance_uuid", "")).lower() == wanted]
