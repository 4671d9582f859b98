"""``recovery host-failure`` against both Novas."""

import json

from tests.behaviour.checks import EXPECTED_STATUS
from tests.behaviour.checks import FAILED
from tests.behaviour.checks import MIX
from tests.behaviour.checks import ONLY_HA
from tests.behaviour.checks import assert_mix_recovered
from tests.behaviour.checks import evacuations
from tests.behaviour.checks import mutations
from tests.behaviour.checks import peak_locks
from tests.behaviour.clouds import HOSTS
from tests.behaviour.clouds import Spec
from tests.fakenova.server import wait_until
from tests.functional.cli_process import run_cli
from tests.functional.cli_process import start_cli
from tests.functional.cli_process import write_config

POLL = 0.2


def test_recovers_the_mix(cloud, tmp_path):
    ids = cloud.boot(FAILED, MIX)
    cloud.fail_host(FAILED)
    config = write_config(tmp_path, cloud, poll_interval=POLL, extra=ONLY_HA)
    proc = run_cli(config, "host-failure", FAILED, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    outcomes = {r["name"]: r["outcome"] for r in report["instances"]}
    assert outcomes == {**{name: "recovered" for name in EXPECTED_STATUS},
                        "not-ha": "skipped"}
    for result in report["instances"]:
        if result["outcome"] == "recovered":
            server = cloud.server(result["uuid"])
            assert result["dest_host"] == server["host"], result
    assert_mix_recovered(cloud, ids)


def test_a_live_host_is_refused(cloud, tmp_path):
    cloud.boot(FAILED, [Spec("a"), Spec("b", state="stopped")])
    config = write_config(tmp_path, cloud, poll_interval=POLL)
    proc = run_cli(config, "host-failure", FAILED)
    assert proc.returncode == 3, proc.stderr
    assert "still heartbeats" in proc.stderr
    assert mutations(cloud) == []
    assert cloud.service(FAILED)["status"] == "enabled"


def test_concurrency_is_bounded_by_the_threads(cloud, tmp_path):
    ids = cloud.boot(FAILED, [Spec(f"vm-{n}") for n in range(8)])
    cloud.fail_host(FAILED)
    config = write_config(tmp_path, cloud, threads=2, poll_interval=POLL)
    proc = run_cli(config, "host-failure", FAILED)
    assert proc.returncode == 0, proc.stderr
    assert evacuations(cloud) == {uuid: 1 for uuid in ids.values()}
    assert peak_locks(cloud) == 2


def test_no_valid_host_fails_each_instance_and_unlocks(cloud, tmp_path):
    """Nova accepts the evacuate, then its scheduler finds no host: the
    migration ends in error and the instance in ERROR (both Novas)."""
    ids = cloud.boot(FAILED, [Spec("a"), Spec("b")])
    for host in HOSTS[1:]:
        service_id = cloud.service(host)["id"]
        status, _ = cloud.api("PUT", f"/os-services/{service_id}",
                              {"status": "disabled"})
        assert status == 200
    cloud.fail_host(FAILED)
    proc = run_cli(write_config(tmp_path, cloud, poll_interval=POLL),
                   "host-failure", FAILED, "--format", "json")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert {r["outcome"] for r in report["instances"]} == {"failed"}
    assert all("evacuation error" in r["reason"]
               for r in report["instances"]), report
    assert evacuations(cloud) == {uuid: 1 for uuid in ids.values()}
    for uuid in ids.values():
        server = cloud.server(uuid)
        assert (server["host"], server["status"]) == (FAILED, "ERROR")
        assert not server["locked"], server


def test_an_interrupted_run_is_resumed_by_the_next(cloud, tmp_path):
    ids = cloud.boot(FAILED, [Spec(f"vm-{n}") for n in range(12)])
    cloud.fail_host(FAILED)
    config = write_config(tmp_path, cloud, poll_interval=POLL)
    first = start_cli(config, "host-failure", FAILED)
    wait_until(lambda: sum(evacuations(cloud).values()) >= 4, timeout=60,
               interval=0.05, what="four evacuate calls")
    first.kill()
    first.wait()
    second = run_cli(config, "host-failure", FAILED)
    assert second.returncode == 0, second.stderr
    assert "Resuming the interrupted run" in second.stderr
    assert evacuations(cloud) == {uuid: 1 for uuid in ids.values()}
    for uuid in ids.values():
        server = cloud.server(uuid)
        assert server["host"] != FAILED and not server["locked"], server
