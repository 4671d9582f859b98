"""Failover segments and their hosts in the store (Masakari's model).

A segment groups hosts and says how their failures are recovered; a host
is in exactly one segment. Edits that would change a recovery in flight
are refused (``InUse``): a segment's recovery is in flight while any of
its hosts has a notification that is not finished, failed or ignored.

Reserved hosts are taken by a recovery with a compare-and-swap, so two
recoveries never take the same one.
"""

import dataclasses
import datetime
import uuid as uuidlib
from typing import Any

import sqlalchemy as sa

from recovery import exception
from recovery.db import paging
from recovery.db.tables import hosts
from recovery.db.tables import notifications
from recovery.db.tables import segments
from recovery.db.transaction import Transactional
from recovery.notification import IN_FLIGHT

RECOVERY_METHODS = ("auto", "reserved_host", "auto_priority", "rh_priority")
# What a listing sorts by: Masakari's columns that are never NULL (a
# keyset page needs that).
SEGMENT_SORT_KEYS = frozenset({"id", "uuid", "name", "recovery_method",
                               "service_type", "enabled", "created_at",
                               "updated_at"})
HOST_SORT_KEYS = frozenset({"id", "uuid", "name", "type",
                            "control_attributes", "reserved",
                            "on_maintenance", "created_at", "updated_at"})


@dataclasses.dataclass(frozen=True)
class Segment:
    id: int
    uuid: str
    name: str
    description: str | None
    recovery_method: str
    service_type: str
    enabled: bool
    created_at: datetime.datetime
    updated_at: datetime.datetime


@dataclasses.dataclass(frozen=True)
class Host:
    id: int
    uuid: str
    name: str
    segment_uuid: str
    type: str
    control_attributes: str
    reserved: bool
    on_maintenance: bool
    claimed_by: str | None
    created_at: datetime.datetime
    updated_at: datetime.datetime


SEGMENT_FIELDS = frozenset({"name", "description", "recovery_method",
                            "service_type", "enabled"})
HOST_FIELDS = frozenset({"name", "type", "control_attributes", "reserved",
                         "on_maintenance"})


def _segment(row: Any) -> Segment:
    return Segment(**dict(row._mapping))


def _host(row: Any) -> Host:
    return Host(**dict(row._mapping))


class SegmentStore(Transactional):
    """The segment and host methods of ``Store``."""

    # -- segments ------------------------------------------------------------
    def create_segment(self, *, name: str, recovery_method: str,
                       now: datetime.datetime,
                       description: str | None = None,
                       service_type: str = "compute",
                       enabled: bool = True) -> Segment:
        uuid = str(uuidlib.uuid4())
        with self._tx() as conn:
            self._unique_segment_name(conn, name)
            conn.execute(segments.insert().values(
                uuid=uuid, name=name, description=description,
                recovery_method=recovery_method, service_type=service_type,
                enabled=enabled, created_at=now, updated_at=now))
        return self.get_segment(uuid)

    @staticmethod
    def _unique_segment_name(conn: Any, name: str,
                             other_than: str | None = None) -> None:
        query = sa.select(segments.c.uuid).where(segments.c.name == name)
        if other_than is not None:
            query = query.where(segments.c.uuid != other_than)
        if conn.execute(query).first() is not None:
            raise exception.Duplicate(f"a segment named {name!r} exists")

    def get_segment(self, uuid: str) -> Segment:
        """The segment with this uuid (or, for the CLI, this name)."""
        with self._tx() as conn:
            return self._segment(conn, uuid)

    @staticmethod
    def _segment(conn: Any, ident: str) -> Segment:
        """By uuid, else by name (a uuid wins over a name like it)."""
        row = conn.execute(segments.select().where(sa.or_(
            segments.c.uuid == ident, segments.c.name == ident)).order_by(
                (segments.c.uuid == ident).desc())).first()
        if row is None:
            raise exception.NotFound(f"no failover segment {ident}")
        return _segment(row)

    def list_segments(self, filters: dict[str, Any] | None = None,
                      limit: int | None = None,
                      marker: str | None = None,
                      sort_key: str = "created_at",
                      sort_dir: str = "desc") -> list[Segment]:
        """``marker``: the id, uuid or name of the last one seen."""
        query = segments.select()
        for key, value in (filters or {}).items():
            query = query.where(segments.c[key] == value)
        with self._tx() as conn:
            return [_segment(r) for r in paging.page(
                conn, query, segments, sort_key=sort_key,
                sort_dir=sort_dir, marker=marker, limit=limit,
                marker_where=marker and paging.by_id_or(
                    segments, marker, segments.c.uuid, segments.c.name))]

    def update_segment(self, uuid: str, changes: dict[str, Any],
                       now: datetime.datetime) -> Segment:
        _only(changes, SEGMENT_FIELDS)
        with self._tx() as conn:
            segment = self._segment(conn, uuid)
            self._refuse_in_flight(conn, segment, "update")
            if "name" in changes:
                self._unique_segment_name(conn, changes["name"],
                                          other_than=segment.uuid)
            conn.execute(segments.update().where(
                segments.c.uuid == segment.uuid).values(
                    **changes, updated_at=now))
        return self.get_segment(segment.uuid)

    def delete_segment(self, uuid: str) -> None:
        """Delete the segment and its hosts."""
        with self._tx() as conn:
            segment = self._segment(conn, uuid)
            self._refuse_in_flight(conn, segment, "delete")
            conn.execute(hosts.delete().where(
                hosts.c.segment_uuid == segment.uuid))
            conn.execute(segments.delete().where(
                segments.c.uuid == segment.uuid))

    @staticmethod
    def _refuse_in_flight(conn: Any, segment: Segment, what: str) -> None:
        names = sa.select(hosts.c.name).where(
            hosts.c.segment_uuid == segment.uuid)
        row = conn.execute(sa.select(
            notifications.c.uuid, notifications.c.hostname,
            notifications.c.status).where(
                notifications.c.hostname.in_(names),
                notifications.c.status.in_([s.value for s in IN_FLIGHT])
            ).order_by(notifications.c.id).limit(1)).first()
        if row is not None:
            raise exception.InUse(
                f"cannot {what}: segment {segment.name} has a recovery in "
                f"flight (notification {row.uuid} for host {row.hostname} "
                f"is {row.status}). Wait until it is finished, failed or "
                f"ignored ('recovery notifications show {row.uuid}')")

    # -- hosts ---------------------------------------------------------------
    def create_host(self, segment_uuid: str, *, name: str,
                    now: datetime.datetime, type: str = "COMPUTE",
                    control_attributes: str = "", reserved: bool = False,
                    on_maintenance: bool = False) -> Host:
        """Add a host to a segment. Allowed during a recovery of the
        segment: a reserved host added then is spare capacity for it."""
        uuid = str(uuidlib.uuid4())
        with self._tx() as conn:
            segment = self._segment(conn, segment_uuid)
            self._unique_host_name(conn, name)
            conn.execute(hosts.insert().values(
                uuid=uuid, name=name, segment_uuid=segment.uuid, type=type,
                control_attributes=control_attributes, reserved=reserved,
                on_maintenance=on_maintenance, created_at=now,
                updated_at=now))
        return self.get_host(segment.uuid, uuid)

    def _unique_host_name(self, conn: Any, name: str) -> None:
        row = conn.execute(sa.select(hosts.c.segment_uuid).where(
            hosts.c.name == name)).first()
        if row is not None:
            segment = self._segment(conn, row.segment_uuid)
            raise exception.Duplicate(
                f"host {name} is already in segment {segment.name}: a host "
                f"belongs to exactly one segment")

    def get_host(self, segment_uuid: str, ident: str) -> Host:
        with self._tx() as conn:
            return self._host(conn, self._segment(conn, segment_uuid), ident)

    @staticmethod
    def _host(conn: Any, segment: Segment, ident: str) -> Host:
        row = conn.execute(hosts.select().where(
            hosts.c.segment_uuid == segment.uuid,
            sa.or_(hosts.c.uuid == ident, hosts.c.name == ident)).order_by(
                (hosts.c.uuid == ident).desc())).first()
        if row is None:
            raise exception.NotFound(
                f"no host {ident} in segment {segment.name}")
        return _host(row)

    def list_hosts(self, segment_uuid: str,
                   filters: dict[str, Any] | None = None,
                   limit: int | None = None,
                   marker: str | None = None,
                   sort_key: str = "created_at",
                   sort_dir: str = "desc") -> list[Host]:
        """``marker``: the id, uuid or name of the last one seen."""
        with self._tx() as conn:
            segment = self._segment(conn, segment_uuid)
            mine = hosts.c.segment_uuid == segment.uuid
            query = hosts.select().where(mine)
            for key, value in (filters or {}).items():
                query = query.where(hosts.c[key] == value)
            return [_host(r) for r in paging.page(
                conn, query, hosts, sort_key=sort_key, sort_dir=sort_dir,
                marker=marker, limit=limit,
                marker_where=marker and sa.and_(mine, paging.by_id_or(
                    hosts, marker, hosts.c.uuid, hosts.c.name)))]

    def update_host(self, segment_uuid: str, ident: str,
                    changes: dict[str, Any],
                    now: datetime.datetime) -> Host:
        _only(changes, HOST_FIELDS)
        with self._tx() as conn:
            segment = self._segment(conn, segment_uuid)
            host = self._host(conn, segment, ident)
            self._refuse_in_flight(conn, segment, f"update host {host.name}")
            if changes.get("name", host.name) != host.name:
                self._unique_host_name(conn, changes["name"])
            values = dict(changes, updated_at=now)
            if "reserved" in changes:
                # Reserved again (or not): no longer a recovery's.
                values["claimed_by"] = None
            conn.execute(hosts.update().where(
                hosts.c.uuid == host.uuid).values(**values))
        return self.get_host(segment.uuid, host.uuid)

    def delete_host(self, segment_uuid: str, ident: str) -> None:
        with self._tx() as conn:
            segment = self._segment(conn, segment_uuid)
            host = self._host(conn, segment, ident)
            self._refuse_in_flight(conn, segment, f"delete host {host.name}")
            conn.execute(hosts.delete().where(hosts.c.uuid == host.uuid))

    # -- what recoveries need ------------------------------------------------
    def segment_host_names(self) -> set[str]:
        """The name of every host of every segment."""
        with self._tx() as conn:
            return set(conn.execute(sa.select(hosts.c.name)).scalars())

    def host_record(self, name: str) -> tuple[Host, Segment] | None:
        """The host named ``name`` and its segment, if it is in one."""
        with self._tx() as conn:
            row = conn.execute(hosts.select().where(
                hosts.c.name == name)).first()
            if row is None:
                return None
            host = _host(row)
            return host, self._segment(conn, host.segment_uuid)

    def reserved_hosts(self, segment_uuid: str,
                       notification_uuid: str) -> list[Host]:
        """The hosts a recovery may evacuate to, in the order to try them:
        those it took already (a resumed run), then the reserved hosts
        not on maintenance, by name."""
        with self._tx() as conn:
            rows = conn.execute(hosts.select().where(
                hosts.c.segment_uuid == segment_uuid,
                hosts.c.on_maintenance.is_(False),
                sa.or_(hosts.c.claimed_by == notification_uuid,
                       hosts.c.reserved.is_(True))).order_by(
                    hosts.c.reserved, hosts.c.name))
            return [_host(r) for r in rows]

    def claim_reserved(self, host_uuid: str, notification_uuid: str,
                       now: datetime.datetime) -> bool:
        """Take a reserved host for a recovery: it is no longer reserved.
        False if it was not reserved (another recovery took it)."""
        with self._tx() as conn:
            done = conn.execute(hosts.update().where(
                hosts.c.uuid == host_uuid,
                hosts.c.reserved.is_(True),
                hosts.c.on_maintenance.is_(False)).values(
                    reserved=False, claimed_by=notification_uuid,
                    updated_at=now))
        return done.rowcount == 1

    def release_reserved(self, host_uuid: str, notification_uuid: str,
                         now: datetime.datetime) -> None:
        """Give back a host this recovery took but could not use."""
        with self._tx() as conn:
            conn.execute(hosts.update().where(
                hosts.c.uuid == host_uuid,
                hosts.c.claimed_by == notification_uuid).values(
                    reserved=True, claimed_by=None, updated_at=now))


def _only(changes: dict[str, Any], allowed: frozenset[str]) -> None:
    unknown = sorted(set(changes) - allowed)
    if unknown:
        raise ValueError(f"cannot change {', '.join(unknown)}")
