"""Every event type recovery publishes, received by a real oslo.messaging
notification listener from a real RabbitMQ."""

import datetime

from oslo_config import cfg

from recovery import bus
from recovery.bus import wire
from recovery.concurrency import Clock
from recovery.db.segments import Host
from recovery.db.segments import Segment
from recovery.notification import Kind
from recovery.notification import Notification
from recovery.notification import Status
from recovery.results import InstanceResult
from recovery.results import Outcome
from tests import rabbit

NOW = datetime.datetime(2026, 11, 28, 12, 0, 1, 5,
                        tzinfo=datetime.timezone.utc)
SEGMENT = Segment(1, "5cce639c-da08-4e78-b615-66c88aa49d03", "seg",
                  None, "auto", "compute", True, NOW, NOW)
HOST = Host(2, "083a8474-22c0-407f-b89b-c569134c3bfd", "compute-1",
            SEGMENT.uuid, "COMPUTE", "SSH", False, False, None, NOW, NOW)
ITEM = Notification(3, "07a331b8-df15-4582-b121-73ed3541a408",
                    "COMPUTE_HOST", Kind.HOST_FAILURE, "compute-1", NOW,
                    {"event": "STOPPED", "host_status": "NORMAL"}, "api",
                    Status.RUNNING, NOW, NOW, source_host_uuid=HOST.uuid,
                    started_at=NOW)
VM = InstanceResult("3f1f3c1e-6c3b-4d3a-9a3e-0b9c1d2e3f40", "web-1",
                    "compute-1", "active", dest_host="compute-2",
                    outcome=Outcome.RECOVERED, method="auto",
                    project_id="p-owner", user_id="u-owner")


def _messages():
    yield wire.segment_event(SEGMENT, "segment.create", "start")
    yield wire.segment_event(SEGMENT, "segment.update", "end")
    yield wire.host_event(HOST, SEGMENT, "host.delete", "end")
    yield wire.notification_event(ITEM, "notification.create", "end")
    yield wire.notification_event(ITEM, "notification.process", "start",
                                  binary=wire.ENGINE_BINARY)
    try:
        raise RuntimeError("Nova said no")
    except RuntimeError as exc:
        yield wire.notification_event(
            ITEM, "notification.process", "error", exc=exc,
            binary=wire.ENGINE_BINARY)
    yield wire.owner_event(VM, ITEM, NOW)


def test_a_listener_receives_every_event_type_as_masakari_sends_it():
    conf = rabbit.bus_conf(rabbit.require_rabbit(), rabbit.exchange())
    sent = list(_messages())
    with rabbit.listening(conf) as endpoint:
        assert bus.start(conf, Clock())
        try:
            for message in sent:
                bus.publish(message)
            got = endpoint.until(lambda got: len(got) == len(sent))
        finally:
            bus.stop()
    for message, (priority, publisher, event_type, payload, _) in zip(
            sent, got, strict=True):
        assert (priority, publisher, event_type, payload) == (
            message.priority, message.publisher_id, message.event_type,
            message.payload)
    create = got[0][3]
    assert create["masakari_object.name"] == "SegmentApiPayload"
    assert create["masakari_object.version"] == "1.1"
    assert "id" not in create["masakari_object.data"]
    assert got[2][1].startswith("masakari-api:")
    error = got[5]
    assert error[0] == "error" and error[2] == "notification.process.error"
    assert error[3]["masakari_object.data"]["fault"][
        "masakari_object.data"]["exception_message"] == "Nova said no"
    owner = got[6]
    assert owner[2] == "instance.recovery.end"
    data = owner[3]["masakari_object.data"]
    assert (data["project_id"], data["destination_host"]) == (
        "p-owner", "compute-2")
    assert got[3][3]["masakari_object.data"]["generated_time"] == (
        "2026-11-28T12:00:01Z")


def test_the_default_driver_publishes_nothing():
    conf = cfg.ConfigOpts()
    conf([], project="recovery")
    assert bus.start(conf, Clock()) is False
