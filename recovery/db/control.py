"""The engines' control state in the store: the arming switch, the
registry of the engines that share the database, and the host recoveries
they share (``host_load``)."""

import dataclasses
import datetime
from collections.abc import Collection
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from recovery import exception
from recovery.db import events
from recovery.db.connection import database_now
from recovery.db.revisions import HEAD_REVISION
from recovery.db.revisions import floor_refusal
from recovery.db.tables import arming
from recovery.db.tables import engines
from recovery.db.tables import notifications
from recovery.db.tables import probe_views
from recovery.db.tables import schema_floor
from recovery.db.transaction import Transactional
from recovery.identity import owner_gone
from recovery.notification import Kind
from recovery.notification import Status

# An engine not seen for this long is dropped from the registry.
FORGET_AFTER = datetime.timedelta(days=1)


@dataclasses.dataclass(frozen=True)
class Arming:
    """Whether the engine may start recoveries, and who said so."""

    armed: bool
    changed_by: str | None = None
    reason: str | None = None
    changed_at: datetime.datetime | None = None


@dataclasses.dataclass(frozen=True)
class EngineRecord:
    """An engine as it last reported itself, and the runs it holds."""

    name: str
    host: str
    pid: int
    started_at: datetime.datetime
    last_seen: datetime.datetime
    # Seconds since last_seen, by the database's clock.
    silent_for: float
    runs: tuple[str, ...]
    # Its concurrency backend; None if it registered before 0013.
    backend: str | None = None


@dataclasses.dataclass(frozen=True)
class ProbeViews:
    """The engines' views of some hosts, at one look (the fast path's
    rules judge them: ``recovery.engine.silence``)."""

    # The engines the registry saw lately.
    live: frozenset[str]
    # Each host asked about: the engines whose views see it silent.
    silent: Mapping[str, frozenset[str]]


@dataclasses.dataclass(frozen=True)
class HostLoad:
    """The host recoveries the live engines share, at one look: how many
    each live engine runs, and the hosts whose failure waits for an
    engine, with how long each has waited."""

    # The live engines (the one that looked among them).
    live: frozenset[str]
    # Host recoveries running under each live engine that runs any.
    running: Mapping[str, int]
    # Each host with a runnable, unclaimed host failure (new or in error
    # and due, or a run abandoned by its owner): the seconds the
    # longest-waiting one has been runnable, by the database's clock.
    waiting: Mapping[str, float]
    # The waiting hosts' host failures that would start a run (new, or in
    # error and due; not a run to resume), by host: what an engine at its
    # share leaves.
    starts: Mapping[str, frozenset[str]] = dataclasses.field(
        default_factory=dict)

    @property
    def total(self) -> int:
        """The host recoveries to share: running and waiting."""
        return sum(self.running.values()) + len(self.waiting)

    @property
    def share(self) -> int:
        """The host recoveries each live engine may run while the others
        have room: the total spread evenly, rounded up."""
        return -(-self.total // len(self.live))

    def took(self, engine: str, host: str) -> "HostLoad":
        """This load once ``engine`` has claimed the failure of ``host``:
        the same total, one more for ``engine``."""
        return dataclasses.replace(
            self, running={**self.running,
                           engine: self.running.get(engine, 0) + 1},
            waiting={h: w for h, w in self.waiting.items() if h != host},
            starts={h: s for h, s in self.starts.items() if h != host})

    def leaving(self, grace: float) -> frozenset[str]:
        """The uuids of the host failures an engine at its share leaves
        to the others: those of the hosts that have waited less than
        ``grace`` seconds. All at once, so that a turn passes them over
        in one look, not one look of the store for each."""
        return frozenset().union(*(
            self.starts.get(host, ()) for host, waited
            in self.waiting.items() if waited < grace))


def _live(now: datetime.datetime, live_within: float) -> Any:
    """The registry's liveness rule: seen within ``live_within`` seconds
    of ``now``, by the database's clock."""
    return engines.c.last_seen >= now - datetime.timedelta(
        seconds=live_within)


def _live_engines(conn: Any, now: datetime.datetime,
                  live_within: float) -> set[str]:
    """The engines of the registry seen within ``live_within`` seconds
    of ``now``, by the database's clock."""
    return {row.name for row in conn.execute(
        sa.select(engines.c.name).where(_live(now, live_within)))}


def older_engines(conn: Any, live_within: float,
                  older: Collection[str]) -> list[EngineRecord]:
    """The live engines (seen within ``live_within`` seconds) of a
    release older than this one: those written for a schema revision in
    ``older``, and those that never said theirs (before 0015)."""
    now = database_now(conn)
    return _records(conn, now, _live(now, live_within), sa.or_(
        engines.c.schema_revision.is_(None),
        engines.c.schema_revision.in_(list(older))))


def _records(conn: Any, now: datetime.datetime,
             *where: Any) -> list[EngineRecord]:
    """The registry's engines (those ``where`` says), most recently seen
    first, with the notifications each one runs."""
    runs: dict[str, list[str]] = {}
    for row in conn.execute(sa.select(
            notifications.c.owner, notifications.c.uuid).where(
                notifications.c.status == Status.RUNNING.value)):
        runs.setdefault(row.owner, []).append(row.uuid)
    rows = conn.execute(engines.select().where(*where).order_by(
        engines.c.last_seen.desc(), engines.c.name))
    return [EngineRecord(
        name=r.name, host=r.host, pid=r.pid, started_at=r.started_at,
        last_seen=r.last_seen,
        silent_for=max(0.0, (now - r.last_seen).total_seconds()),
        runs=tuple(runs.get(r.name, ())), backend=r.backend)
        for r in rows]


class ControlStore(Transactional):
    """The control methods of ``Store``."""

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
        """Arm or disarm, recorded as ``changed_by``'s decision."""
        values = dict(armed=armed, changed_by=changed_by, reason=reason,
                      changed_at=now)
        if armed:
            kind, why = (events.EventKind.ARMED, "recoveries start again; "
                         "what waited runs if it is still valid")
        else:
            kind, why = (events.EventKind.DISARMED, f"no recovery starts "
                         f"until 'recovery arm': {reason}")
        decision = events.Decision(changed_by, "all hosts", kind, why)
        with self._tx() as conn:
            if not conn.execute(arming.update().where(
                    arming.c.id == 1).values(**values)).rowcount:
                conn.execute(arming.insert().values(id=1, **values))
            events.insert(conn, None, now, decision)
        return Arming(**values)

    def engine_seen(self, name: str, host: str, pid: int | None,
                    backend: str | None = None) -> None:
        """Record that engine ``name`` (on concurrency ``backend``, of
        this release's schema) is alive, by the database's clock; forget
        engines silent for a day. SchemaMismatch, recording nothing, once
        a newer release's 'recovery db contract' has left a schema this
        release cannot run on: one that started while it ran, or was
        frozen past its lease, finds out at its next report."""
        values = dict(backend=backend, schema_revision=HEAD_REVISION)
        with self._tx() as conn:
            refusal = floor_refusal(conn.execute(
                sa.select(schema_floor.c.revision)).scalar())
            if refusal is not None:
                raise exception.SchemaMismatch(refusal)
            now = self.lease_clock(conn)
            if not conn.execute(engines.update().where(
                    engines.c.name == name).values(
                        last_seen=now, **values)).rowcount:
                conn.execute(engines.insert().values(
                    name=name, host=host, pid=pid, started_at=now,
                    last_seen=now, **values))
            conn.execute(engines.delete().where(
                engines.c.last_seen < now - FORGET_AFTER))

    def engine_gone(self, name: str) -> None:
        """Engine ``name`` stopped cleanly."""
        with self._tx() as conn:
            conn.execute(engines.delete().where(engines.c.name == name))
            conn.execute(probe_views.delete().where(
                probe_views.c.engine == name))

    def record_probe_views(self, engine: str,
                           silent: Mapping[str, float]) -> None:
        """``engine`` sees each host of ``silent`` silent for so many
        seconds now; its views of other hosts are dropped."""
        with self._tx() as conn:
            now = self.lease_clock(conn)
            conn.execute(probe_views.delete().where(
                probe_views.c.engine == engine,
                probe_views.c.host.not_in(list(silent))))
            for host, seconds in sorted(silent.items()):
                values = dict(seen_at=now, silent_since=now
                              - datetime.timedelta(seconds=seconds))
                if not conn.execute(probe_views.update().where(
                        probe_views.c.engine == engine,
                        probe_views.c.host == host).values(
                            **values)).rowcount:
                    conn.execute(probe_views.insert().values(
                        host=host, engine=engine, **values))

    def probe_views(self, hosts: Collection[str], *, window: float,
                    fresh: float, live_within: float) -> ProbeViews:
        """The engines seen within ``live_within`` seconds, and for each
        of ``hosts`` the engines that see it silent for ``window``
        seconds at least, in a view written within ``fresh`` seconds; by
        the database's clock."""
        with self._tx() as conn:
            now = self.lease_clock(conn)
            live = _live_engines(conn, now, live_within)
            silent: dict[str, set[str]] = {host: set() for host in hosts}
            for row in conn.execute(sa.select(
                    probe_views.c.host, probe_views.c.engine).where(
                        probe_views.c.host.in_(list(hosts)),
                        probe_views.c.seen_at >= now
                        - datetime.timedelta(seconds=fresh),
                        probe_views.c.silent_since <= now
                        - datetime.timedelta(seconds=window))):
                silent[row.host].add(row.engine)
        return ProbeViews(frozenset(live), {
            host: frozenset(names) for host, names in silent.items()})

    def host_load(self, engine: str, *, live_within: float) -> HostLoad:
        """The host recoveries shared by the live engines: those seen
        within ``live_within`` seconds, and ``engine`` itself. One query
        of the host failures in flight, and one of the registry."""
        with self._tx() as conn:
            now = self.lease_clock(conn)
            live = _live_engines(conn, now, live_within) | {engine}
            rows = conn.execute(sa.select(
                notifications.c.uuid,
                notifications.c.hostname, notifications.c.status,
                notifications.c.owner, notifications.c.lease_until,
                notifications.c.next_attempt_at,
                notifications.c.created_at).where(
                    notifications.c.kind == Kind.HOST_FAILURE.value,
                    notifications.c.status.in_([
                        Status.NEW.value, Status.ERROR.value,
                        Status.RUNNING.value]))).all()
        running: dict[str, int] = {}
        busy: set[str] = set()
        waiting: dict[str, float] = {}
        starts: dict[str, set[str]] = {}
        for row in rows:
            if row.status == Status.RUNNING.value:
                if row.lease_until > now and not owner_gone(row.owner):
                    # Held by a live run (of an engine or a command): the
                    # host is no one's to claim.
                    busy.add(row.hostname)
                    if row.owner in live:
                        running[row.owner] = running.get(row.owner, 0) + 1
                    continue
                # Abandoned: resumable now, whatever its lease says.
                since = min(row.lease_until, now)
            else:
                since = row.next_attempt_at or row.created_at
                if since <= now:
                    starts.setdefault(row.hostname, set()).add(row.uuid)
            if since <= now:
                waited = (now - since).total_seconds()
                waiting[row.hostname] = max(
                    waited, waiting.get(row.hostname, 0.0))
        return HostLoad(frozenset(live), running,
                        {host: waited for host, waited in waiting.items()
                         if host not in busy},
                        {host: frozenset(uuids) for host, uuids
                         in starts.items() if host not in busy})

    def engines(self) -> list[EngineRecord]:
        """Every engine that shares the database, most recently seen
        first, with the notifications each one runs."""
        with self._tx() as conn:
            return _records(conn, self.lease_clock(conn))
