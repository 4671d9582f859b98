"""The messages recovery speaks on the bus, built as Masakari 22 builds
them: oslo.versionedobjects primitives (``masakari_object.name``,
``.namespace``, ``.version``, ``.data``), the same event types, payload
versions, publisher ids and priorities (masakari/notifications/objects,
masakari/api/utils.py, masakari/engine/utils.py). Plain dicts: recovery
has no versioned objects of its own, and a consumer sees only JSON.

Masakari's quirks are kept, since a consumer written for it may rely on
them: a create's start and end carry no ``id`` nor uuid (Masakari sends
both before it reads the new row back), a notification's ``payload``
values are strings, and times are ISO 8601 to the second with a ``Z``.

The owner's event (``instance.recovery.*``) is recovery's own, in the
same style, namespace ``recovery``.
"""

import dataclasses
import datetime
import socket
import traceback
from typing import Any

from recovery.db.segments import Host
from recovery.db.segments import Segment
from recovery.notification import Notification
from recovery.notification import Status
from recovery.results import InstanceResult
from recovery.results import Outcome

INFO, ERROR = "info", "error"
API_BINARY, ENGINE_BINARY = "masakari-api", "masakari-engine"
# The topic Masakari (and the owner's events) go to.
TOPIC = "versioned_notifications"


@dataclasses.dataclass(frozen=True)
class Message:
    """One notification for oslo.messaging's Notifier."""

    priority: str
    event_type: str
    payload: dict[str, Any]
    publisher_id: str
    context: dict[str, Any] = dataclasses.field(default_factory=dict)


def isotime(value: datetime.datetime | None) -> str | None:
    """oslo.versionedobjects' DateTimeField on the wire."""
    if value is None:
        return None
    if value.tzinfo is not None:
        value = value.astimezone(datetime.timezone.utc)
    return value.strftime("%Y-%m-%dT%H:%M:%S") + "Z"


def primitive(name: str, version: str, data: dict[str, Any],
              namespace: str = "masakari") -> dict[str, Any]:
    return {"masakari_object.name": name,
            "masakari_object.namespace": namespace,
            "masakari_object.version": version,
            "masakari_object.data": data}


def fault(exc: BaseException) -> dict[str, Any]:
    """Masakari's ExceptionPayload of ``exc``: the module (its
    ``__name__``) and function where it was raised."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    frame = tb.tb_frame if tb is not None else None
    return primitive("ExceptionPayload", "1.0", {
        "module_name": (frame.f_globals.get("__name__", "unknown")
                        if frame else "unknown"),
        "function_name": frame.f_code.co_name if frame else "unknown",
        "exception": type(exc).__name__,
        "exception_message": str(exc),
        "traceback": "".join(traceback.format_exception(exc))})


def _segment_data(segment: Segment) -> dict[str, Any]:
    return {"id": segment.id, "uuid": segment.uuid, "name": segment.name,
            "service_type": segment.service_type,
            "description": segment.description,
            "recovery_method": segment.recovery_method,
            "enabled": segment.enabled}


def _failover_segment(segment: Segment) -> dict[str, Any]:
    return primitive("FailoverSegment", "1.1", {
        "created_at": isotime(segment.created_at),
        "updated_at": isotime(segment.updated_at), "deleted_at": None,
        "deleted": False, **_segment_data(segment)})


def _created(data: dict[str, Any], action: str, *keys: str) -> None:
    """Masakari's create sends no id nor uuid: it reads them back after
    both notifications."""
    if action.endswith(".create"):
        for key in ("id", *keys):
            data.pop(key, None)


def _message(name: str, version: str, action: str, phase: str,
             data: dict[str, Any], exc: BaseException | None,
             binary: str, context: dict[str, Any]) -> Message:
    data["fault"] = fault(exc) if exc is not None else None
    return Message(ERROR if exc is not None else INFO, f"{action}.{phase}",
                   primitive(name, version, data),
                   f"{binary}:{socket.gethostname()}", context)


def segment_event(segment: Segment, action: str, phase: str, *,
                  exc: BaseException | None = None,
                  context: dict[str, Any] | None = None) -> Message:
    """``segment.create|update|delete`` ``.start|.end|.error``."""
    data = _segment_data(segment)
    _created(data, action, "uuid")
    return _message("SegmentApiPayload", "1.1", action, phase, data, exc,
                    API_BINARY, context or {})


def host_event(host: Host, segment: Segment, action: str, phase: str, *,
               exc: BaseException | None = None,
               context: dict[str, Any] | None = None) -> Message:
    """``host.create|update|delete`` ``.start|.end|.error``."""
    data = {"id": host.id, "uuid": host.uuid, "name": host.name,
            "failover_segment": _failover_segment(segment),
            "type": host.type, "reserved": host.reserved,
            "control_attributes": host.control_attributes,
            "on_maintenance": host.on_maintenance}
    _created(data, action, "uuid")
    return _message("HostApiPayload", "1.0", action, phase, data, exc,
                    API_BINARY, context or {})


def notification_event(item: Notification, action: str, phase: str, *,
                       exc: BaseException | None = None,
                       binary: str = API_BINARY,
                       context: dict[str, Any] | None = None) -> Message:
    """``notification.create`` (the API's) and ``notification.process``
    (the engine's, ``binary=ENGINE_BINARY``)."""
    data = {"id": item.id, "notification_uuid": item.uuid,
            "generated_time": isotime(item.generated_time),
            "source_host_uuid": item.source_host_uuid, "type": item.type,
            "payload": {k: str(v) for k, v in item.payload.items()},
            "status": item.status.value}
    _created(data, action, "notification_uuid")
    return _message("NotificationApiPayload", "1.0", action, phase, data,
                    exc, binary, context or {})


def process_ended(item: Notification, status: Status,
                  error: BaseException) -> Message:
    """Masakari's end of a process: ``end``, or ``error`` with its fault
    (``error``), with the status the run ended with."""
    ended = dataclasses.replace(item, status=status)
    failed = status in (Status.ERROR, Status.FAILED)
    return notification_event(
        ended, "notification.process", "error" if failed else "end",
        exc=error if failed else None, binary=ENGINE_BINARY)


# The owner's event of each outcome.
OWNER_EVENTS = {None: "instance.recovery.start",
                Outcome.RECOVERED: "instance.recovery.end",
                Outcome.FAILED: "instance.recovery.error",
                Outcome.SKIPPED: "instance.recovery.skipped"}
OWNER_VERSION = "1.0"


def owner_event(result: InstanceResult, notification: Notification,
                now: datetime.datetime) -> Message:
    """The instance's owner's event: its recovery started, succeeded,
    failed or was skipped. Only this instance, its project and its
    hosts: nothing of another project."""
    data = {"project_id": result.project_id, "user_id": result.user_id,
            "instance_uuid": result.uuid, "instance_name": result.name,
            "failed_host": result.source_host,
            "destination_host": result.dest_host,
            "recovery_method": result.method,
            "outcome": result.outcome.value if result.outcome else None,
            "reason": result.reason,
            "notification_uuid": notification.uuid,
            "started_at": isotime(notification.started_at),
            "emitted_at": isotime(now)}
    priority = ERROR if result.outcome is Outcome.FAILED else INFO
    context = {"project_id": result.project_id, "user_id": result.user_id,
               "project": result.project_id, "user": result.user_id}
    return Message(priority, OWNER_EVENTS[result.outcome],
                   primitive("InstanceRecoveryPayload", OWNER_VERSION, data,
                             namespace="recovery"),
                   f"recovery-engine:{socket.gethostname()}", context)
