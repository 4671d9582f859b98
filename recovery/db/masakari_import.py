"""``recovery db import-masakari``: a Masakari 22 database's failover
segments, hosts and notification history (with its vmoves) brought into
recovery's store, for an operator who switches from Masakari.

The UUIDs are kept: monitors, scripts and clients that name a segment, a
host or a notification by its UUID go on working. They are the import's
key too: an entry recovery has already (same UUID, same content) is not
imported again, and one it has with other content is left as it is and
reported, never overwritten. Journal entries (Masakari's vmoves) are
keyed by their notification and instance, as recovery keys them.

Masakari's database is only read: the connection is read-only where the
backend allows it (PostgreSQL's default_transaction_read_only, MariaDB's
and MySQL's SET SESSION TRANSACTION READ ONLY, SQLite's query_only) and
the import sends it SELECTs alone, in one transaction: one snapshot even
while Masakari still writes.

Not brought over, and said so: soft-deleted rows (``deleted != 0``, which
Masakari no longer shows), and what recovery's schema cannot hold as
Masakari has it (a notification whose type and event no flow of
recovery's acts on, a vmove that is not an evacuation, a second vmove of
one instance in one notification). A notification that is still new,
running or error in Masakari is brought as history, ``ignored`` with a
message that says what Masakari had: Masakari may still be working on it
(or retry it, for error), and recovery must not start a second recovery
of the same host behind its back; ignored is a status that no engine
acts on, no safety gate counts and no segment edit waits for.
"""

import dataclasses
import datetime
import json
import os
from collections import Counter
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any

import prettytable
import sqlalchemy as sa

from recovery import exception
from recovery.db import connection
from recovery.db.notifications import canonical_payload
from recovery.db.store import Store
from recovery.db.tables import hosts
from recovery.db.tables import instance_journal
from recovery.db.tables import notifications
from recovery.db.tables import segments
from recovery.notification import COMMANDS
from recovery.notification import IN_FLIGHT
from recovery.notification import Status
from recovery.notification import classify

#: Masakari 22's schema: the head of its alembic migrations.
REVISION = "13adff5efb9a"
#: The origin of a notification the import brought.
ORIGIN = "masakari"
#: Seconds to connect to Masakari's database server, and for one
#: statement (one table read) to answer.
CONNECT_TIMEOUT = 10
READ_TIMEOUT = 300
# Rows read per IN (...) query against recovery's store.
_CHUNK = 500

# What the entries' results say.
IMPORTED = "imported"
PRESENT = "already imported"
SKIPPED = "skipped"

# Masakari 22's tables, as far as the import reads them
# (masakari/db/sqlalchemy/models.py and its migrations).
_masakari = sa.MetaData()


def _masakari_table(name: str, *columns: sa.Column) -> sa.Table:
    """With Masakari's id, timestamps and soft-delete mark."""
    return sa.Table(
        name, _masakari, sa.Column("id", sa.Integer, primary_key=True),
        *columns, sa.Column("created_at", sa.DateTime),
        sa.Column("updated_at", sa.DateTime),
        sa.Column("deleted", sa.Integer))


M_SEGMENTS = _masakari_table(
    "failover_segments", sa.Column("uuid", sa.String),
    sa.Column("name", sa.String), sa.Column("service_type", sa.String),
    sa.Column("enabled", sa.Boolean), sa.Column("description", sa.Text),
    sa.Column("recovery_method", sa.String))
M_HOSTS = _masakari_table(
    "hosts", sa.Column("uuid", sa.String), sa.Column("name", sa.String),
    sa.Column("reserved", sa.Boolean), sa.Column("type", sa.String),
    sa.Column("control_attributes", sa.Text),
    sa.Column("on_maintenance", sa.Boolean),
    sa.Column("failover_segment_id", sa.String))
M_NOTIFICATIONS = _masakari_table(
    "notifications", sa.Column("notification_uuid", sa.String),
    sa.Column("generated_time", sa.DateTime), sa.Column("type", sa.String),
    sa.Column("payload", sa.Text), sa.Column("status", sa.String),
    sa.Column("source_host_uuid", sa.String),
    sa.Column("failover_segment_uuid", sa.String),
    sa.Column("message", sa.Text))
M_VMOVES = _masakari_table(
    "vmoves", sa.Column("uuid", sa.String),
    sa.Column("notification_uuid", sa.String),
    sa.Column("instance_uuid", sa.String),
    sa.Column("instance_name", sa.String),
    sa.Column("source_host", sa.String), sa.Column("dest_host", sa.String),
    sa.Column("start_time", sa.DateTime), sa.Column("end_time", sa.DateTime),
    sa.Column("type", sa.String), sa.Column("status", sa.String),
    sa.Column("message", sa.Text))
M_VERSION = sa.Table("masakari_alembic_version", _masakari,
                     sa.Column("version_num", sa.String))

# A vmove's status as a journal entry's phase and outcome; recovery's API
# shows them as the same status again (recovery.api.views.vmove).
_VMOVE_STATES = {
    "pending": ("pending", None), "ongoing": ("evacuating", None),
    "succeeded": ("done", "recovered"), "failed": ("done", "failed"),
    "ignored": ("done", "skipped")}
# A vmove of no status is one Masakari had not started.
_NO_STATUS = "pending"


@dataclasses.dataclass(frozen=True)
class Item:
    """One entry of Masakari's, and what the import did with it."""

    what: str       # segment, host, notification or vmove
    uuid: str
    name: str
    result: str     # IMPORTED, PRESENT or SKIPPED
    reason: str = ""
    # Skipped although Masakari shows it (not a soft-deleted row): it is
    # left behind, and the command says so in its exit code.
    left_behind: bool = False


@dataclasses.dataclass
class Report:
    source: str     # the URL, without its password
    dry_run: bool
    items: list[Item] = dataclasses.field(default_factory=list)
    # Journal entries (vmoves) brought with their notifications.
    vmoves: int = 0

    @property
    def left_behind(self) -> list[Item]:
        return [i for i in self.items if i.left_behind]

    def summary(self) -> str:
        counted = Counter((i.result, i.what) for i in self.items)
        counted[IMPORTED, "vmove"] += self.vmoves
        parts = []
        for result in (IMPORTED, PRESENT, SKIPPED):
            shown = ", ".join(
                _count(counted[result, what], what)
                for what in ("segment", "host", "notification", "vmove")
                if counted[result, what])
            word = "would import" if (self.dry_run and result == IMPORTED) \
                else result
            parts.append(f"{word}: {shown or 'nothing'}")
        return "; ".join(parts)

    def render(self) -> str:
        table = prettytable.PrettyTable(
            ["What", "UUID", "Name", "Result", "Reason"])
        table.align = "l"
        table.max_width["Reason"] = 72
        for item in self.items:
            result = "would import" if (
                self.dry_run and item.result == IMPORTED) else item.result
            table.add_row([item.what, item.uuid, item.name, result,
                           item.reason])
        title = f"Masakari's database {self.source}"
        if self.dry_run:
            title += " (dry run: nothing written)"
        lines = [title, table.get_string(), self.summary()]
        left = len(self.left_behind)
        if left:
            were = "entry was" if left == 1 else "entries were"
            lines.append(f"{left} live {were} left behind: see their "
                         f"reasons above")
        return "\n".join(lines)


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


@dataclasses.dataclass(frozen=True)
class Source:
    """Masakari's rows, every one (soft-deleted too), by id."""

    segments: list[Any]
    hosts: list[Any]
    notifications: list[Any]
    vmoves: list[Any]


# -- reading Masakari's database --------------------------------------------
def source_url(url: str) -> sa.engine.URL:
    """The URL as SQLAlchemy and oslo.db write it; a backend without a
    driver gets recovery's. Masakari runs on the backends of recovery's
    own store (SQLite for a database built in a test)."""
    return connection.parse(
        url, "--from", "--from: Masakari's database cannot be {backend}; "
        "give a mysql://, mysql+pymysql://, postgresql:// or "
        "postgresql+psycopg:// URL")


def open_source(url: str) -> sa.engine.Engine:
    """An engine on Masakari's database whose every connection is
    read-only, and whose connects and reads end in time."""
    parsed = source_url(url)
    backend = parsed.get_backend_name()
    # SQLite would create a missing file: a typo must not leave one.
    if backend == "sqlite" and parsed.database not in (None, "", ":memory:") \
            and not os.path.isfile(parsed.database):
        raise exception.ConfigError(
            f"--from: there is no SQLite database at {parsed.database}")
    connect_args: dict[str, Any] = {}
    if backend == "postgresql":
        connect_args = {
            "connect_timeout": CONNECT_TIMEOUT,
            "options": f"-c default_transaction_read_only=on "
                       f"-c statement_timeout={READ_TIMEOUT * 1000}"}
    elif backend in ("mysql", "mariadb"):
        connect_args = {"connect_timeout": CONNECT_TIMEOUT,
                        "read_timeout": READ_TIMEOUT,
                        "write_timeout": READ_TIMEOUT}
    try:
        engine = sa.create_engine(parsed, poolclass=sa.pool.NullPool,
                                  connect_args=connect_args)
    except (ImportError, sa.exc.NoSuchModuleError) as exc:
        raise exception.ConfigError(
            f"--from: the driver {parsed.drivername} is not installed "
            f"({exc}); use mysql+pymysql:// or postgresql+psycopg://"
        ) from exc
    # PostgreSQL's is in the connection's options above.
    statement = {"mysql": "SET SESSION TRANSACTION READ ONLY",
                 "mariadb": "SET SESSION TRANSACTION READ ONLY",
                 "sqlite": "PRAGMA query_only = ON"}.get(backend)
    if statement is not None:
        @sa.event.listens_for(engine, "connect")
        def _read_only(dbapi_connection: Any, record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute(statement)
            cursor.close()
    return engine


def read(engine: sa.engine.Engine) -> Source:
    """Every row of Masakari's four tables, in one read-only transaction
    (one snapshot: repeatable read on a server)."""
    shown = engine.url.render_as_string(hide_password=True)
    try:
        with engine.connect() as conn:
            if engine.dialect.name != "sqlite":
                conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():
                _check_revision(conn, shown)
                return Source(*(
                    conn.execute(sa.select(table).order_by(table.c.id)).all()
                    for table in (M_SEGMENTS, M_HOSTS, M_NOTIFICATIONS,
                                  M_VMOVES)))
    except sa.exc.OperationalError as exc:
        raise exception.StoreUnavailable(
            f"Masakari's database {shown} cannot be read: "
            f"{getattr(exc, 'orig', None) or exc}") from exc
    except sa.exc.SQLAlchemyError as exc:
        raise exception.StoreError(
            f"Masakari's database {shown} refused a read: "
            f"{getattr(exc, 'orig', None) or exc}") from exc


def _check_revision(conn: sa.Connection, shown: str) -> None:
    if not sa.inspect(conn).has_table(M_VERSION.name):
        raise exception.ConfigError(
            f"{shown} is not a Masakari 22 database: it has no "
            f"{M_VERSION.name} table ('masakari-manage db sync' of Masakari "
            f"22 makes it)")
    revision = conn.execute(sa.select(M_VERSION.c.version_num)).scalar()
    if revision != REVISION:
        raise exception.ConfigError(
            f"{shown} is at Masakari schema revision {revision}, not "
            f"Masakari 22's {REVISION}: upgrade it with Masakari 22's "
            f"'masakari-manage db sync' first")


# -- mapping ----------------------------------------------------------------
def _utc(value: datetime.datetime | None) -> datetime.datetime | None:
    """Masakari's times are naive UTC."""
    if value is None:
        return None
    return value.replace(tzinfo=datetime.timezone.utc)


@dataclasses.dataclass
class _Entry:
    """A live Masakari row as recovery's: ``values`` to insert, of which
    ``compared`` must match an entry recovery has already."""

    item: Item
    values: dict[str, Any]
    compared: tuple[str, ...]
    # A notification's journal entries, and its vmoves left out.
    journal: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    skipped: list[Item] = dataclasses.field(default_factory=list)


def _stamps(row: Any, fallback: datetime.datetime | None,
            now: datetime.datetime) -> tuple[dict[str, Any], tuple]:
    """created_at and updated_at, which recovery always has: Masakari
    leaves updated_at NULL until the first update (the import takes
    created_at). A time the import had to make up (``now``) is not
    compared on a later run."""
    created = _utc(row.created_at) or _utc(row.updated_at) or fallback
    compared: tuple[str, ...] = ("created_at", "updated_at")
    if created is None:
        created, compared = now, ()
    return ({"created_at": created,
             "updated_at": _utc(row.updated_at) or created}, compared)


def _segment(row: Any, now: datetime.datetime) -> _Entry:
    stamps, compared = _stamps(row, None, now)
    values = dict(
        uuid=row.uuid, name=row.name, description=row.description,
        recovery_method=row.recovery_method,
        service_type=row.service_type,
        # NULL is Masakari's default: enabled.
        enabled=True if row.enabled is None else row.enabled, **stamps)
    return _Entry(Item("segment", row.uuid, row.name, IMPORTED), values,
                  ("name", "description", "recovery_method", "service_type",
                   "enabled", *compared))


def _host(row: Any, segment_name: str, now: datetime.datetime) -> _Entry:
    stamps, compared = _stamps(row, None, now)
    values = dict(
        uuid=row.uuid, name=row.name, segment_uuid=row.failover_segment_id,
        type=row.type, control_attributes=row.control_attributes,
        reserved=bool(row.reserved),
        on_maintenance=bool(row.on_maintenance), **stamps)
    return _Entry(Item("host", row.uuid, row.name, IMPORTED,
                       f"in segment {segment_name}"), values,
                  ("name", "segment_uuid", "type", "control_attributes",
                   "reserved", "on_maintenance", *compared))


def _notification(row: Any, hostname: str, vmoves: list[Any],
                  now: datetime.datetime) -> _Entry:
    """Raises ``ValueError`` with the reason it cannot be imported."""
    uuid = row.notification_uuid
    try:
        payload = json.loads(row.payload) if row.payload else {}
    except ValueError as exc:
        raise ValueError(f"its payload is not JSON ({exc})") from exc
    if not isinstance(payload, dict):
        raise ValueError("its payload is not a JSON object")
    kind = classify(row.type, payload)
    if row.status not in {s.value for s in Status}:
        raise ValueError(f"its status {row.status!r} is not one of "
                         f"Masakari's")
    status, message = Status(row.status), row.message
    name = f"{row.type} {hostname}"
    reason = ""
    if status in IN_FLIGHT:
        said = f" ({message})" if message else ""
        todo = (f"; if it still needs it: 'recovery {COMMANDS[kind]} "
                f"{hostname}'" if kind in COMMANDS else "")
        message = (f"Imported from Masakari, where it was {status.value}"
                   f"{said}: Masakari may still have been working on it, "
                   f"so recovery does not act on it. Check {hostname}"
                   f"{todo}")
        reason = f"as ignored: it was {status.value} in Masakari, which " \
                 f"may still be working on it"
        status = Status.IGNORED
    stamps, compared = _stamps(row, _utc(row.generated_time), now)
    values = dict(
        uuid=uuid, type=row.type, kind=kind.value, hostname=hostname,
        source_host_uuid=row.source_host_uuid,
        failover_segment_uuid=row.failover_segment_uuid,
        generated_time=_utc(row.generated_time),
        payload=canonical_payload(payload), origin=ORIGIN,
        status=status.value, message=message, attempts=0, version=0,
        **stamps)
    entry = _Entry(Item("notification", uuid, name, IMPORTED, reason),
                   values,
                   ("type", "hostname", "source_host_uuid",
                    "failover_segment_uuid", "generated_time", "payload",
                    "status", "message", *compared))
    seen: set[str] = set()
    for vmove in vmoves:
        skip = _vmove_problem(vmove, seen)
        if skip:
            entry.skipped.append(Item("vmove", vmove.uuid,
                                      vmove.instance_name, SKIPPED,
                                      f"of notification {uuid}: {skip}",
                                      left_behind=True))
            continue
        seen.add(vmove.instance_uuid)
        entry.journal.append(_journal(vmove, hostname, uuid, now))
    if entry.journal:
        entry.item = dataclasses.replace(entry.item, reason="; ".join(
            filter(None, [reason,
                            f"with {_count(len(entry.journal), 'vmove')}"])))
    return entry


def _vmove_problem(vmove: Any, seen: set[str]) -> str | None:
    if vmove.type not in (None, "evacuation"):
        return (f"a {vmove.type} (recovery's journal holds evacuations "
                f"only)")
    if (vmove.status or _NO_STATUS) not in _VMOVE_STATES:
        return f"its status {vmove.status!r} is not one of Masakari's"
    if vmove.instance_uuid in seen:
        return (f"a second vmove of instance {vmove.instance_uuid} (recovery "
                f"keeps one journal entry per instance and notification)")
    return None


def _journal(vmove: Any, hostname: str, notification_uuid: str,
             now: datetime.datetime) -> dict[str, Any]:
    phase, outcome = _VMOVE_STATES[vmove.status or _NO_STATUS]
    stamps, _ = _stamps(vmove, None, now)
    return dict(
        notification_uuid=notification_uuid,
        instance_uuid=vmove.instance_uuid, name=vmove.instance_name,
        source_host=vmove.source_host or hostname,
        dest_host=vmove.dest_host,
        # Masakari does not record the instance's state.
        original_state="", phase=phase, outcome=outcome,
        reason=vmove.message, locked_by_us=False,
        started_at=_utc(vmove.start_time), finished_at=_utc(vmove.end_time),
        **stamps)


# What must match in a journal entry recovery has already.
_JOURNAL_COMPARED = ("name", "source_host", "dest_host", "phase", "outcome",
                     "reason", "started_at", "finished_at", "created_at")


def _same(mine: Any, theirs: Any) -> bool:
    """A MariaDB/MySQL store keeps whole seconds of a time."""
    if isinstance(mine, datetime.datetime) and isinstance(
            theirs, datetime.datetime):
        return abs(mine - theirs) < datetime.timedelta(seconds=1)
    return mine == theirs


def _differences(wanted: Mapping[str, Any], row: Mapping[str, Any],
                 keys: Iterable[str]) -> list[str]:
    return [f"{key} {row[key]!r} in recovery, {wanted[key]!r} in Masakari"
            for key in keys if not _same(row[key], wanted[key])]


# -- the import ---------------------------------------------------------------
def run(store: Store, source: Source, *, url: str, now: datetime.datetime,
        dry_run: bool = False) -> Report:
    """Bring ``source``'s live rows into ``store``, in one transaction:
    compared with what the store has in it, so that nothing is imported
    twice even while another import runs. ``dry_run``: the same report,
    nothing written."""
    report = Report(url, dry_run)
    # The store's own transactions: the import is one more writer of its
    # tables, through the same choke point (recovery.db.transaction).
    with store._tx() as conn:
        plan = _Plan(conn, source, now, report)
        plan.segments()
        plan.hosts()
        plan.notifications()
        if not dry_run:
            plan.write()
    return report


class _Plan:
    """What to insert, decided against the store's rows in ``conn``."""

    def __init__(self, conn: sa.Connection, source: Source,
                 now: datetime.datetime, report: Report):
        self.conn, self.source, self.now = conn, source, now
        self.report = report
        self.new_segments: list[dict[str, Any]] = []
        self.new_hosts: list[dict[str, Any]] = []
        self.new_notifications: list[_Entry] = []
        # Masakari's live segments that recovery has, or will have.
        self.segments_in: dict[str, str] = {}

    def _add(self, item: Item) -> None:
        self.report.items.append(item)

    def _deleted(self, what: str, uuid: str, name: str,
                 more: str = "") -> None:
        self._add(Item(what, uuid, name, SKIPPED,
                       f"soft-deleted in Masakari (not live){more}"))

    def _existing(self, table: sa.Table,
                  uuids: list[str]) -> dict[str, Any]:
        found = {}
        for start in range(0, len(uuids), _CHUNK):
            rows = self.conn.execute(table.select().where(
                table.c.uuid.in_(uuids[start:start + _CHUNK])))
            found.update({r.uuid: r._mapping for r in rows})
        return found

    def _names(self, table: sa.Table) -> dict[str, str]:
        return dict(self.conn.execute(sa.select(table.c.name,
                                                table.c.uuid)).all())

    def _place(self, entry: _Entry, existing: Mapping[str, Any] | None,
               names: dict[str, str], new: list[dict[str, Any]]) -> bool:
        """Decide on a segment or host; True if recovery has it (or
        will)."""
        item = entry.item
        if existing is not None:
            differ = _differences(entry.values, existing, entry.compared)
            if differ:
                self._add(dataclasses.replace(
                    item, result=SKIPPED, left_behind=True,
                    reason=f"recovery has it with other content, left as "
                           f"it is: {'; '.join(differ)}"))
            else:
                self._add(dataclasses.replace(item, result=PRESENT))
            return True
        taken = names.get(item.name)
        if taken is not None:
            self._add(dataclasses.replace(
                item, result=SKIPPED, left_behind=True,
                reason=f"recovery has another {item.what} named "
                       f"{item.name} ({taken})"))
            return False
        names[item.name] = item.uuid
        new.append(entry.values)
        self._add(item)
        return True

    def segments(self) -> None:
        rows = self.source.segments
        existing = self._existing(segments, [r.uuid for r in rows
                                             if not r.deleted])
        names = self._names(segments)
        for row in rows:
            if row.deleted:
                self._deleted("segment", row.uuid, row.name)
                continue
            if self._place(_segment(row, self.now), existing.get(row.uuid),
                           names, self.new_segments):
                self.segments_in[row.uuid] = row.name

    def hosts(self) -> None:
        rows = self.source.hosts
        existing = self._existing(hosts, [r.uuid for r in rows
                                          if not r.deleted])
        names = self._names(hosts)
        live = {r.uuid: r.name for r in self.source.segments
                if not r.deleted}
        for row in rows:
            if row.deleted:
                self._deleted("host", row.uuid, row.name)
            elif row.failover_segment_id not in live:
                self._deleted("host", row.uuid, row.name,
                              f": its segment {row.failover_segment_id} is")
            elif row.failover_segment_id not in self.segments_in:
                self._add(Item(
                    "host", row.uuid, row.name, SKIPPED,
                    f"its segment {live[row.failover_segment_id]} was not "
                    f"imported", left_behind=True))
            else:
                self._place(_host(row, live[row.failover_segment_id],
                                  self.now),
                            existing.get(row.uuid), names, self.new_hosts)

    def notifications(self) -> None:
        rows = self.source.notifications
        # A host deleted since keeps its name in its soft-deleted row.
        hostnames = {r.uuid: r.name for r in self.source.hosts}
        vmoves: dict[str, list[Any]] = {}
        deleted_vmoves: dict[str, list[Any]] = {}
        for vmove in self.source.vmoves:
            into = deleted_vmoves if vmove.deleted else vmoves
            into.setdefault(vmove.notification_uuid, []).append(vmove)
        live = [r.notification_uuid for r in rows if not r.deleted]
        existing = self._existing(notifications, live)
        journals = self._journals([u for u in live if u in existing])
        for row in rows:
            uuid = row.notification_uuid
            hostname = hostnames.get(row.source_host_uuid)
            name = f"{row.type} {hostname or row.source_host_uuid}"
            if row.deleted:
                more = len(vmoves.get(uuid, ())) + len(
                    deleted_vmoves.get(uuid, ()))
                self._deleted("notification", uuid, name, f", with its "
                              f"{_count(more, 'vmove')}" if more else "")
                continue
            for vmove in deleted_vmoves.get(uuid, ()):
                self._deleted("vmove", vmove.uuid, vmove.instance_name,
                              f", of notification {uuid}")
            if hostname is None:
                self._add(Item("notification", uuid, name, SKIPPED,
                               f"its host {row.source_host_uuid} is not in "
                               f"Masakari's database",
                               left_behind=True))
                continue
            try:
                entry = _notification(row, hostname, vmoves.get(uuid, []),
                                      self.now)
            except ValueError as exc:
                self._add(Item("notification", uuid, name, SKIPPED,
                               str(exc), left_behind=True))
                continue
            if uuid in existing:
                self._compare(entry, existing[uuid], journals.get(uuid, {}))
            else:
                self._add(entry.item)
                self.report.vmoves += len(entry.journal)
                self.new_notifications.append(entry)
            for item in entry.skipped:
                self._add(item)

    def _journals(self, uuids: list[str]
                  ) -> dict[str, dict[str, Mapping[str, Any]]]:
        found: dict[str, dict[str, Mapping[str, Any]]] = {}
        for start in range(0, len(uuids), _CHUNK):
            rows = self.conn.execute(instance_journal.select().where(
                instance_journal.c.notification_uuid.in_(
                    uuids[start:start + _CHUNK])))
            for r in rows:
                found.setdefault(r.notification_uuid, {})[
                    r.instance_uuid] = r._mapping
        return found

    def _compare(self, entry: _Entry, row: Mapping[str, Any],
                 journal: dict[str, Mapping[str, Any]]) -> None:
        differ = _differences(entry.values, row, entry.compared)
        wanted = {j["instance_uuid"]: j for j in entry.journal}
        if set(wanted) != set(journal):
            differ.append(f"vmoves of instances {sorted(journal)} in "
                          f"recovery, {sorted(wanted)} in Masakari")
        else:
            for instance, values in wanted.items():
                differ.extend(
                    f"vmove of {instance}: {d}" for d in _differences(
                        values, journal[instance], _JOURNAL_COMPARED))
        if differ:
            self._add(dataclasses.replace(
                entry.item, result=SKIPPED, left_behind=True,
                reason=f"recovery has it with other content, left as it "
                       f"is: {'; '.join(differ)}"))
        else:
            self._add(dataclasses.replace(entry.item, result=PRESENT))

    def write(self) -> None:
        for table, values in ((segments, self.new_segments),
                              (hosts, self.new_hosts),
                              (notifications, [e.values for e in
                                               self.new_notifications]),
                              (instance_journal, [
                                  j for e in self.new_notifications
                                  for j in e.journal])):
            if values:
                self.conn.execute(table.insert(), values)


def from_url(store: Store, url: str, *, now: datetime.datetime,
             dry_run: bool = False) -> Report:
    """Import from the Masakari database at ``url`` (only read)."""
    engine = open_source(url)
    try:
        source = read(engine)
    finally:
        engine.dispose()
    return run(store, source, now=now, dry_run=dry_run,
               url=engine.url.render_as_string(hide_password=True))
