"""The sample of every event type that doc/source/admin/notifications.md
shows (notification-samples.json) is what recovery sends: built here
from fixed objects, as the listener test receives them. To write the
file anew: ``RECOVERY_WRITE_SAMPLES=1 pytest tests/unit/test_bus_samples.py``.
"""

import datetime
import json
import os
import socket
from pathlib import Path

from recovery import exception
from recovery.bus import wire
from recovery.db.segments import Host
from recovery.db.segments import Segment
from recovery.notification import Kind
from recovery.notification import Notification
from recovery.notification import Status
from recovery.results import InstanceResult
from recovery.results import Outcome

SAMPLES = (Path(__file__).parents[2] / "doc" / "source" / "admin"
           / "notification-samples.json")
PAGE = SAMPLES.with_name("notifications.md")
NOW = datetime.datetime(2026, 11, 28, 12, 0, 1,
                        tzinfo=datetime.timezone.utc)
SEGMENT = Segment(1, "5cce639c-da08-4e78-b615-66c88aa49d03", "segment-1",
                  None, "auto", "COMPUTE", True, NOW, NOW)
HOST = Host(2, "083a8474-22c0-407f-b89b-c569134c3bfd", "compute-1",
            SEGMENT.uuid, "COMPUTE", "SSH", False, False, None, NOW, NOW)
ITEM = Notification(3, "07a331b8-df15-4582-b121-73ed3541a408",
                    "COMPUTE_HOST", Kind.HOST_FAILURE, "compute-1", NOW,
                    {"event": "STOPPED", "host_status": "NORMAL",
                     "cluster_status": "OFFLINE"}, "api", Status.RUNNING,
                    NOW, NOW, source_host_uuid=HOST.uuid, started_at=NOW)
VM = InstanceResult("3f1f3c1e-6c3b-4d3a-9a3e-0b9c1d2e3f40", "web-1",
                    "compute-1", "active", method="auto",
                    project_id="9b1c0e4a2f6d4c8e9a7b3d5f1e2c4a6b",
                    user_id="5e7d9c1b3a2f4e6d8c0b1a3f5e7d9c1b")
OUTCOMES = {None: {}, Outcome.RECOVERED: {"dest_host": "compute-2"},
            Outcome.FAILED: {"reason": "evacuation failed: no valid host"},
            Outcome.SKIPPED: {"reason": "not HA-enabled"}}


def messages():
    for action in ("create", "update", "delete"):
        for phase in ("start", "end"):
            yield wire.segment_event(SEGMENT, f"segment.{action}", phase)
            yield wire.host_event(HOST, SEGMENT, f"host.{action}", phase)
    for phase in ("start", "end"):
        yield wire.notification_event(ITEM, "notification.create", phase)
    yield wire.notification_event(ITEM, "notification.process", "start",
                                  binary=wire.ENGINE_BINARY)
    yield wire.process_ended(ITEM, Status.FINISHED,
                             exception.RecoveryError("unused"))
    yield wire.process_ended(ITEM, Status.ERROR, exception.RecoveryError(
        "1 of 2 instance(s) not recovered"))
    for outcome, fields in OUTCOMES.items():
        result = InstanceResult(**{**VM.__dict__, "outcome": outcome,
                                   **fields})
        yield wire.owner_event(result, ITEM, NOW)


def samples() -> str:
    host = socket.gethostname()
    found = {m.event_type: {
        "priority": m.priority,
        "publisher_id": m.publisher_id.replace(host, "controller-1"),
        "payload": m.payload} for m in messages()}
    return json.dumps(found, indent=2) + "\n"


def test_the_docs_samples_are_what_recovery_sends():
    if os.environ.get("RECOVERY_WRITE_SAMPLES"):
        SAMPLES.write_text(samples())
    assert SAMPLES.read_text() == samples(), (
        "stale: RECOVERY_WRITE_SAMPLES=1 pytest "
        "tests/unit/test_bus_samples.py")


def test_every_event_type_has_a_sample_and_a_row():
    shown = json.loads(SAMPLES.read_text())
    assert len(shown) == 21
    page = PAGE.read_text()
    assert "notification-samples.json" in page
    for family in ("segment.", "host.", "notification.create",
                   "notification.process", "instance.recovery."):
        assert f"`{family}" in page
