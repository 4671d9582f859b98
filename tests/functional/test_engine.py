"""``recovery-engine`` end to end: notifications in over HTTP, recovery
against the fake Nova, what it tells systemd, and its signals."""

import collections
import os
import signal

from recovery import concurrency
from tests.functional.cli_process import run_cli
from tests.functional.engine_process import LOCK_REASON
from tests.functional.engine_process import wait_until

HOST = "compute-1"


def add_servers(nova, host, count, prefix="vm"):
    return [nova.add_server(f"{prefix}{n}", host) for n in range(count)]


def evacuations_per_instance(nova):
    return collections.Counter(c["uuid"] for c in nova.evacuate_calls)


def left_locked(nova):
    return [s["id"] for s in nova.servers()
            if s["locked"] and s["locked_reason"] == LOCK_REASON]


def peak_locks(nova):
    held, peak = set(), 0
    for event in nova.lock_events:
        if event["event"] == "lock" and event["reason"] == LOCK_REASON:
            held.add(event["uuid"])
        elif event["event"] == "unlock":
            held.discard(event["uuid"])
        peak = max(peak, len(held))
    return peak


def test_notification_is_recovered_and_reported(nova, engine):
    uuids = add_servers(nova, HOST, 6)
    nova.fail_host(HOST)
    engine.start()
    uuid = engine.post_host_down(HOST)
    done = engine.wait_status(uuid, "finished", "error", "failed")
    assert done["status"] == "finished", done["message"]
    assert "6 recovered" in done["message"]
    steps = [s["name"] for s in done["recovery_workflow_details"]]
    # The capacity check is made as the instances are taken up.
    assert steps == ["verify-host-down", "force-down", "disable",
                     "list-instances", "recover-instances",
                     "capacity-check"]
    assert all(s["state"] == "SUCCESS"
               for s in done["recovery_workflow_details"])
    _, body = engine.request("GET", f"/v1/notifications/{uuid}/vmoves")
    assert {v["instance_uuid"] for v in body["vmoves"]} == set(uuids)
    assert {v["status"] for v in body["vmoves"]} == {"succeeded"}
    # Each instance's project (Nova's tenant_id) is journaled: what an
    # owner's read (recovery_api:owner:read) filters by.
    store = engine.store()
    try:
        assert {r.project_id for r in store.journal(uuid)} == {"demo"}
    finally:
        store.close()
    assert evacuations_per_instance(nova) == {u: 1 for u in uuids}
    assert left_locked(nova) == []
    engine.drain()
    statuses = [m["STATUS"] for m in engine.messages if "STATUS" in m]
    assert any(s.startswith("recovering 1 host(s): compute-1")
               for s in statuses)


def test_host_nova_still_hears_is_retried_until_it_is_down(nova, engine):
    add_servers(nova, HOST, 2)
    engine.start()
    uuid = engine.post_host_down(HOST)
    error = engine.wait_status(uuid, "error")
    assert "still heartbeats" in error["message"]
    assert [r for r in nova.requests
            if r["method"] in ("POST", "PUT")] == []
    nova.fail_host(HOST)
    done = engine.wait_status(uuid, "finished", "failed")
    assert done["status"] == "finished", done["message"]
    assert done["attempts"] >= 2


def test_retry_redoes_only_what_failed(nova, engine):
    uuids = add_servers(nova, HOST, 4)
    nova.set_evacuation_outcome(uuids[0], "error")
    nova.fail_host(HOST)
    engine.write_config(nova.endpoint, 5, "retry_backoff = 2\n")
    engine.start()
    uuid = engine.post_host_down(HOST)
    error = engine.wait_status(uuid, "error")
    _, body = engine.request("GET", f"/v1/notifications/{uuid}/vmoves")
    failed = [v for v in body["vmoves"] if v["status"] == "failed"]
    assert [v["instance_uuid"] for v in failed] == [uuids[0]], error
    nova.set_evacuation_outcome(uuids[0], None)
    done = engine.wait_status(uuid, "finished", "failed")
    assert done["status"] == "finished", done["message"]
    # One result per instance: the old failure is not counted again.
    _, body = engine.request("GET", f"/v1/notifications/{uuid}/vmoves")
    assert len(body["vmoves"]) == 4
    assert {v["status"] for v in body["vmoves"]} == {"succeeded"}
    counts = evacuations_per_instance(nova)
    assert counts[uuids[0]] == 2
    assert all(counts[u] == 1 for u in uuids[1:])
    assert left_locked(nova) == []


def test_watchdog_and_status_reach_systemd(nova, engine):
    engine.start(watchdog_usec=400_000)
    assert engine.messages[0]["READY"] == "1"
    engine.wait_message(lambda m: m.get("WATCHDOG") == "1",
                        what="WATCHDOG=1")
    engine.drain()
    assert any(m.get("STATUS", "").startswith("idle")
               for m in engine.messages)


def test_recovery_status_shows_each_engine_s_backend(nova, engine):
    engine.start()
    wait_until(lambda: engine.store().engines(), what="the engine listed")
    shown = run_cli(engine.config, "status").stdout
    backend = os.environ.get(concurrency.BACKEND_VARIABLE, "eventlet")
    [row] = [line for line in shown.splitlines() if f"| {engine.proc.pid} "
             in line]
    assert f"| {backend} " in row


def test_sigterm_drains_in_flight_instances_and_exits_zero(nova, engine):
    uuids = add_servers(nova, HOST, 12)
    nova.fail_host(HOST)
    engine.write_config(nova.endpoint, 3, "")
    engine.start()
    uuid = engine.post_host_down(HOST)
    wait_until(lambda: len(nova.evacuate_calls) >= 2, what="evacuations")
    engine.signal(signal.SIGTERM)
    assert engine.wait_exit() == 0
    engine.drain()
    assert any(m.get("STOPPING") == "1" for m in engine.messages)
    started = {c["uuid"] for c in nova.evacuate_calls}
    assert 0 < len(started) < 12    # it stopped taking new instances
    # What it started, it finished: nothing it moved is left locked.
    moved = {s["id"] for s in nova.servers() if s["host"] != HOST}
    assert set(left_locked(nova)) & moved == set()
    engine.start()
    done = engine.wait_status(uuid, "finished", "failed")
    assert done["status"] == "finished", done["message"]
    assert evacuations_per_instance(nova) == {u: 1 for u in uuids}
    assert left_locked(nova) == []


def test_second_sigterm_exits_at_once(nova, engine):
    [stuck] = add_servers(nova, HOST, 1)
    nova.set_evacuation_outcome(stuck, "hang")
    nova.fail_host(HOST)
    engine.start()
    engine.post_host_down(HOST)
    wait_until(lambda: nova.evacuate_calls, what="the evacuation")
    engine.signal(signal.SIGTERM)
    engine.wait_message(lambda m: m.get("STOPPING") == "1")
    engine.signal(signal.SIGTERM)
    assert engine.wait_exit(timeout=5) == 1


def test_sighup_reloads_the_pool_size(nova, engine):
    add_servers(nova, HOST, 6)
    add_servers(nova, "compute-2", 6, prefix="other")
    nova.fail_host(HOST)
    engine.write_config(nova.endpoint, 1, "")
    engine.start()
    first = engine.post_host_down(HOST)
    engine.wait_status(first, "finished")
    assert peak_locks(nova) == 1
    engine.write_config(nova.endpoint, 4, "")
    engine.signal(signal.SIGHUP)
    wait_until(lambda: "Reloaded the mutable options"
               in engine.log.read_text(), what="the reload")
    nova.fail_host("compute-2")
    second = engine.post_host_down("compute-2")
    engine.wait_status(second, "finished")
    assert peak_locks(nova) == 4


def test_host_unchecked_at_intake_is_checked_when_processed(nova, engine):
    engine.start()
    nova.inject("GET", r"/os-services", status=503, times=1)
    uuid = engine.post_host_down("no-such-host")
    assert "not checked" in engine.notification(uuid)["message"]
    failed = engine.wait_status(uuid, "failed", "finished")
    assert failed["status"] == "failed"
    assert "no-such-host" in failed["message"]
