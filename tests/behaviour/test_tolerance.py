"""Failures tolerated and the simulation, against both Novas.

Two watched hosts ([detector] hosts), the others disabled. Instances of
one flavor: on the real Nova, 7,000 MB (a host of the harness has
122,880 MB to allocate: 17 of them), on the fake Nova a capacity of 17
instances per host. compute-2 holds 14, compute-1 three: compute-2 (the
most loaded) may fail, its 14 fit on compute-1; then nothing is left.
The cloud tolerates one failure. A fourth instance on compute-1 leaves
room for 13 there: it tolerates none.

The simulation of compute-1's failure then predicts three instances on
compute-2 and one without room; the real failure follows, with one
thread so that the scheduler meets the instances in the forecast's
order, and each lands where predicted, or fails for no room.
"""

import json
import urllib.request

from recovery.db.store import open_store
from tests.behaviour.clouds import HOSTS
from tests.functional.cli_process import run_cli
from tests.functional.cli_process import write_config
from tests.functional.engine_process import wait_until

FAILED, LEFT = HOSTS[0], HOSTS[1]
BIG_MB = 7000
PER_HOST = 17
WATCH = (f"\n[detector]\nhosts = {FAILED},{LEFT}\n"
         f"[capacity]\nrefresh_interval = 0.5\n")


class Filler:
    """Boots instances of the one flavor on a host."""

    def __init__(self, cloud):
        self.cloud = cloud
        self.flavor = None
        if cloud.kind == "fake":
            for host in (FAILED, LEFT):
                cloud.nova.set_capacity(host, PER_HOST)
        else:
            status, body = cloud.api("POST", "/flavors", {"flavor": {
                "name": "big", "ram": BIG_MB, "vcpus": 1, "disk": 1}})
            assert status == 200, body
            self.flavor = body["flavor"]["id"]

    def boot(self, host, names, metadata=None):
        if self.cloud.kind == "fake":
            return {n: self.cloud.nova.add_server(n, host, metadata=metadata)
                    for n in names}
        ids = {n: self.cloud.nova.create(n, host, metadata,
                                         flavor=self.flavor) for n in names}
        for uuid in ids.values():
            self.cloud.nova.settle(uuid)
        return ids


def build(cloud):
    for host in HOSTS[2:]:
        status, _ = cloud.api(
            "PUT", f"/os-services/{cloud.service(host)['id']}",
            {"status": "disabled"})
        assert status == 200
    filler = Filler(cloud)
    filler.boot(LEFT, [f"filler-{n}" for n in range(14)])
    ids = filler.boot(FAILED, ["a", "b", "c"], {"HA_Enabled": "True"})
    return filler, ids


def capacity(config):
    done = run_cli(config, "capacity", "--format", "json")
    assert done.returncode == 0, done.stderr
    [segment] = json.loads(done.stdout)["segments"]
    return segment


def scrape(engine) -> str:
    with urllib.request.urlopen(
            f"http://127.0.0.1:{engine.port}/metrics", timeout=10) as resp:
        return resp.read().decode()


def test_failures_tolerated_drop_and_the_failure_goes_as_simulated(
        cloud, tmp_path, engine_for):
    filler, ids = build(cloud)
    # The engine's config is its own, beside it (engine_for).
    cli = tmp_path / "cli"
    cli.mkdir()
    config = write_config(cli, cloud, threads=1, poll_interval=0.2,
                          extra=WATCH)
    segment = capacity(config)
    assert segment["segment"] == "(watched hosts)"
    assert segment["failures_tolerated"] == 1, segment
    assert [h["host"] for h in segment["ha_load"]] == [LEFT, FAILED]
    # Where each host's instances would go: all of compute-1's fit.
    plan = segment["if_failed"][FAILED]["instances"]
    assert {r["predicted_host"] for r in plan} == {LEFT}

    engine = engine_for(cloud, extra=WATCH)
    wait_until(lambda: 'recovery_failures_tolerated{segment="(watched '
               'hosts)"} 1.0' in scrape(engine), 30, "the metric at 1")
    ids.update(filler.boot(FAILED, ["d"], {"HA_Enabled": "True"}))
    assert capacity(config)["failures_tolerated"] == 0
    wait_until(lambda: 'recovery_failures_tolerated{segment="(watched '
               'hosts)"} 0.0' in scrape(engine), 30, "the metric at 0")
    assert "recovery_failures_to_tolerate 1.0" in scrape(engine)

    def short():
        store = engine.store()
        try:
            return [e for e in store.events()
                    if e.kind == "capacity-short"]
        finally:
            store.close()

    [event] = wait_until(short, 30, "the capacity-short event")
    assert event.subject == "(watched hosts)"
    assert event.message.startswith(
        "tolerates 0 host failure(s), fewer than [capacity] "
        "failures_to_tolerate = 1: with compute-2 failed, no room for ")
    engine.close()

    # The game day: only reads reach Nova, and one event is recorded.
    cloud.boot(FAILED, [])          # the request log starts here
    simulated = run_cli(config, "simulate", "--fail", FAILED, "--json")
    assert simulated.returncode == 0, simulated.stderr
    assert {c["method"] for c in cloud.calls()} == {"GET"}, cloud.calls()
    body = json.loads(simulated.stdout)
    predicted = {r["name"]: r["predicted_host"]
                 for r in body["plans"][0]["instances"]}
    assert sorted(predicted.values(), key=lambda h: h is None) == [
        LEFT, LEFT, LEFT, None]
    assert {g["gate"]: g["holds"] for g in body["gates"]} == {
        "disarm": False, "brake": False, "window": False}
    assert body["estimate"]["seconds"] is None
    assert body["estimate"]["says"].startswith("no estimate")
    store = open_store(f"sqlite:///{cli}/recovery.sqlite")
    try:
        found = store.events()
        assert [e.kind for e in found] == ["simulated"], found
        [ran] = found
    finally:
        store.close()
    assert ran.subject == FAILED
    assert "nothing changed" in ran.message

    # The failure itself.
    cloud.fail_host(FAILED)
    run = run_cli(config, "host-failure", FAILED, "--format", "json")
    assert run.returncode == 1, run.stderr
    done = {r["name"]: r for r in json.loads(run.stdout)["instances"]}
    # Each instance as predicted: where it landed, or no room.
    for name, host in predicted.items():
        if host is None:
            assert done[name]["outcome"] == "failed", done[name]
        else:
            assert done[name]["outcome"] == "recovered", done[name]
            assert cloud.server(ids[name])["host"] == host

    # With a history now, the simulation estimates the time.
    again = run_cli(config, "simulate", "--fail", LEFT, "--json")
    assert again.returncode == 0, again.stderr
    estimate = json.loads(again.stdout)["estimate"]
    assert estimate["seconds"] is not None, estimate
    assert "past evacuation(s) recorded" in estimate["says"]


def test_an_instance_with_a_vtpm_is_skipped_with_its_reason(tmp_path):
    """On the fake Nova only: the real Nova's fake driver has no TPM to
    boot one on. Nova refuses to evacuate it (409), whether its flavor
    or its image asks for the vTPM; recovery never asks, in the dry run
    as in the run."""
    from tests.behaviour.clouds import FakeCloud
    from tests.fakenova import glance
    cloud = FakeCloud()
    try:
        flavored = cloud.nova.add_server(
            "tpm", FAILED, extra_specs={"hw:tpm_version": "2.0"})
        imaged = cloud.nova.add_server(
            "tpm-image", FAILED,
            image_id=cloud.nova.add_image({"hw_tpm_version": "2.0"}))
        cloud.nova.add_server("plain", FAILED)
        cloud.fail_host(FAILED)
        config = write_config(tmp_path, cloud, poll_interval=0.2)
        images = glance.endpoint_for(cloud.endpoint)
        with open(config) as f:
            text = f.read()
        with open(config, "w") as f:
            f.write(text.replace(
                "[nova]\n", f"[nova]\nimage_endpoint_override = {images}\n"))
        plan = run_cli(config, "host-failure", FAILED, "--dry-run",
                       "--format", "json")
        assert plan.returncode == 0, plan.stderr
        planned = {r["name"]: r for r in json.loads(plan.stdout)["instances"]}
        for name in ("tpm", "tpm-image"):
            assert planned[name]["outcome"] == "skipped"
            assert planned[name]["reason"].startswith(
                "Nova cannot evacuate it: it has a vTPM")
        assert planned["plain"]["outcome"] == "planned"
        run = run_cli(config, "host-failure", FAILED, "--format", "json")
        assert run.returncode == 0, run.stderr
        done = {r["name"]: r for r in json.loads(run.stdout)["instances"]}
        for name in ("tpm", "tpm-image"):
            assert done[name]["outcome"] == "skipped"
            assert "to recover it: bring the host back" in done[name][
                "reason"]
        assert done["plain"]["outcome"] == "recovered"
        assert [c["uuid"] for c in cloud.nova.evacuate_calls] == [
            done["plain"]["uuid"]]
        for tpm in (flavored, imaged):
            assert not [c for c in cloud.calls() if tpm in c["path"]
                        and c["method"] == "POST"]
            assert cloud.server(tpm)["host"] == FAILED
            # Had it asked, Nova would have refused (nova 34: 409).
            status, body = cloud.api("POST", f"/servers/{tpm}/action",
                                     {"evacuate": {}})
            assert status == 409, body
            assert "vTPM" in body["conflictingRequest"]["message"]
    finally:
        cloud.close()
