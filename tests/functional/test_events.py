"""The decision log of a real recovery-engine against the fake Nova and an
emulated BMC: a mixed recovery, held by the mass-failure brake first,
read back over the API and with the ``recovery`` command."""

import json

import pytest

from tests.bmc import write_credentials_file
from tests.functional.cli_process import run_cli
from tests.functional.engine_process import EngineProcess
from tests.functional.engine_process import wait_until

HOST = "compute-1"
HOSTS = ("compute-1", "compute-2", "compute-3", "compute-4")
BRAKE = ("held by the mass-failure brake: 3 of 4 compute services are down "
         "or in recovery (75% > max_failed_hosts_percent 50%)")


@pytest.fixture
def engine(nova, tmp_path, fast_redfish_bmc):
    credentials = write_credentials_file(tmp_path / "bmc.conf",
                                         {HOST: fast_redfish_bmc})
    process = EngineProcess(
        tmp_path, nova.endpoint,
        extra=f"retry_max_attempts = 2\n\n"
              f"[safety]\nrecheck_interval = 1\n\n"
              f"[fencing]\ncredentials_file = {credentials}\n"
              f"poll_interval = 0.2\n")
    yield process
    process.close()


def events_of(engine, uuid):
    status, body = engine.request("GET", f"/v1/notifications/{uuid}/events")
    assert status == 200, body
    return body["events"]


def test_a_mixed_recovery_held_by_the_brake_tells_every_decision(
        nova, engine):
    ok = nova.add_server("vm-ok", HOST)
    bad = nova.add_server("vm-bad", HOST)
    nova.set_evacuation_outcome(bad, "error")
    for host in HOSTS[:3]:
        nova.fail_host(host)
    engine.start()
    uuid = engine.post_host_down(HOST)
    wait_until(lambda: any(e["kind"] == "held"
                           for e in events_of(engine, uuid)),
               what="the brake's hold")
    # Two hosts come back: the brake lets the third through.
    for host in HOSTS[1:3]:
        nova.restore_host(host)
    done = engine.wait_status(uuid, "failed", timeout=90)
    events = events_of(engine, uuid)

    # The host's own events, in order: received, held by the brake (once,
    # however often it looked again), released with the reason, then each
    # attempt.
    host_events = [(e["actor"], e["kind"]) for e in events
                   if e["subject"] == HOST]
    me = engine.owner
    assert host_events == [
        ("api", "received"), (me, "held"), (me, "released"),
        (me, "claimed"), (me, "fenced"), (me, "isolated"), (me, "capacity"),
        (me, "error"),
        (me, "claimed"), (me, "fenced"), (me, "isolated"), (me, "capacity"),
        (me, "failed")]
    said = {e["kind"]: e["message"] for e in events if e["subject"] == HOST}
    assert said["received"] == "COMPUTE_HOST STOPPED, host_status NORMAL"
    assert said["capacity"] == "1 of 1 instance(s) fit"
    assert [e["message"] for e in events if e["kind"] == "held"] == [BRAKE]
    assert said["released"] == (
        "1 of 4 compute services are down or in recovery; 0 of 10 host "
        "recoveries started in the last 60 s")
    assert [e["message"] for e in events if e["kind"] == "claimed"] == [
        f"attempt 1 starts on {me}", f"attempt 2 starts on {me}"]
    assert "verified Off" in said["fenced"]
    assert said["isolated"].startswith("forced down and disabled in Nova")
    error = next(e["message"] for e in events if e["kind"] == "error")
    assert error.endswith("(attempt 1; retry in 0.2 s)")
    assert said["failed"] == done["message"]
    assert said["failed"].endswith("(gave up after 2 attempts)")

    # Each instance: its evacuation and its outcome, with where or why,
    # between its attempt's isolation and end.
    vmoves = {m["instance_name"]: m for m in engine.request(
        "GET", f"/v1/notifications/{uuid}/vmoves")[1]["vmoves"]}
    destination = nova.server(ok)["host"]
    assert destination != HOST
    evacuating = f"evacuating from {HOST} (auto)"
    assert [(e["kind"], e["message"]) for e in events
            if e["subject"] == f"vm-ok ({ok})"] == [
        ("evacuating", evacuating),
        ("recovered", f"evacuated from {HOST} to {destination} (auto); "
                      f"active as before")]
    reason = vmoves["vm-bad"]["message"]
    assert "evacuation failed" in reason
    assert [(e["kind"], e["message"]) for e in events
            if e["subject"] == f"vm-bad ({bad})"] == [
        ("evacuating", evacuating), ("failed", reason)] * 2
    kinds = [e["kind"] for e in events]
    first, second = (i for i, k in enumerate(kinds) if k == "isolated")
    assert set(kinds[first + 1:kinds.index("error")]) == {
        "capacity", "evacuating", "recovered", "failed"}
    assert kinds[second + 1:] == ["capacity", "evacuating", "failed",
                                  "failed"]
    assert [e["id"] for e in events] == sorted(e["id"] for e in events)
    assert all(e["notification_uuid"] == uuid for e in events)

    # The command line shows the same log.
    config = str(engine.config)
    proc = run_cli(config, "events", "--since", "1h", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == events
    proc = run_cli(config, "notifications", "show", uuid, "--format",
                   "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["events"] == events
    proc = run_cli(config, "events", "--since", "1h", "--host", HOST,
                   "--limit", "3")
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines()
             if line.startswith("| 20")]
    assert [line.split("|")[4].strip() for line in lines] == [
        f"vm-bad ({bad})", f"vm-bad ({bad})", HOST]
    assert all(uuid in line for line in lines)
    proc = run_cli(config, "notifications", "show", uuid)
    assert proc.returncode == 0, proc.stderr
    assert "Events:" in proc.stdout
    assert "held by the mass-failure brake" in proc.stdout
    proc = run_cli(config, "events", "--since", "an hour ago")
    assert proc.returncode == 2
    assert "--since: 'an hour ago' is not an ISO 8601 date-time" in (
        proc.stderr)
