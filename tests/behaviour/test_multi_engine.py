"""Two engines on one PostgreSQL, against both Novas: the engine that owns
a run is killed mid-run, and the other one finishes it."""

import collections
import contextlib

from recovery.db.store import open_store
from tests.behaviour.checks import FAILED
from tests.behaviour.checks import evacuations
from tests.behaviour.clouds import Spec
from tests.functional.engine_process import LOCK_REASON
from tests.functional.engine_process import owning_engine
from tests.functional.engine_process import wait_until


def test_the_other_engine_finishes_a_killed_owners_run(
        cloud, engines_for, postgresql_url):
    ids = cloud.boot(FAILED, [Spec(f"vm-{n}") for n in range(12)])
    cloud.fail_host(FAILED)
    engines = engines_for(cloud, postgresql_url, count=2, threads=4)
    notification = engines[0].post_host_down(FAILED)
    wait_until(lambda: sum(evacuations(cloud).values()) >= 5,
               what="five evacuate calls")
    with contextlib.closing(open_store(postgresql_url)) as store:
        victim = owning_engine(engines, store, notification)
    victim.kill()
    [other] = [e for e in engines if e is not victim]
    done = other.wait_status(notification, "finished", "failed",
                             timeout=180)
    assert done["status"] == "finished", done["message"]
    migrations = collections.Counter(
        m["instance_uuid"] for m in cloud.evacuation_migrations(FAILED))
    assert migrations == {uuid: 1 for uuid in ids.values()}
    for uuid in ids.values():
        server = cloud.server(uuid)
        assert server["host"] != FAILED and server["status"] == "ACTIVE"
        assert server["locked_reason"] != LOCK_REASON
