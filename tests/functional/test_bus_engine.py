"""``recovery-engine`` on the message bus: a host failure's notifications
and each owner's event, received by a real listener from a real
RabbitMQ; on threads, oslo.messaging brings no eventlet."""

import os

from recovery import concurrency
from tests import rabbit
from tests.functional.engine_process import EngineProcess
from tests.functional.engine_process import wait_until

HOST = "compute-1"
OWNERS = ("p-alice", "p-bob")


def _data(message):
    return message[3]["masakari_object.data"]


def test_a_recovery_is_told_to_the_bus_and_to_each_owner(nova, tmp_path):
    conf = rabbit.bus_conf(rabbit.require_rabbit(), rabbit.exchange())
    uuids = {nova.add_server(f"vm-{owner}", HOST, project_id=owner,
                             user_id=f"u-{owner}"): owner
             for owner in OWNERS}
    nova.fail_host(HOST)
    engine = EngineProcess(tmp_path, nova.endpoint, extra=rabbit.engine_config(
        conf.transport_url, conf.control_exchange))
    try:
        with rabbit.listening(conf) as endpoint:
            engine.start()
            uuid = engine.post_host_down(HOST)
            done = engine.wait_status(uuid, "finished", "error", "failed")
            assert done["status"] == "finished", done["message"]
            got = endpoint.until(lambda got: any(
                m[2] == "notification.process.end" for m in got))
    finally:
        engine.close()
    kinds = [m[2] for m in got]
    # The engine may claim it before the API has queued its create.end
    # (doc: Notifications, "Order").
    assert kinds.index("notification.create.start") < kinds.index(
        "notification.create.end") < kinds.index("notification.process.end")
    assert kinds.index("notification.process.start") < kinds.index(
        "notification.process.end")
    process_end = got[kinds.index("notification.process.end")]
    assert process_end[1].startswith("masakari-engine:")
    assert _data(process_end)["notification_uuid"] == uuid
    assert _data(process_end)["status"] == "finished"
    owners = {}
    for message in got:
        if message[2].startswith("instance.recovery."):
            data = _data(message)
            owners.setdefault(data["instance_uuid"], []).append(message)
            # Only its own project's: in the payload and the context.
            assert data["project_id"] == uuids[data["instance_uuid"]]
            assert message[4]["project_id"] == data["project_id"]
    assert set(owners) == set(uuids)
    for instance, messages in owners.items():
        assert [m[2] for m in messages][-1] == "instance.recovery.end"
        end = _data(messages[-1])
        assert (end["failed_host"], end["notification_uuid"]) == (
            HOST, uuid)
        assert end["destination_host"] not in (None, HOST)
        assert end["user_id"] == f"u-{uuids[instance]}"


def test_on_threads_the_bus_imports_no_eventlet(nova, tmp_path):
    """The engine on threads, publishing to RabbitMQ: Python's own import
    trace (PYTHONVERBOSE) shows oslo.messaging and kombu loaded, and
    eventlet never."""
    url = rabbit.require_rabbit()
    engine = EngineProcess(
        tmp_path, nova.endpoint,
        extra=rabbit.engine_config(url, rabbit.exchange()),
        env={concurrency.BACKEND_VARIABLE: "threading", "PYTHONVERBOSE": "1"})
    try:
        engine.start()
        wait_until(lambda: "Publishing notifications on the message bus"
                   in engine.log.read_text(), what="the bus started")
    finally:
        engine.close()
    trace = (tmp_path / "stderr.log").read_text()
    imported = {line.split("'")[1] for line in trace.splitlines()
                if line.startswith("import '")}
    assert {"oslo_messaging", "kombu", "futurist"} <= imported
    assert [name for name in imported if name.startswith("eventlet")] == []
    assert not os.environ.get("PYTHONVERBOSE")
