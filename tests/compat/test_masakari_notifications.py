"""What Masakari 22 itself publishes (its masakari.api.utils and
masakari.engine.utils, through its own Notifier and serializer, in a
process of its own: tests/compat/masakari_notify_side.py) against what
recovery publishes for the same segment, host and notification: the
same event type, priority, publisher and payload, key for key."""

import json
import subprocess
import sys

import pytest

from recovery.bus import wire
from recovery.notification import Status
from tests.compat import masakari_notify_side as side

pytest.importorskip("masakari", reason="tox -e masakari-compat installs it")


@pytest.fixture(scope="module")
def sent_by_masakari():
    done = subprocess.run(
        [sys.executable, "-m", "tests.compat.masakari_notify_side"],
        capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


def ours(case: str) -> wire.Message:
    kind, action, phase = case.split(".")
    if kind == "segment":
        return wire.segment_event(side.SEGMENT, f"segment.{action}", phase)
    if kind == "host":
        return wire.host_event(side.HOST, side.SEGMENT, f"host.{action}",
                               phase)
    if action == "create":
        return wire.notification_event(side.with_status(Status.NEW),
                                       "notification.create", phase)
    if phase == "error":
        return wire.process_ended(side.ITEM, Status.ERROR, side.refused())
    status = Status(phase)
    return wire.notification_event(
        side.with_status(status), "notification.process",
        "start" if status is Status.RUNNING else "end",
        binary=wire.ENGINE_BINARY)


@pytest.mark.parametrize("case", side.CASES)
def test_recovery_publishes_what_masakari_does(case, sent_by_masakari):
    message = ours(case)
    assert side.as_json((message.priority, message.event_type,
                         message.publisher_id, message.payload)) \
        == sent_by_masakari[case]
