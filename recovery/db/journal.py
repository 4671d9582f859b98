"""What a run did, in the store: each instance's journal entry, and the
step events of its workflow.

An instance's entry is written before each of its steps: a resumed run
reads it back to know where the instance was.
"""

import dataclasses
import datetime

import sqlalchemy as sa

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


class JournalStore(Transactional):
    """The journal and step-event methods of ``Store``."""

    # -- step progress -------------------------------------------------------
    def add_step_event(self, uuid: str, step: str, state: str,
                       progress: float, message: str,
                       now: datetime.datetime,
                       holder: Holder | None = None,
                       event: Decision | None = None) -> None:
        """Record a step event, and ``event`` with it; with ``holder``,
        only while it holds the run (``LeaseLost`` otherwise)."""
        with self._tx() as conn:
            if holder is not None:
                hold_run(conn, uuid, holder, self.lease_clock(conn))
            conn.execute(step_events.insert().values(
                notification_uuid=uuid, step=step, state=state,
                progress=progress, message=message, created_at=now))
            if event is not None:
                insert_event(conn, uuid, now, event)

    def step_events(self, uuid: str) -> list[StepEvent]:
        with self._tx() as conn:
            rows = conn.execute(step_events.select().where(
                step_events.c.notification_uuid == uuid).order_by(
                    step_events.c.id))
            return [StepEvent(r.step, r.state, r.progress, r.message,
                              r.created_at) for r in rows]

    # -- journal -------------------------------------------------------------
    def save_instance(self, uuid: str, result: InstanceResult,
                      now: datetime.datetime,
                      holder: Holder | None = None,
                      event: Decision | None = None) -> None:
        """Write the instance's entry, and ``event`` with it; with
        ``holder``, only while it holds the run: the fencing check of the
        side effect it announces."""
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
            started_at=result.started_at, finished_at=result.finished_at,
            updated_at=now)
        keys = {"key_notification": uuid, "key_instance": result.uuid}
        with self._tx() as conn:
            if holder is not None:
                hold_run(conn, uuid, holder, self.lease_clock(conn))
            if event is not None:
                insert_event(conn, uuid, now, event)
            if conn.execute(_UPDATE_JOURNAL, {**values, **keys}).rowcount:
                return
            conn.execute(_INSERT_JOURNAL, {
                **values, "instance_uuid": result.uuid,
                "notification_uuid": uuid, "created_at": now})

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
                capacity_warning=r.capacity_warning)) for r in rows]
