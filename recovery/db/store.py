"""The store: one object over SQLAlchemy that the API, the engine and the
CLI share.

Every write is its own transaction, committed when the method returns: a
notification is durable before the API answers 202, and a journal entry is
durable before the side effect it announces. On SQLite every transaction
begins IMMEDIATE, so "check, then write" (the duplicate check, claiming a
notification) is atomic across processes.
"""

import dataclasses
import datetime
import enum
import json
import os
import socket
import uuid as uuidlib
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from alembic import command as alembic_command
from alembic.config import Config as AlembicConfig

from recovery import exception
from recovery.db.segments import SegmentStore
from recovery.db.tables import arming
from recovery.db.tables import instance_journal
from recovery.db.tables import notifications
from recovery.db.tables import step_events
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import Phase

# Built once: an instance's entry is written before each of its steps, and
# building the statement each time cost more CPU than the rest of a step.
# The SET clause comes from the parameters named like columns.
_UPDATE_JOURNAL = instance_journal.update().where(
    instance_journal.c.notification_uuid == sa.bindparam("key_notification"),
    instance_journal.c.instance_uuid == sa.bindparam("key_instance"))
_INSERT_JOURNAL = instance_journal.insert()


# The command that runs each COMPUTE_HOST event by hand.
_COMMANDS = {"STOPPED": "host-failure", "STARTED": "host-return"}


class Status(str, enum.Enum):
    NEW = "new"
    RUNNING = "running"
    FINISHED = "finished"
    ERROR = "error"
    FAILED = "failed"
    IGNORED = "ignored"


SORT_KEYS = frozenset({"created_at", "updated_at", "generated_time",
                       "status", "type", "hostname"})


@dataclasses.dataclass
class Notification:
    id: int
    uuid: str
    type: str
    hostname: str
    generated_time: datetime.datetime
    payload: dict[str, Any]
    origin: str
    status: Status
    created_at: datetime.datetime
    updated_at: datetime.datetime
    source_host_uuid: str | None = None
    message: str | None = None
    attempts: int = 0
    next_attempt_at: datetime.datetime | None = None
    owner: str | None = None
    lease_until: datetime.datetime | None = None
    version: int = 0
    started_at: datetime.datetime | None = None

    @property
    def event(self) -> str:
        """STOPPED (a host failed) or STARTED (a host came back)."""
        return self.payload.get("event", "STOPPED")


@dataclasses.dataclass(frozen=True)
class Arming:
    """Whether the engine may start recoveries, and who said so."""

    armed: bool
    changed_by: str | None = None
    reason: str | None = None
    changed_at: datetime.datetime | None = None


@dataclasses.dataclass(frozen=True)
class StepEvent:
    step: str
    state: str
    progress: float
    message: str
    created_at: datetime.datetime


def this_process() -> str:
    """The owner name of a lease taken by this process."""
    return f"{socket.gethostname()}:{os.getpid()}"


def owner_gone(owner: str | None) -> bool:
    """True when ``owner`` was a process of this host that has exited."""
    host, _, pid = (owner or "").rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    if int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _host_failure(payload: str) -> bool:
    """A stored COMPUTE_HOST payload reports a failure, not a return."""
    return json.loads(payload).get("event", "STOPPED") == "STOPPED"


def _row_to_notification(row: Any) -> Notification:
    data = dict(row._mapping)
    data["payload"] = json.loads(data["payload"])
    data["status"] = Status(data["status"])
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


class Store(SegmentStore):
    def __init__(self, engine: sa.engine.Engine):
        self._engine = engine

    # -- lifecycle -----------------------------------------------------------
    def upgrade(self) -> None:
        """Create or upgrade the schema to the newest migration."""
        config = AlembicConfig()
        config.set_main_option(
            "script_location",
            os.path.join(os.path.dirname(__file__), "migrations"))
        with self._engine.begin() as conn:
            config.attributes["connection"] = conn
            alembic_command.upgrade(config, "head")

    def close(self) -> None:
        self._engine.dispose()

    def _tx(self) -> Any:
        return self._engine.begin()

    # -- notifications -------------------------------------------------------
    def add(self, *, type: str, hostname: str,
            generated_time: datetime.datetime, payload: dict[str, Any],
            origin: str, status: Status, now: datetime.datetime,
            message: str | None = None, source_host_uuid: str | None = None,
            duplicate_window: float = 0) -> Notification:
        """Store a notification; raise ``Duplicate`` if the same type, host
        and payload arrived with a generated_time within the window."""
        values = dict(
            uuid=str(uuidlib.uuid4()), type=type, hostname=hostname,
            source_host_uuid=source_host_uuid, generated_time=generated_time,
            payload=canonical_payload(payload), origin=origin,
            status=status.value, message=message, attempts=0, version=0,
            created_at=now, updated_at=now)
        with self._tx() as conn:
            if duplicate_window:
                window = datetime.timedelta(seconds=duplicate_window)
                earlier = conn.execute(
                    sa.select(notifications.c.uuid).where(
                        notifications.c.type == type,
                        notifications.c.hostname == hostname,
                        notifications.c.payload == values["payload"],
                        notifications.c.generated_time > _shift(
                            generated_time, -window),
                        notifications.c.generated_time < _shift(
                            generated_time, window)).limit(1)).scalar()
                if earlier:
                    raise exception.Duplicate(
                        f"a {type} notification for {hostname} with the "
                        f"same payload was received within "
                        f"{duplicate_window:g} s: {earlier}")
            conn.execute(notifications.insert().values(**values))
        return self.get(values["uuid"])

    def get(self, uuid: str) -> Notification:
        with self._tx() as conn:
            row = conn.execute(notifications.select().where(
                notifications.c.uuid == uuid)).first()
        if row is None:
            raise exception.NotFound(f"no notification {uuid}")
        return _row_to_notification(row)

    def list_notifications(self, *, filters: dict[str, Any] | None = None,
             generated_since: datetime.datetime | None = None,
             limit: int | None = None, marker: str | None = None,
             sort_key: str = "created_at", sort_dir: str = "desc"
             ) -> list[Notification]:
        column = notifications.c[sort_key]
        order = column.desc() if sort_dir == "desc" else column.asc()
        tiebreak = (notifications.c.id.desc() if sort_dir == "desc"
                    else notifications.c.id.asc())
        query = notifications.select().order_by(order, tiebreak)
        for key, value in (filters or {}).items():
            query = query.where(notifications.c[key] == value)
        if generated_since is not None:
            query = query.where(
                notifications.c.generated_time >= generated_since)
        with self._tx() as conn:
            if marker is not None:
                by_id = (marker.isascii() and marker.isdigit()
                         and int(marker) < 2 ** 63)
                key = (notifications.c.id == int(marker) if by_id
                       else notifications.c.uuid == marker)
                anchor = conn.execute(
                    sa.select(column, notifications.c.id).where(key)).first()
                if anchor is None:
                    raise exception.NotFound(f"marker {marker} not found")
                before = sa.tuple_(column, notifications.c.id) < tuple(anchor)
                after = sa.tuple_(column, notifications.c.id) > tuple(anchor)
                query = query.where(before if sort_dir == "desc" else after)
            if limit is not None:
                query = query.limit(limit)
            return [_row_to_notification(r) for r in conn.execute(query)]

    def _live_runs(self, conn: Any, now: datetime.datetime,
                   hostname: str | None = None) -> Iterator[Notification]:
        query = notifications.select().where(
            notifications.c.status == Status.RUNNING.value)
        if hostname is not None:
            query = query.where(notifications.c.hostname == hostname)
        for row in conn.execute(query):
            item = _row_to_notification(row)
            if not self._abandoned(item, now):
                yield item

    @staticmethod
    def _abandoned(item: Notification, now: datetime.datetime) -> bool:
        return ((item.lease_until is not None and item.lease_until < now)
                or owner_gone(item.owner))

    def _take(self, conn: Any, item: Notification, owner: str,
              now: datetime.datetime, lease: float) -> Notification | None:
        """Compare-and-swap ``item`` to running under ``owner``."""
        resumed = item.status is Status.RUNNING
        values = dict(status=Status.RUNNING.value, owner=owner,
                      lease_until=now + datetime.timedelta(seconds=lease),
                      next_attempt_at=None, updated_at=now,
                      version=item.version + 1,
                      started_at=item.started_at or now,
                      # A resumed run continues its attempt.
                      attempts=item.attempts + (0 if resumed else 1))
        done = conn.execute(notifications.update().where(
            notifications.c.uuid == item.uuid,
            notifications.c.version == item.version).values(**values))
        if done.rowcount != 1:
            return None
        return dataclasses.replace(item, status=Status.RUNNING,
                                   **{k: v for k, v in values.items()
                                      if k != "status"})

    def next_runnable(self, now: datetime.datetime, *,
                      resume_only: bool = False) -> Notification | None:
        """The oldest runnable notification, unclaimed: new or
        in error, once due; or running under an owner that is gone. Never
        one for a host another live run is working on. ``resume_only``
        looks at abandoned runs only."""
        due = sa.or_(notifications.c.next_attempt_at.is_(None),
                     notifications.c.next_attempt_at <= now)
        waiting = sa.and_(notifications.c.status.in_(
            [Status.NEW.value, Status.ERROR.value]), due)
        running = notifications.c.status == Status.RUNNING.value
        query = notifications.select().where(
            running if resume_only else sa.or_(waiting, running),
        ).order_by(
            # Abandoned runs first: they may hold locks.
            sa.case((running, 0), else_=1),
            notifications.c.created_at, notifications.c.id)
        with self._tx() as conn:
            busy = {n.hostname for n in self._live_runs(conn, now)}
            for row in conn.execute(query):
                item = _row_to_notification(row)
                if item.hostname in busy:
                    continue
                if (item.status is Status.RUNNING
                        and not self._abandoned(item, now)):
                    continue
                return item
        return None

    def take(self, item: Notification, owner: str, now: datetime.datetime,
             lease: float) -> Notification | None:
        """Claim ``item`` (from ``next_runnable``) for ``owner``; None if
        another process changed it first."""
        with self._tx() as conn:
            return self._take(conn, item, owner, now, lease)

    def hold(self, item: Notification, message: str,
             now: datetime.datetime, until: datetime.datetime) -> bool:
        """Leave ``item`` waiting (new or error, attempts untouched) with
        the reason, until ``until``. False if it changed meanwhile."""
        with self._tx() as conn:
            done = conn.execute(notifications.update().where(
                notifications.c.uuid == item.uuid,
                notifications.c.version == item.version).values(
                    message=message, next_attempt_at=until,
                    updated_at=now, version=item.version + 1))
        return done.rowcount == 1

    def hosts_in_recovery(self) -> set[str]:
        """Hosts with a host failure being recovered."""
        with self._tx() as conn:
            rows = conn.execute(sa.select(
                notifications.c.hostname, notifications.c.payload).where(
                    notifications.c.type == "COMPUTE_HOST",
                    notifications.c.status == Status.RUNNING.value))
            return {r.hostname for r in rows if _host_failure(r.payload)}

    def recoveries_started_since(
            self, since: datetime.datetime) -> list[datetime.datetime]:
        """When each host recovery started after ``since``, oldest
        first."""
        with self._tx() as conn:
            rows = conn.execute(sa.select(
                notifications.c.started_at, notifications.c.payload).where(
                    notifications.c.type == "COMPUTE_HOST",
                    notifications.c.started_at > since).order_by(
                        notifications.c.started_at))
            return [r.started_at for r in rows if _host_failure(r.payload)]

    def restarts_since(self, instance_uuid: str, since: datetime.datetime,
                       excluding_uuid: str | None = None
                       ) -> list[datetime.datetime]:
        """When each restart of ``instance_uuid`` by the instance-failure
        flow started, if at or after ``since``, oldest first: its VM
        notifications that ended finished, other than ``excluding_uuid``.
        Ignored ones and crash-loop refusals restarted nothing; one in
        error is retried as itself (up to [engine] retry_max_attempts)."""
        query = sa.select(
            notifications.c.started_at, notifications.c.payload).where(
                notifications.c.type == "VM",
                notifications.c.status == Status.FINISHED.value,
                notifications.c.started_at >= since)
        if excluding_uuid is not None:
            query = query.where(notifications.c.uuid != excluding_uuid)
        wanted = instance_uuid.lower()
        with self._tx() as conn:
            rows = conn.execute(query.order_by(notifications.c.started_at))
            return [r.started_at for r in rows if str(json.loads(
                r.payload).get("instance_uuid", "")).lower() == wanted]

    # -- arming --------------------------------------------------------------
    def arming(self) -> Arming:
        with self._tx() as conn:
            row = conn.execute(arming.select().where(
                arming.c.id == 1)).first()
        if row is None:
            return Arming(armed=True)
        return Arming(armed=row.armed, changed_by=row.changed_by,
                      reason=row.reason, changed_at=row.changed_at)

    def set_arming(self, armed: bool, changed_by: str, reason: str | None,
                   now: datetime.datetime) -> Arming:
        values = dict(armed=armed, changed_by=changed_by, reason=reason,
                      changed_at=now)
        with self._tx() as conn:
            if not conn.execute(arming.update().where(
                    arming.c.id == 1).values(**values)).rowcount:
                conn.execute(arming.insert().values(id=1, **values))
        return Arming(**values)

    def claim_host(self, *, hostname: str, owner: str,
                   now: datetime.datetime, lease: float,
                   payload: dict[str, Any]) -> tuple[Notification, bool]:
        """Claim a run of ``hostname`` for the CLI: resume an abandoned
        one (returned with True), or record a new one. Raise
        ``RecoveryInProgress`` if a live process is recovering the host."""
        with self._tx() as conn:
            for live in self._live_runs(conn, now, hostname):
                raise exception.RecoveryInProgress(
                    f"{hostname} is being recovered by {live.owner} "
                    f"(notification {live.uuid}, since "
                    f"{live.updated_at:%Y-%m-%d %H:%M:%S} UTC)")
            row = conn.execute(notifications.select().where(
                notifications.c.hostname == hostname,
                notifications.c.type == "COMPUTE_HOST",
                notifications.c.status == Status.RUNNING.value)
                .order_by(notifications.c.id).limit(1)).first()
            if row is not None:
                item = _row_to_notification(row)
                if item.event != payload.get("event", "STOPPED"):
                    raise exception.RecoveryInProgress(
                        f"an interrupted {item.event} run of {hostname} "
                        f"(notification {item.uuid}) must finish first: "
                        f"run 'recovery {_COMMANDS[item.event]} "
                        f"{hostname}'")
                taken = self._take(conn, item, owner, now, lease)
                if taken is not None:
                    return taken, True
            # In the transaction of the check: no engine or other CLI can
            # claim the host in between.
            uuid = str(uuidlib.uuid4())
            conn.execute(notifications.insert().values(
                uuid=uuid, type="COMPUTE_HOST", hostname=hostname,
                generated_time=now, payload=canonical_payload(payload),
                origin="cli", status=Status.RUNNING.value, attempts=1,
                owner=owner, started_at=now,
                lease_until=now + datetime.timedelta(seconds=lease),
                version=0, created_at=now, updated_at=now))
        return self.get(uuid), False

    def renew(self, owner: str, now: datetime.datetime,
              lease: float) -> None:
        with self._tx() as conn:
            conn.execute(notifications.update().where(
                notifications.c.owner == owner,
                notifications.c.status == Status.RUNNING.value).values(
                    lease_until=now + datetime.timedelta(seconds=lease)))

    def finish(self, uuid: str, owner: str, status: Status, message: str,
               now: datetime.datetime,
               next_attempt_at: datetime.datetime | None = None) -> None:
        """End this owner's run of a notification."""
        with self._tx() as conn:
            done = conn.execute(notifications.update().where(
                notifications.c.uuid == uuid,
                notifications.c.owner == owner,
                notifications.c.status == Status.RUNNING.value).values(
                    status=status.value, message=message, owner=None,
                    lease_until=None, next_attempt_at=next_attempt_at,
                    updated_at=now, version=notifications.c.version + 1))
        if done.rowcount != 1:
            raise exception.RecoveryError(
                f"notification {uuid} is no longer run by {owner}")

    # -- step progress -------------------------------------------------------
    def add_step_event(self, uuid: str, step: str, state: str,
                       progress: float, message: str,
                       now: datetime.datetime) -> None:
        with self._tx() as conn:
            conn.execute(step_events.insert().values(
                notification_uuid=uuid, step=step, state=state,
                progress=progress, message=message, created_at=now))

    def step_events(self, uuid: str) -> list[StepEvent]:
        with self._tx() as conn:
            rows = conn.execute(step_events.select().where(
                step_events.c.notification_uuid == uuid).order_by(
                    step_events.c.id))
            return [StepEvent(r.step, r.state, r.progress, r.message,
                              r.created_at) for r in rows]

    # -- journal -------------------------------------------------------------
    def save_instance(self, uuid: str, result: InstanceResult,
                      now: datetime.datetime) -> None:
        values = dict(
            name=result.name, source_host=result.source_host,
            dest_host=result.dest_host,
            original_state=result.original_state,
            final_state=result.final_state, phase=result.phase.value,
            outcome=result.outcome.value if result.outcome else None,
            reason=result.reason, locked_by_us=result.locked_by_us,
            migration_floor=result.migration_floor, method=result.method,
            started_at=result.started_at, finished_at=result.finished_at,
            updated_at=now)
        keys = {"key_notification": uuid, "key_instance": result.uuid}
        with self._tx() as conn:
            if conn.execute(_UPDATE_JOURNAL, {**values, **keys}).rowcount:
                return
            conn.execute(_INSERT_JOURNAL, {**values, "instance_uuid":
                                           result.uuid,
                                           "notification_uuid": uuid})

    def journal(self, uuid: str) -> list[InstanceResult]:
        with self._tx() as conn:
            rows = conn.execute(instance_journal.select().where(
                instance_journal.c.notification_uuid == uuid).order_by(
                    instance_journal.c.id))
            return [InstanceResult(
                uuid=r.instance_uuid, name=r.name, source_host=r.source_host,
                original_state=r.original_state, dest_host=r.dest_host,
                final_state=r.final_state, started_at=r.started_at,
                finished_at=r.finished_at,
                outcome=Outcome(r.outcome) if r.outcome else None,
                reason=r.reason, phase=Phase(r.phase),
                locked_by_us=r.locked_by_us,
                migration_floor=r.migration_floor,
                method=r.method) for r in rows]


def open_conf_store(conf: Any) -> Store:
    """The store ``[database]`` names."""
    return open_store(conf.database.connection, conf.database.busy_timeout)


def open_store(connection: str, busy_timeout: float = 30.0) -> Store:
    """Open (and create or upgrade) the store at an SQLAlchemy URL."""
    url = sa.engine.make_url(connection)
    kwargs: dict[str, Any] = {}
    sqlite = url.get_backend_name() == "sqlite"
    if sqlite:
        kwargs["connect_args"] = {"timeout": busy_timeout,
                                  "check_same_thread": False}
    try:
        engine = sa.create_engine(url, **kwargs)
        if sqlite:
            _serialize_sqlite_writers(engine)
        store = Store(engine)
        store.upgrade()
    except sa.exc.SQLAlchemyError as exc:
        raise exception.ConfigError(
            f"cannot open the store {url.render_as_string()}: {exc}. "
            f"Check [database] connection") from exc
    return store


def _serialize_sqlite_writers(engine: sa.engine.Engine) -> None:
    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, record: Any) -> None:
        # Let SQLAlchemy's "begin" event below issue BEGIN itself.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        # WAL with FULL: a commit is on disk when it returns.
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")
