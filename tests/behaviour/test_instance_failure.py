"""Instance failures (VM notifications) through ``recovery-engine``,
against both Novas: a crashed HA instance is started again where it is.
"""


from tests.behaviour.checks import FAILED
from tests.behaviour.checks import actions
from tests.behaviour.clouds import Spec
from tests.fakenova.server import wait_until

DONE = ("finished", "error", "failed", "ignored")


def test_crashed_instances_are_restarted_on_their_host(cloud, engine_for):
    """"crashed": a guest whose crash Nova has synced (stopped through the
    API); "unsynced": one Nova still shows ACTIVE, stopped then started,
    as Masakari does."""
    ids = cloud.boot(FAILED, [Spec("crashed"), Spec("unsynced")])
    crashed, unsynced = ids["crashed"], ids["unsynced"]
    status, body = cloud.api("POST", f"/servers/{crashed}/action",
                             {"os-stop": None})
    assert status == 202, body
    wait_until(lambda: cloud.server(crashed)["status"] == "SHUTOFF", 60,
               interval=0.1, what="the instance SHUTOFF")
    mark = len(actions(cloud))
    engine = engine_for(cloud)
    for uuid in (crashed, unsynced):
        notification = engine.post_vm(uuid, host=FAILED)
        done = engine.wait_status(notification, *DONE, timeout=120)
        assert done["status"] == "finished", done["message"]
        server = cloud.server(uuid)
        assert server["status"] == "ACTIVE", server
        assert server["host"] == FAILED, server
        assert server["task_state"] is None, server
        assert not server["locked"], server
    # Nova's request log: what the engine asked, in order.
    assert actions(cloud)[mark:] == [
        (crashed, "lock"), (crashed, "os-start"), (crashed, "unlock"),
        (unsynced, "lock"), (unsynced, "os-stop"), (unsynced, "os-start"),
        (unsynced, "unlock")]
