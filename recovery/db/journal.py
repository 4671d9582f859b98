"""What a run did, in the store: each instance's journal entry, and the
step events of its workflow.

An instance's entry is written before each of its steps: a resumed run
reads it back to know where the instance was.

Entries are committed in groups: the entries that tasks write while one
transaction commits go together in the next one, and each task returns
only once the transaction holding its own entry has committed. A step's
side effect still comes after its entry is durable; what the group saves
is a transaction, a fencing check and (SQLite) a sync per entry, and
under eventlet a blocking commit stops every green thread.
"""

import copy
import dataclasses
import datetime
from typing import Any

import sqlalchemy as sa

from recovery import concurrency
from recovery import exception
from recovery.db.claims import Holder
from recovery.db.claims import hold_run
from recovery.db.events import Decision
from recovery.db.events import insert as insert_event
from recovery.db.tables import instance_journal
from recovery.db.tables import step_events
from recovery.db.transaction import Transactional
from recovery.notification import StepEvent
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


@dataclasses.dataclass(frozen=True)
class JournalEntry:
    """An instance's entry as stored, with its row's identity and
    times."""

    id: int
    created_at: datetime.datetime
    updated_at: datetime.datetime
    result: InstanceResult


@dataclasses.dataclass(eq=False)
class _Pending:
    """An entry waiting for its group's transaction."""

    notification: str
    instance: str
    values: dict[str, Any]
    now: datetime.datetime
    holder: Holder | None
    event: Decision | None
    done: bool = False
    # Why it was not written, once done.
    error: Exception | None = None


class CommitGroup:
    """The entries waiting to be committed, and the turn to commit."""

    def __init__(self) -> None:
        self.pending: list[_Pending] = []
        self.pending_lock = concurrency.Lock()
        # Held by the task committing a group; the others wait on it.
        self.commit_lock = concurrency.Lock()


def _own(error: Exception) -> Exception:
    """A task's own copy of its group's error: one exception object raised
    in several tasks would collect all their tracebacks."""
    mine = copy.copy(error)
    mine.__cause__ = error.__cause__
    return mine


class JournalStore(Transactional):
    """The journal and step-event methods of ``Store``."""

    _group: CommitGroup

    # -- step progress -------------------------------------------------------
    def add_step_event(self, uuid: str, step: str, state: str,
                       progress: float, message: str,
                       now: datetime.datetime,
                       holder: Holder | None = None,
                       event: Decision | None = None,
                       instances: int | None = None) -> None:
        """Record a step event, and ``event`` with it; with ``holder``,
        only while it holds the run (``LeaseLost`` otherwise).
        ``instances``: how many instances the step says it starts on."""
        with self._tx() as conn:
            if holder is not None:
                hold_run(conn, uuid, holder, self.lease_clock(conn))
            conn.execute(step_events.insert().values(
                notification_uuid=uuid, step=step, state=state,
                progress=progress, message=message, created_at=now,
                instances=instances))
            if event is not None:
                insert_event(conn, uuid, now, event)

    def step_events(self, uuid: str) -> list[StepEvent]:
        with self._tx() as conn:
            rows = conn.execute(step_events.select().where(
                step_events.c.notification_uuid == uuid).order_by(
                    step_events.c.id))
            return [StepEvent(r.step, r.state, r.progress, r.message,
                              r.created_at, r.instances) for r in rows]

    # -- journal -------------------------------------------------------------
    def save_instance(self, uuid: str, result: InstanceResult,
                      now: datetime.datetime,
                      holder: Holder | None = None,
                      event: Decision | None = None) -> None:
        """Write the instance's entry, and ``event`` with it; with
        ``holder``, only while it holds the run: the fencing check of the
        side effect it announces. Returns once the entry is committed,
        with the entries other tasks wrote meanwhile (see above)."""
        values = dict(
            name=result.name, source_host=result.source_host,
            dest_host=result.dest_host,
            original_state=result.original_state,
            final_state=result.final_state, phase=result.phase.value,
            outcome=result.outcome.value if result.outcome else None,
            reason=result.reason, locked_by_us=result.locked_by_us,
            migration_floor=result.migration_floor, method=result.method,
            priority=result.priority, priority_phase=result.priority_phase,
            capacity_warning=result.capacity_warning,
            evacuate_sent_at=result.evacuate_sent_at,
            lock_uncertain_at=result.lock_uncertain_at,
            started_at=result.started_at, finished_at=result.finished_at,
            project_id=result.project_id, updated_at=now)
        mine = _Pending(uuid, result.uuid, values, now, holder, event)
        group = self._group
        with group.pending_lock:
            group.pending.append(mine)
        with group.commit_lock:
            # The task that held the turn before may have committed it.
            if not mine.done:
                # Let the tasks that are about to write join this group.
                concurrency.cooperate()
                with group.pending_lock:
                    entries, group.pending = group.pending, []
                self._commit_group(entries)
        if mine.error is not None:
            raise mine.error

    def _commit_group(self, entries: list[_Pending]) -> None:
        """Write ``entries`` in one transaction. An entry whose run is no
        longer held fails with ``LeaseLost`` and the others are written;
        if the transaction fails, they all fail with its error."""
        failure: Exception | None = exception.StoreError(
            "the journal's transaction was interrupted")
        try:
            with self._tx() as conn:
                lost = self._hold_runs(conn, entries)
                for entry in entries:
                    if (entry.notification, entry.holder) in lost:
                        entry.error = _own(
                            lost[entry.notification, entry.holder])
                        continue
                    if entry.event is not None:
                        insert_event(conn, entry.notification, entry.now,
                                     entry.event)
                    keys = {"key_notification": entry.notification,
                            "key_instance": entry.instance}
                    if conn.execute(_UPDATE_JOURNAL,
                                    {**entry.values, **keys}).rowcount:
                        continue
                    conn.execute(_INSERT_JOURNAL, {
                        **entry.values, "instance_uuid": entry.instance,
                        "notification_uuid": entry.notification,
                        "created_at": entry.now})
            failure = None
        except Exception as exc:
            failure = exc
        finally:
            # Every entry is done, even when the committing task is
            # interrupted: none of the waiting tasks goes on unanswered.
            for entry in entries:
                if entry.error is None and failure is not None:
                    entry.error = _own(failure)
                entry.done = True

    def _hold_runs(self, conn: Any, entries: list[_Pending],
                   ) -> dict[tuple[str, Holder], exception.LeaseLost]:
        """Prove each run the entries are written for still held (once
        per run and holder); the ``LeaseLost`` of each that is not."""
        lost = {}
        now = None
        for key in dict.fromkeys((e.notification, e.holder) for e in entries
                                 if e.holder is not None):
            now = now or self.lease_clock(conn)
            try:
                hold_run(conn, *key, now)
            except exception.LeaseLost as exc:
                lost[key] = exc
        return lost

    def journal(self, uuid: str) -> list[InstanceResult]:
        return [entry.result for entry in self.journal_entries(uuid)]

    def journal_entries(self, uuid: str) -> list[JournalEntry]:
        """The run's entries, in the order they were first written (the
        API shows them as vmoves)."""
        with self._tx() as conn:
            rows = conn.execute(instance_journal.select().where(
                instance_journal.c.notification_uuid == uuid).order_by(
                    instance_journal.c.id))
            return [JournalEntry(r.id, r.created_at, r.updated_at,
                                 InstanceResult(
                uuid=r.instance_uuid, name=r.name, source_host=r.source_host,
                original_state=r.original_state, dest_host=r.dest_host,
                final_state=r.final_state, started_at=r.started_at,
                finished_at=r.finished_at,
                outcome=Outcome(r.outcome) if r.outcome else None,
                reason=r.reason, phase=Phase(r.phase),
                locked_by_us=r.locked_by_us,
                migration_floor=r.migration_floor,
                method=r.method, priority=r.priority,
                priority_phase=r.priority_phase,
                capacity_warning=r.capacity_warning,
                evacuate_sent_at=r.evacuate_sent_at,
                lock_uncertain_at=r.lock_uncertain_at,
                project_id=r.project_id)) for r in rows]
