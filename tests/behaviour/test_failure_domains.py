"""A failure domain on both Novas: three hosts of one rack (an aggregate
with ``failure_domain`` metadata, made through the compute API) fail
together and are recovered at once, past a per-window cap of one and a
share of failed hosts that the brake would hold as hosts alone."""

import contextlib

from tests.behaviour.checks import evacuations
from tests.behaviour.clouds import HOSTS
from tests.behaviour.clouds import Spec

RACK = list(HOSTS[:3])


def test_a_rack_that_fails_together_starts_at_once(cloud, engine_for):
    ids = {}
    for host in RACK:
        ids.update(cloud.boot(host, [Spec(f"{host}-vm")]))
    cloud.failure_domain("rack-a", RACK)
    for host in RACK:
        cloud.fail_host(host)
    # One host recovery a minute, were they hosts alone; and 3 of 4
    # failed is over the brake's 50%.
    engine = engine_for(cloud, extra=(
        "[safety]\nmax_host_recoveries_per_window = 1\n"
        "window_seconds = 3600\n"))
    notifications = [engine.post_host_down(host) for host in RACK]
    for notification in notifications:
        done = engine.wait_status(notification, "finished", "error",
                                  "failed", timeout=180)
        assert done["status"] == "finished", done["message"]
    with contextlib.closing(engine.store()) as store:
        events = [e for n in notifications for e in store.events(n)]
    assert not [e.message for e in events if e.kind == "held"]
    claimed = [e.message for e in events if e.kind == "claimed"]
    assert len(claimed) == 3 and all(
        m.endswith("one of failure domain rack-a, down as a whole")
        for m in claimed)
    assert evacuations(cloud) == {uuid: 1 for uuid in ids.values()}
    for uuid in ids.values():
        server = cloud.server(uuid)
        assert server["host"] == HOSTS[3] and server["status"] == "ACTIVE"
        assert not server["locked"]
