"""The safety gates end to end, against the fake Nova: the mass-failure
brake and the arming switch in the engine, host return by notification
and by hand, and the CLI's refusals."""

import pytest

from tests.fakenova import FakeNova
from tests.functional.cli_process import run_cli
from tests.functional.cli_process import write_config
from tests.functional.engine_process import EngineProcess
from tests.functional.engine_process import wait_until

HOSTS = ("compute-1", "compute-2", "compute-3", "compute-4")


@pytest.fixture
def nova():
    with FakeNova(evacuation_latency=0.2) as fake:
        for host in HOSTS:
            fake.add_compute(host)
        yield fake


@pytest.fixture
def engine(nova, tmp_path):
    process = EngineProcess(tmp_path, nova.endpoint,
                            extra="[safety]\nrecheck_interval = 1\n")
    yield process
    process.close()


def writes(nova):
    return [r for r in nova.requests if r["method"] in ("POST", "PUT")]


def turns_after(engine, count):
    """Wait until the engine's loop has gone round ``count`` more times
    (it pings the watchdog once a turn)."""
    seen = sum(1 for m in engine.messages if m.get("WATCHDOG") == "1")
    engine.wait_message(
        lambda m: sum(1 for x in engine.messages
                      if x.get("WATCHDOG") == "1") >= seen + count,
        what=f"{count} loop turns")


def test_three_of_four_failed_hosts_trip_the_brake(nova, engine):
    for host in HOSTS[:3]:
        nova.add_server(f"vm-{host}", host)
        nova.fail_host(host)
    engine.start()
    uuids = [engine.post_host_down(host) for host in HOSTS[:3]]
    for uuid in uuids:
        held = wait_until(
            lambda u=uuid: "mass-failure brake" in (
                engine.notification(u)["message"] or "")
            and engine.notification(u), what="the brake's verdict")
        assert held["status"] == "new"
        assert "3 of 4 compute services are down or in recovery (75% > " \
               "max_failed_hosts_percent 50%)" in held["message"]
    assert writes(nova) == []
    # One loud decision line, however many notifications it holds.
    log = engine.log.read_text()
    assert log.count("Mass-failure brake:") == 1
    # Two hosts come back: the share drops to 25%, the third recovers.
    for host in HOSTS[1:3]:
        nova.restore_host(host)
    done = engine.wait_status(uuids[0], "finished", "error", "failed")
    assert done["status"] == "finished", done["message"]
    assert done["attempts"] == 1    # holding cost no attempt


def test_disarm_holds_a_notification_and_arm_releases_it(nova, engine,
                                                          tmp_path):
    nova.add_server("vm", "compute-1")
    nova.fail_host("compute-1")
    engine.start(watchdog_usec=400_000)
    config = str(engine.config)
    proc = run_cli(config, "disarm", "--reason", "network work in rack 3")
    assert proc.returncode == 0, proc.stderr
    uuid = engine.post_host_down("compute-1")
    turns_after(engine, 3)
    assert engine.notification(uuid)["status"] == "new"
    assert writes(nova) == []
    status = run_cli(config, "status")
    assert "DISARMED by " in status.stdout
    assert "network work in rack 3" in status.stdout
    assert uuid in status.stdout
    # The CLI honours the switch too.
    proc = run_cli(config, "host-failure", "compute-1")
    assert proc.returncode == 3
    assert "disarmed" in proc.stderr and "recovery arm" in proc.stderr
    assert writes(nova) == []

    assert run_cli(config, "arm").returncode == 0
    done = engine.wait_status(uuid, "finished", "error", "failed")
    assert done["status"] == "finished", done["message"]
    assert "armed by " in run_cli(config, "status").stdout


def test_a_started_notification_returns_the_host(nova, engine):
    nova.add_server("vm", "compute-1")
    nova.fail_host("compute-1")
    engine.start()
    down = engine.post_host_down("compute-1")
    assert engine.wait_status(down, "finished", "error")["status"] == (
        "finished")
    nova.restore_host("compute-1")
    back = engine.post_host_down("compute-1", event="STARTED",
                                 generated="2026-11-22T10:05:00")
    done = engine.wait_status(back, "finished", "error", "failed")
    assert done["status"] == "finished", done["message"]
    steps = [s["name"] for s in done["recovery_workflow_details"]]
    assert steps == ["check-evacuations", "await-heartbeat",
                     "clear-force-down", "enable"]
    service = nova.service("compute-1")
    assert (service["state"], service["status"], service["forced_down"]) \
        == ("up", "enabled", False)


def test_host_return_is_refused_while_an_evacuation_is_in_flight(
        nova, tmp_path):
    uuid = nova.add_server("vm", "compute-1")
    nova.set_evacuation_outcome(uuid, "hang")
    nova.fail_host("compute-1")
    config = write_config(tmp_path, nova, extra="evacuation_timeout = 1\n")
    run_cli(config, "host-failure", "compute-1")
    before = len(writes(nova))
    proc = run_cli(config, "host-return", "compute-1")
    assert proc.returncode == 3, proc.stderr
    assert "still in flight" in proc.stderr
    assert len(writes(nova)) == before
