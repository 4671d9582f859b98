"""What Masakari 22 itself publishes, in a process of its own: its
configuration is oslo.config's global CONF, where masakari-monitors
(tests/compat/test_masakari_monitors.py) registers options of the same
names, so the two cannot be imported into one test process.

``python -m tests.compat.masakari_notify_side`` sends every case of
``CASES`` through Masakari's masakari.api.utils and masakari.engine.utils,
with its own Notifier and serializer on oslo.messaging's in-memory test
driver, and prints ``{case: [priority, event_type, publisher_id,
payload]}`` as JSON.

Masakari's objects are given the fields they hold at each call, as its
objects' create, save and destroy hold them (a create's start and end
are sent before the row is read back: no id nor uuid). The data, and the
failure the error case reports, are shared with the test, which builds
recovery's messages from the same."""

import dataclasses
import datetime
import json
import sys
import traceback
from typing import Any

from recovery.db.segments import Host
from recovery.db.segments import Segment
from recovery.notification import Kind
from recovery.notification import Notification
from recovery.notification import Status

NOW = datetime.datetime(2026, 11, 28, 12, 0, 1, 5)
SEGMENT = Segment(1, "5cce639c-da08-4e78-b615-66c88aa49d03", "seg",
                  "racks 1-4", "auto", "compute", True, NOW, NOW)
HOST = Host(2, "083a8474-22c0-407f-b89b-c569134c3bfd", "compute-1",
            SEGMENT.uuid, "COMPUTE", "SSH", False, False, None, NOW, NOW)
ITEM = Notification(3, "07a331b8-df15-4582-b121-73ed3541a408",
                    "COMPUTE_HOST", Kind.HOST_FAILURE, "compute-1", NOW,
                    {"event": "STOPPED", "host_status": "NORMAL",
                     "cluster_status": "OFFLINE"}, "api", Status.RUNNING,
                    NOW, NOW, source_host_uuid=HOST.uuid, started_at=NOW)

ACTIONS = ("create", "update", "delete")
PHASES = ("start", "end")
CASES = ([f"segment.{a}.{p}" for a in ACTIONS for p in PHASES]
         + [f"host.{a}.{p}" for a in ACTIONS for p in PHASES]
         + [f"notification.create.{p}" for p in PHASES]
         + ["notification.process.running", "notification.process.finished",
            "notification.process.error"])


def with_status(status: Status) -> Notification:
    return dataclasses.replace(ITEM, status=status)


def refused() -> RuntimeError:
    """The failure the error case reports, raised here for both sides:
    its fault names this module, this function and this frame."""
    try:
        raise RuntimeError("Nova said no")
    except RuntimeError as exc:
        return exc


def as_json(sent: tuple[Any, ...]) -> list[Any]:
    """A message as it compares across the process boundary."""
    return json.loads(json.dumps(list(sent), default=str))


def main() -> None:
    import oslo_messaging
    from masakari import context
    from masakari import objects
    from masakari import rpc
    from masakari.api import utils as api_utils
    from masakari.engine import utils as engine_utils
    from oslo_config import cfg
    from oslo_messaging.notify import _impl_test

    objects.register_all()
    transport = oslo_messaging.get_notification_transport(
        cfg.CONF, url="fake:/")
    rpc.NOTIFIER = oslo_messaging.Notifier(
        transport, driver="test", topics=["versioned_notifications"],
        serializer=rpc.RequestContextSerializer(
            rpc.JsonPayloadSerializer()))
    admin = context.get_admin_context()

    def segment(created: bool) -> Any:
        data = dict(name=SEGMENT.name, description=SEGMENT.description,
                    recovery_method=SEGMENT.recovery_method,
                    service_type=SEGMENT.service_type,
                    enabled=SEGMENT.enabled)
        if created:
            data.update(id=SEGMENT.id, uuid=SEGMENT.uuid, created_at=NOW,
                        updated_at=NOW, deleted_at=None, deleted=False)
        made = objects.FailoverSegment(**data)
        made.obj_reset_changes()
        return made

    def host(created: bool) -> Any:
        data = dict(name=HOST.name, type=HOST.type, reserved=HOST.reserved,
                    control_attributes=HOST.control_attributes,
                    on_maintenance=HOST.on_maintenance,
                    failover_segment=segment(True))
        if created:
            data.update(id=HOST.id, uuid=HOST.uuid)
        return objects.Host(**data)

    def notification(created: bool, status: str) -> Any:
        data = dict(generated_time=NOW, source_host_uuid=HOST.uuid,
                    type=ITEM.type, payload=ITEM.payload, status=status)
        if created:
            data.update(id=ITEM.id, notification_uuid=ITEM.uuid)
        return objects.Notification(**data)

    def send(case: str) -> None:
        kind, action, phase = case.split(".")
        created = action != "create"
        if kind == "segment":
            api_utils.notify_about_segment_api(
                admin, segment(created), action=f"segment.{action}",
                phase=phase)
        elif kind == "host":
            api_utils.notify_about_host_api(
                admin, host(created), action=f"host.{action}", phase=phase)
        elif action == "create":
            api_utils.notify_about_notification_api(
                admin, notification(False, "new"),
                action="notification.create", phase=phase)
        elif phase == "error":
            exc = refused()
            text = "".join(traceback.format_exception(exc))
            # Sent while the failure is handled, as Masakari's engine
            # does: its payload reads the failing frame from there.
            try:
                raise exc
            except RuntimeError:
                engine_utils.notify_about_notification_update(
                    admin, notification(True, "error"),
                    action="notification.process", phase="error",
                    exception=exc, tb=text)
        else:
            engine_utils.notify_about_notification_update(
                admin, notification(True, phase),
                action="notification.process",
                phase="start" if phase == "running" else "end")

    sent = {}
    for case in CASES:
        _impl_test.reset()
        send(case)
        [(_, message, priority, _)] = _impl_test.NOTIFICATIONS
        sent[case] = as_json((priority.lower(), message["event_type"],
                              message["publisher_id"], message["payload"]))
    json.dump(sent, sys.stdout)


if __name__ == "__main__":
    # By its name, not as __main__: the error case's fault names the
    # module ``refused`` is in, on both sides.
    from tests.compat import masakari_notify_side
    masakari_notify_side.main()
