"""A recovered host comes back in the order Nova requires.

1. Its nova-compute restarts: it destroys the guests evacuated away and
   completes their evacuation migrations. Until then Nova refuses to
   clear force-down.
2. Force-down is cleared.
3. The service reports ``up`` again (heartbeats count once it is no
   longer forced down).
4. Only then is it enabled: enabling a service still down would leave
   its COMPUTE_STATUS_DISABLED trait in placement.
"""

from tests.behaviour.checks import FAILED
from tests.behaviour.clouds import Spec
from tests.fakenova.server import wait_until
from tests.functional.cli_process import run_cli
from tests.functional.cli_process import write_config


def put_service(cloud, body):
    service_id = cloud.service(FAILED)["id"]
    return cloud.api("PUT", f"/os-services/{service_id}", body)


def test_host_returns_in_order(cloud, tmp_path):
    ids = cloud.boot(FAILED, [Spec("a"), Spec("b", state="stopped")])
    cloud.fail_host(FAILED)
    proc = run_cli(write_config(tmp_path, cloud, poll_interval=0.2),
                   "host-failure", FAILED)
    assert proc.returncode == 0, proc.stderr

    # Before its compute restarts, the evacuations are not finished.
    status, body = put_service(cloud, {"forced_down": False})
    assert status == 400, body
    assert "evacuation" in body["badRequest"]["message"]
    assert cloud.service(FAILED)["forced_down"]

    # 1. The compute restarts and completes the evacuations.
    cloud.restore_host(FAILED)
    wait_until(lambda: all(m["status"] == "completed" for m in
                           cloud.evacuation_migrations(FAILED)),
               timeout=30, interval=0.1, what="completed evacuations")
    assert cloud.service(FAILED)["state"] == "down"   # still forced down

    # 2. Force-down is cleared; 3. the service comes up.
    status, body = put_service(cloud, {"forced_down": False})
    assert status == 200, body
    cloud.wait_service(FAILED, "up")

    # 4. Enabled last.
    status, body = put_service(cloud, {"status": "enabled"})
    assert status == 200, body
    service = cloud.service(FAILED)
    assert (service["state"], service["status"], service["forced_down"]) \
        == ("up", "enabled", False)
    # The returned host claimed none of the guests that moved away.
    for uuid in ids.values():
        assert cloud.server(uuid)["host"] != FAILED


def test_recovery_host_return_keeps_the_order(cloud, tmp_path):
    """``recovery host-return``: nothing changes while the host's compute
    is still dead; once it restarts, force-down is cleared, then the
    service is enabled."""
    cloud.boot(FAILED, [Spec("a")])
    cloud.fail_host(FAILED)
    config = write_config(tmp_path, cloud, poll_interval=0.2,
                          extra="[safety]\nhost_return_timeout = 3\n")
    proc = run_cli(config, "host-failure", FAILED)
    assert proc.returncode == 0, proc.stderr
    mark = len(cloud.calls())

    # Not restarted: it waits for a heartbeat, and gives up changing
    # nothing.
    proc = run_cli(config, "host-return", FAILED)
    assert proc.returncode == 1, proc.stderr
    assert f"nova-compute on {FAILED} to heartbeat" in proc.stderr
    assert [c for c in cloud.calls()[mark:] if c["method"] == "PUT"] == []
    assert cloud.service(FAILED)["forced_down"]

    # Restarted: it comes back, in order.
    cloud.restore_host(FAILED)
    config = write_config(tmp_path, cloud, poll_interval=0.2,
                          extra="[safety]\nhost_return_timeout = 60\n")
    proc = run_cli(config, "host-return", FAILED)
    assert proc.returncode == 0, proc.stderr
    progress = [line.split("]")[0] for line in proc.stderr.splitlines()
                if "] success" in line]
    assert progress == ["[check-evacuations", "[await-heartbeat",
                        "[clear-force-down", "[enable"]
    puts = [c for c in cloud.calls()[mark:] if c["method"] == "PUT"]
    assert len(puts) == 2, puts     # clear force-down, enable
    service = cloud.service(FAILED)
    assert (service["state"], service["status"], service["forced_down"]) \
        == ("up", "enabled", False)
    assert f"{FAILED} is back: service up, enabled" in proc.stdout
