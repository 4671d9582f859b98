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
