"""The capacity forecast against both Novas: the dry run predicts which
instances have no room, and the run then goes as predicted.

A failed host with three instances and one host left for them with room
for two: on the fake Nova, a capacity of two instances; on the real Nova,
a flavor of 7,000 MB (a host of the harness has 122,880 MB to allocate,
one instance at most 8,192 MB: Placement's max_unit), with fifteen of
them already on the host left. The other hosts are disabled. One thread,
so the scheduler meets the instances in the order the forecast does.
"""

import json

from tests.behaviour.checks import FAILED
from tests.behaviour.clouds import HOSTS
from tests.functional.cli_process import run_cli
from tests.functional.cli_process import write_config

LEFT = HOSTS[1]
BIG_MB = 7000
FILLERS = 15


def make_room_for_two(cloud) -> dict[str, str]:
    """Three instances on the failed host; room for two on ``LEFT``."""
    if cloud.kind == "fake":
        ids = {name: cloud.nova.add_server(name, FAILED)
               for name in ("a", "b", "c")}
        cloud.nova.set_capacity(LEFT, 2)
    else:
        status, body = cloud.api("POST", "/flavors", {"flavor": {
            "name": "big", "ram": BIG_MB, "vcpus": 1, "disk": 1}})
        assert status == 200, body
        flavor = body["flavor"]["id"]
        ids = {name: cloud.nova.create(name, FAILED, flavor=flavor)
               for name in ("a", "b", "c")}
        fillers = [cloud.nova.create(f"filler-{n}", LEFT, flavor=flavor)
                   for n in range(FILLERS)]
        for uuid in [*ids.values(), *fillers]:
            cloud.nova.settle(uuid)
    for host in HOSTS[2:]:
        status, _ = cloud.api(
            "PUT", f"/os-services/{cloud.service(host)['id']}",
            {"status": "disabled"})
        assert status == 200
    return ids


def test_the_dry_run_predicts_what_happens(cloud, tmp_path):
    ids = make_room_for_two(cloud)
    cloud.fail_host(FAILED)
    config = write_config(tmp_path, cloud, threads=1, poll_interval=0.2)
    plan = run_cli(config, "host-failure", FAILED, "--dry-run",
                   "--format", "json")
    assert plan.returncode == 0, plan.stderr
    planned = {r["name"]: r for r in json.loads(plan.stdout)["instances"]}
    no_room = {name for name, r in planned.items()
               if r["capacity_warning"]}
    assert len(no_room) == 1, planned
    for name, result in planned.items():
        if name not in no_room:
            assert f"to {LEFT} (predicted)" in result["reason"], result

    run = run_cli(config, "host-failure", FAILED, "--format", "json")
    assert run.returncode == 1, run.stderr
    done = {r["name"]: r for r in json.loads(run.stdout)["instances"]}
    assert {name for name, r in done.items()
            if r["outcome"] == "failed"} == no_room
    assert done[no_room.pop()]["capacity_warning"]
    for name, result in done.items():
        if result["outcome"] == "recovered":
            assert cloud.server(ids[name])["host"] == LEFT
