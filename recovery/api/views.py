"""Store records in the shapes Masakari's API (and its clients) use."""

import datetime
import uuid
from typing import Any

from recovery.confirming import Confirmed
from recovery.db.journal import JournalEntry
from recovery.db.segments import Host
from recovery.db.segments import Segment
from recovery.events import Event
from recovery.notification import Notification
from recovery.notification import StepEvent
from recovery.results import Outcome
from recovery.results import Phase


def timestamp(value: datetime.datetime | None) -> str | None:
    """Masakari's format: UTC, no offset, microseconds."""
    if value is None:
        return None
    value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return value.strftime("%Y-%m-%dT%H:%M:%S.%f")


def notification(item: Notification) -> dict[str, Any]:
    return {
        "id": item.id,
        "notification_uuid": item.uuid,
        "type": item.type,
        "hostname": item.hostname,
        "source_host_uuid": item.source_host_uuid,
        "failover_segment_uuid": item.failover_segment_uuid,
        "generated_time": timestamp(item.generated_time),
        "payload": item.payload,
        "status": item.status.value,
        "message": item.message,
        "origin": item.origin,
        "attempts": item.attempts,
        "next_attempt_at": timestamp(item.next_attempt_at),
        "created_at": timestamp(item.created_at),
        "updated_at": timestamp(item.updated_at),
        "deleted": False,
        "deleted_at": None,
    }


# What an owner's read (the recovery_api:owner:read rule) withholds: what
# names the cloud's hosts (Nova hides an instance's host from non-admins
# too), the monitor's payload, and the messages, which may name hosts or
# other projects' instances. The keys stay, null, for Masakari's clients.
OWNER_HIDDEN = ("hostname", "source_host_uuid", "failover_segment_uuid",
                "payload", "message")
OWNER_HIDDEN_VMOVE = ("source_host", "dest_host", "capacity_warning",
                      "message")


def owner_notification(item: Notification) -> dict[str, Any]:
    """A notification as the owner of instances it recovered sees it."""
    return {**notification(item), **dict.fromkeys(OWNER_HIDDEN)}


def owner_vmove(notification_uuid: str,
                entry: JournalEntry) -> dict[str, Any]:
    """An instance's vmove as its owner sees it."""
    return {**vmove(notification_uuid, entry),
            **dict.fromkeys(OWNER_HIDDEN_VMOVE)}


def workflow_details(events: list[StepEvent]) -> list[dict[str, Any]]:
    """One entry per step, in the order the steps started."""
    steps: dict[str, dict[str, Any]] = {}
    for event in events:
        step = steps.setdefault(event.step, {"name": event.step,
                                             "progress_details": []})
        step["state"], step["progress"] = event.state, event.progress
        step["progress_details"].append({
            "timestamp": timestamp(event.created_at),
            "progress": event.progress, "message": event.message})
    return list(steps.values())


def event(item: Event) -> dict[str, Any]:
    """One entry of the decision log: who decided what, and why."""
    return {
        "id": item.id,
        "notification_uuid": item.notification_uuid,
        "created_at": timestamp(item.created_at),
        "actor": item.actor,
        "subject": item.subject,
        "kind": item.kind,
        "message": item.message,
    }


def confirmation(done: Confirmed) -> dict[str, Any]:
    """An operator's confirmation that a host is off, as recorded, and
    what was checked before it (recovery's own)."""
    item = done.confirmation
    return {
        "host": item.host,
        "notification_uuid": item.notification_uuid,
        "user": item.user,
        "reason": item.reason,
        "created_at": timestamp(item.at),
        "checked": done.checked,
    }


VMOVE_STATUS = {Outcome.RECOVERED: "succeeded", Outcome.FAILED: "failed",
                Outcome.SKIPPED: "ignored"}
# A vmove's uuid is named after its notification and instance: the same
# on every engine and after every restart, with nothing more to store.
_VMOVES = uuid.UUID("1b0f6c2e-5d7a-4e38-9c41-7a2f3e8d6b50")


def vmove_uuid(notification_uuid: str, instance_uuid: str) -> str:
    return str(uuid.uuid5(_VMOVES, f"{notification_uuid}/{instance_uuid}"))


def vmove(notification_uuid: str, entry: JournalEntry) -> dict[str, Any]:
    """An instance's journal entry as Masakari's vmove (1.3), plus how
    it went (method, phase, states)."""
    result = entry.result
    if result.outcome is not None:
        status = VMOVE_STATUS.get(result.outcome, "pending")
    else:
        status = "pending" if result.phase is Phase.PENDING else "ongoing"
    return {
        "id": entry.id,
        "uuid": vmove_uuid(notification_uuid, result.uuid),
        "notification_uuid": notification_uuid,
        "instance_uuid": result.uuid,
        "instance_name": result.name,
        "source_host": result.source_host,
        "dest_host": result.dest_host,
        "start_time": timestamp(result.started_at),
        "end_time": timestamp(result.finished_at),
        "type": "evacuation",
        # How dest_host was chosen: auto (the scheduler) or reserved_host.
        "method": result.method,
        # Restart priority, its 1-based phase (None without phases), and
        # the destination's capacity warning, if any.
        "priority": result.priority,
        "priority_phase": result.priority_phase,
        "capacity_warning": result.capacity_warning,
        "status": status,
        "phase": result.phase.value,
        "original_state": result.original_state,
        "final_state": result.final_state,
        "message": result.reason,
        "created_at": timestamp(entry.created_at),
        "updated_at": timestamp(entry.updated_at),
        "deleted": False,
        "deleted_at": None,
    }


def segment(item: Segment) -> dict[str, Any]:
    return {
        "id": item.id,
        "uuid": item.uuid,
        "name": item.name,
        "description": item.description,
        "recovery_method": item.recovery_method,
        "service_type": item.service_type,
        "enabled": item.enabled,
        "created_at": timestamp(item.created_at),
        "updated_at": timestamp(item.updated_at),
        "deleted": False,
        "deleted_at": None,
    }


def host(item: Host, of: Segment) -> dict[str, Any]:
    """``of`` is the host's segment, which Masakari shows in full."""
    return {
        "id": item.id,
        "uuid": item.uuid,
        "name": item.name,
        "type": item.type,
        "control_attributes": item.control_attributes,
        "reserved": item.reserved,
        "on_maintenance": item.on_maintenance,
        "failover_segment_id": of.uuid,
        "failover_segment": segment(of),
        "created_at": timestamp(item.created_at),
        "updated_at": timestamp(item.updated_at),
        "deleted": False,
        "deleted_at": None,
    }
