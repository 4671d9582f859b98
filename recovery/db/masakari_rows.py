"""Masakari's rows as recovery's: a live segment, host or notification
(with its vmoves, as journal entries) becomes the values to insert, and
what must match an entry recovery has already; what cannot be brought
says why.
"""

import dataclasses
import datetime
import json
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any

from recovery.db.notifications import canonical_payload
from recovery.notification import COMMANDS
from recovery.notification import IN_FLIGHT
from recovery.notification import Status
from recovery.notification import classify

#: The origin of a notification the import brought.
ORIGIN = "masakari"

# What the entries' results say.
IMPORTED = "imported"
PRESENT = "already imported"
SKIPPED = "skipped"

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


def plural(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def _utc(value: datetime.datetime | None) -> datetime.datetime | None:
    """Masakari's times are naive UTC."""
    if value is None:
        return None
    return value.replace(tzinfo=datetime.timezone.utc)


@dataclasses.dataclass
class Entry:
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


def segment_entry(row: Any, now: datetime.datetime) -> Entry:
    stamps, compared = _stamps(row, None, now)
    values = dict(
        uuid=row.uuid, name=row.name, description=row.description,
        recovery_method=row.recovery_method,
        service_type=row.service_type,
        # NULL is Masakari's default: enabled.
        enabled=True if row.enabled is None else row.enabled, **stamps)
    return Entry(Item("segment", row.uuid, row.name, IMPORTED), values,
                  ("name", "description", "recovery_method", "service_type",
                   "enabled", *compared))


def host_entry(row: Any, segment_name: str,
               now: datetime.datetime) -> Entry:
    stamps, compared = _stamps(row, None, now)
    values = dict(
        uuid=row.uuid, name=row.name, segment_uuid=row.failover_segment_id,
        type=row.type, control_attributes=row.control_attributes,
        reserved=bool(row.reserved),
        on_maintenance=bool(row.on_maintenance), **stamps)
    return Entry(Item("host", row.uuid, row.name, IMPORTED,
                       f"in segment {segment_name}"), values,
                  ("name", "segment_uuid", "type", "control_attributes",
                   "reserved", "on_maintenance", *compared))


def notification_entry(row: Any, hostname: str, vmoves: list[Any],
                       now: datetime.datetime) -> Entry:
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
    entry = Entry(Item("notification", uuid, name, IMPORTED, reason),
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
                            f"with {plural(len(entry.journal), 'vmove')}"])))
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
JOURNAL_COMPARED = ("name", "source_host", "dest_host", "phase", "outcome",
                     "reason", "started_at", "finished_at", "created_at")


def _same(mine: Any, theirs: Any) -> bool:
    """A MariaDB/MySQL store keeps whole seconds of a time."""
    if isinstance(mine, datetime.datetime) and isinstance(
            theirs, datetime.datetime):
        return abs(mine - theirs) < datetime.timedelta(seconds=1)
    return mine == theirs


def differences(wanted: Mapping[str, Any], row: Mapping[str, Any],
                keys: Iterable[str]) -> list[str]:
    return [f"{key} {row[key]!r} in recovery, {wanted[key]!r} in Masakari"
            for key in keys if not _same(row[key], wanted[key])]
