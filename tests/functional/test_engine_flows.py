"""``recovery-engine`` end to end for instance failures (VM notifications)
and process failures (PROCESS notifications): notifications in over HTTP,
the flows against the fake Nova.
"""

import datetime

from tests.functional.engine_process import LOCK_REASON

HOST = "compute-1"
HA = {"HA_Enabled": "True"}
INSTANCE_LOCK_REASON = "Locked by recovery: instance-failure restart"
PROCESS_REASON = ("Process failure: nova-compute stopped; disabled by "
                  "recovery")
HOST_FAILURE_REASON = "Host failure: disabled by recovery"


def now():
    return datetime.datetime.now(datetime.timezone.utc)


def server_actions(nova, uuid):
    """The server actions Nova accepted for ``uuid``, in order."""
    return [r["action"] for r in nova.requests
            if r["path"].endswith(f"/servers/{uuid}/action")
            and r["status"] is not None and r["status"] < 300]


def mutations(nova):
    return [r for r in nova.requests if r["method"] in ("POST", "PUT")]


def steps(notification):
    return [(s["name"], s["state"])
            for s in notification["recovery_workflow_details"]]


# -- instance failures --------------------------------------------------------
def test_a_crashed_instance_is_restarted(nova, engine):
    uuid = nova.add_server("vm", HOST, vm_state="stopped", metadata=HA)
    engine.start()
    notification = engine.post_vm(uuid, HOST)
    done = engine.wait_status(notification, "finished", "error", "failed",
                              "ignored")
    assert done["status"] == "finished", done["message"]
    assert done["message"] == (f"instance {uuid} (vm) restarted: ACTIVE on "
                               f"{HOST}")
    assert steps(done) == [(name, "SUCCESS") for name in (
        "lock", "stop", "start", "confirm-active", "unlock")]
    server = nova.server(uuid)
    assert (server["status"], server["host"]) == ("ACTIVE", HOST)
    assert not server["locked"]
    assert server_actions(nova, uuid) == ["lock", "os-start", "unlock"]
    assert [(e["event"], e["reason"]) for e in nova.lock_events] == [
        ("lock", INSTANCE_LOCK_REASON), ("unlock", INSTANCE_LOCK_REASON)]


def test_an_instance_nova_still_shows_active_is_stopped_then_started(
        nova, engine):
    uuid = nova.add_server("vm", HOST, metadata=HA)
    engine.start()
    done = engine.wait_status(engine.post_vm(uuid, HOST), "finished", "error",
                              "failed", "ignored")
    assert done["status"] == "finished", done["message"]
    assert server_actions(nova, uuid) == ["lock", "os-stop", "os-start",
                                          "unlock"]
    assert nova.server(uuid)["status"] == "ACTIVE"


def test_a_crash_loop_ends_failed_without_touching_nova(nova, engine):
    uuid = nova.add_server("vm", HOST, metadata=HA)
    engine.start()
    for hour in range(10, 13):
        done = engine.wait_status(
            engine.post_vm(uuid, HOST, generated=f"2026-11-22T{hour}:00:00"),
            "finished", "error", "failed", "ignored")
        assert done["status"] == "finished", done["message"]
    before = len(mutations(nova))
    looped = engine.wait_status(
        engine.post_vm(uuid, HOST, generated="2026-11-22T13:00:00"),
        "finished", "error", "failed", "ignored")
    assert looped["status"] == "failed"
    assert (f"instance {uuid} was restarted 3 times in the last 3600 s"
            in looped["message"])
    assert looped["message"].endswith(
        "not restarting again: investigate the guest")
    assert looped["attempts"] == 1
    assert len(mutations(nova)) == before
    assert server_actions(nova, uuid).count("os-start") == 3


def test_a_paused_instance_is_ignored(nova, engine):
    uuid = nova.add_server("vm", HOST, vm_state="paused", metadata=HA)
    engine.start()
    done = engine.wait_status(engine.post_vm(uuid, HOST), "finished", "error",
                              "failed", "ignored")
    assert done["status"] == "ignored"
    assert "is paused" in done["message"]
    assert mutations(nova) == []
    assert nova.server(uuid)["status"] == "PAUSED"


def test_an_instance_that_is_not_ha_enabled_is_ignored(nova, engine):
    uuid = nova.add_server("vm", HOST, vm_state="stopped")
    engine.start()
    done = engine.wait_status(engine.post_vm(uuid, HOST), "finished", "error",
                              "failed", "ignored")
    assert done["status"] == "ignored"
    assert "not HA-enabled" in done["message"]
    assert mutations(nova) == []


# -- process failures ---------------------------------------------------------
def test_process_stopped_then_started(nova, engine):
    engine.start()
    nova.fail_host(HOST)
    stopped = engine.wait_status(engine.post_process("STOPPED", HOST),
                                 "finished", "error", "failed", "ignored")
    assert stopped["status"] == "finished", stopped["message"]
    service = nova.service(HOST)
    assert (service["status"], service["disabled_reason"]) == (
        "disabled", PROCESS_REASON)
    assert service["forced_down"] is False
    assert steps(stopped) == [("disable", "SUCCESS")]

    nova.restore_host(HOST)
    started = engine.wait_status(
        engine.post_process("STARTED", HOST, generated="2026-11-22T10:05:00"),
        "finished", "error", "failed", "ignored")
    assert started["status"] == "finished", started["message"]
    assert started["message"].endswith("nova-compute service enabled")
    service = nova.service(HOST)
    assert (service["state"], service["status"]) == ("up", "enabled")
    assert steps(started) == [("await-service-up", "SUCCESS"),
                              ("enable", "SUCCESS")]


def test_process_started_leaves_an_operators_disable(nova, engine):
    nova.add_compute("compute-5", status="disabled",
                     disabled_reason="RAM replacement")
    engine.start()
    done = engine.wait_status(engine.post_process("STARTED", "compute-5"),
                              "finished", "error", "failed", "ignored")
    assert done["status"] == "finished", done["message"]
    assert "left disabled" in done["message"]
    assert nova.service("compute-5")["status"] == "disabled"
    assert mutations(nova) == []


def test_a_host_failure_after_a_process_failure_still_evacuates(
        nova, engine):
    """Masakari latches a host "on maintenance" after a process failure
    and then refuses its real failure. Here the host failure that follows
    is recovered."""
    uuids = [nova.add_server(f"vm{n}", HOST) for n in range(3)]
    engine.start()
    store = engine.store()
    try:
        segment = store.create_segment(name="seg", recovery_method="auto",
                                       now=now())
        store.create_host(segment.uuid, name=HOST, now=now())
        nova.fail_host(HOST)
        process = engine.wait_status(engine.post_process("STOPPED", HOST),
                                     "finished", "error", "failed",
                                     "ignored")
        assert process["status"] == "finished", process["message"]
        host, _ = store.host_record(HOST)
        assert host.on_maintenance is False
    finally:
        store.close()
    failure = engine.post_host_down(HOST, generated="2026-11-22T10:01:00")
    done = engine.wait_status(failure, "finished", "error", "failed",
                              "ignored")
    assert done["status"] == "finished", done["message"]
    assert "3 recovered" in done["message"]
    for uuid in uuids:
        server = nova.server(uuid)
        assert server["host"] != HOST and server["status"] == "ACTIVE"
        assert server["locked_reason"] != LOCK_REASON
    service = nova.service(HOST)
    # Disabled by the process failure, which the host failure left as is.
    assert service["forced_down"] is True
    assert (service["status"], service["disabled_reason"]) == (
        "disabled", PROCESS_REASON)

