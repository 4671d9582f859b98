"""``recovery-engine`` against both Novas: a notification is recovered,
and a killed engine resumes without evacuating anything twice."""


from tests.behaviour.checks import FAILED
from tests.behaviour.checks import MIX
from tests.behaviour.checks import ONLY_HA
from tests.behaviour.checks import assert_mix_recovered
from tests.behaviour.checks import evacuations
from tests.behaviour.checks import mutations
from tests.behaviour.clouds import Spec
from tests.functional.engine_process import LOCK_REASON
from tests.functional.engine_process import wait_until


def test_notification_recovers_the_mix(cloud, engine_for):
    ids = cloud.boot(FAILED, MIX)
    cloud.fail_host(FAILED)
    engine = engine_for(cloud, extra=f"[host_failure]\n{ONLY_HA}")
    notification = engine.post_host_down(FAILED)
    done = engine.wait_status(notification, "finished", "error", "failed")
    assert done["status"] == "finished", done["message"]
    assert "5 recovered" in done["message"]
    assert_mix_recovered(cloud, ids)


def test_killed_engine_resumes_without_evacuating_twice(cloud, engine_for):
    ids = cloud.boot(FAILED, [Spec(f"vm-{n}") for n in range(12)])
    cloud.fail_host(FAILED)
    engine = engine_for(cloud, threads=4)
    notification = engine.post_host_down(FAILED)
    wait_until(lambda: sum(evacuations(cloud).values()) >= 5,
               what="five evacuate calls")
    engine.kill()
    engine.start()
    done = engine.wait_status(notification, "finished", "failed",
                              timeout=120)
    assert done["status"] == "finished", done["message"]
    assert evacuations(cloud) == {uuid: 1 for uuid in ids.values()}
    for uuid in ids.values():
        server = cloud.server(uuid)
        assert server["host"] != FAILED and server["status"] == "ACTIVE"
        assert server["locked_reason"] != LOCK_REASON


def test_a_live_host_is_not_touched(cloud, engine_for):
    """Nova still hears from the host: the notification waits in error,
    to be retried, and nothing in Nova changes."""
    cloud.boot(FAILED, [Spec("a")])
    engine = engine_for(cloud, extra="retry_backoff = 30\n")
    notification = engine.post_host_down(FAILED)
    error = engine.wait_status(notification, "error")
    assert "still heartbeats" in error["message"]
    assert mutations(cloud) == []
    assert cloud.service(FAILED)["status"] == "enabled"
