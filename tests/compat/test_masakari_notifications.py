"""What Masakari 22 itself publishes (its masakari.api.utils and
masakari.engine.utils, through its own Notifier and serializer) against
what recovery publishes for the same segment, host and notification:
the same event type, priority, publisher and payload, key for key.

Masakari's objects are given the fields they hold at each call, as its
objects' create, save and destroy hold them (a create's start and end
are sent before the row is read back: no id nor uuid)."""

import dataclasses
import datetime
import traceback

import oslo_messaging
import pytest
from oslo_config import cfg
from oslo_messaging.notify import _impl_test

from recovery.bus import wire
from recovery.db.segments import Host
from recovery.db.segments import Segment
from recovery.notification import Kind
from recovery.notification import Notification
from recovery.notification import Status

masakari_context = pytest.importorskip(
    "masakari.context", reason="tox -e masakari-compat installs it")
objects = pytest.importorskip("masakari.objects")
rpc = pytest.importorskip("masakari.rpc")
api_utils = pytest.importorskip("masakari.api.utils")
engine_utils = pytest.importorskip("masakari.engine.utils")

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


@pytest.fixture(autouse=True)
def masakari_notifier(monkeypatch):
    """Masakari's Notifier as rpc.init makes it, on oslo.messaging's
    in-memory test driver."""
    objects.register_all()
    transport = oslo_messaging.get_notification_transport(
        cfg.CONF, url="fake:/")
    notifier = oslo_messaging.Notifier(
        transport, driver="test", topics=["versioned_notifications"],
        serializer=rpc.RequestContextSerializer(
            rpc.JsonPayloadSerializer()))
    monkeypatch.setattr(rpc, "NOTIFIER", notifier)
    _impl_test.reset()
    yield
    _impl_test.reset()


def sent_by_masakari():
    [(ctxt, message, priority, retry)] = _impl_test.NOTIFICATIONS
    _impl_test.reset()
    return (priority.lower(), message["event_type"],
            message["publisher_id"], message["payload"])


def ours(message: wire.Message):
    return (message.priority, message.event_type, message.publisher_id,
            message.payload)


def _segment(created: bool):
    data = dict(name=SEGMENT.name, description=SEGMENT.description,
                recovery_method=SEGMENT.recovery_method,
                service_type=SEGMENT.service_type, enabled=SEGMENT.enabled)
    if created:
        data.update(id=SEGMENT.id, uuid=SEGMENT.uuid, created_at=NOW,
                    updated_at=NOW, deleted_at=None, deleted=False)
    segment = objects.FailoverSegment(**data)
    segment.obj_reset_changes()
    return segment


def _host(created: bool):
    data = dict(name=HOST.name, type=HOST.type, reserved=HOST.reserved,
                control_attributes=HOST.control_attributes,
                on_maintenance=HOST.on_maintenance,
                failover_segment=_segment(True))
    if created:
        data.update(id=HOST.id, uuid=HOST.uuid)
    return objects.Host(**data)


def _notification(created: bool, status: str):
    data = dict(generated_time=NOW, source_host_uuid=HOST.uuid,
                type=ITEM.type, payload=ITEM.payload, status=status)
    if created:
        data.update(id=ITEM.id, notification_uuid=ITEM.uuid)
    return objects.Notification(**data)


CONTEXT = masakari_context.get_admin_context()


@pytest.mark.parametrize("action", ["create", "update", "delete"])
@pytest.mark.parametrize("phase", ["start", "end"])
def test_segment_events_are_masakari_s(action, phase):
    api_utils.notify_about_segment_api(
        CONTEXT, _segment(action != "create"), action=f"segment.{action}",
        phase=phase)
    assert ours(wire.segment_event(SEGMENT, f"segment.{action}", phase)) \
        == sent_by_masakari()


@pytest.mark.parametrize("action", ["create", "update", "delete"])
@pytest.mark.parametrize("phase", ["start", "end"])
def test_host_events_are_masakari_s(action, phase):
    api_utils.notify_about_host_api(
        CONTEXT, _host(action != "create"), action=f"host.{action}",
        phase=phase)
    assert ours(wire.host_event(HOST, SEGMENT, f"host.{action}", phase)) \
        == sent_by_masakari()


@pytest.mark.parametrize("phase", ["start", "end"])
def test_notification_create_is_masakari_s(phase):
    api_utils.notify_about_notification_api(
        CONTEXT, _notification(False, "new"),
        action="notification.create", phase=phase)
    created = wire.notification_event(
        _with(ITEM, Status.NEW), "notification.create", phase)
    assert ours(created) == sent_by_masakari()


@pytest.mark.parametrize("status", [Status.RUNNING, Status.FINISHED])
def test_notification_process_is_masakari_s(status):
    phase = "start" if status is Status.RUNNING else "end"
    engine_utils.notify_about_notification_update(
        CONTEXT, _notification(True, status.value),
        action="notification.process", phase=phase)
    message = wire.notification_event(
        _with(ITEM, status), "notification.process", phase,
        binary=wire.ENGINE_BINARY)
    assert ours(message) == sent_by_masakari()


def test_notification_process_error_is_masakari_s():
    try:
        raise RuntimeError("Nova said no")
    except RuntimeError as exc:
        engine_utils.notify_about_notification_update(
            CONTEXT, _notification(True, "error"),
            action="notification.process", phase="error", exception=exc,
            tb=traceback.format_exc())
        message = wire.process_ended(ITEM, Status.ERROR, exc)
    assert ours(message) == sent_by_masakari()


def _with(item: Notification, status: Status) -> Notification:
    return dataclasses.replace(item, status=status)
