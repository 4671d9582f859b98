"""Storage fencing on Ceph, end to end (issue 41): hosts whose BMC died
with them, proved off by a Ceph blocklist on the evidence rule, or held.

The world (tests/behaviour/storage_world.py): compute hosts in network
namespaces, each with an emulated Redfish BMC (level 1) and, when it is
fenced by storage, a Ceph blocklist of its storage address (level 2) on
the session's real Ceph; instances whose root disks are RBD images
``<uuid>_disk`` in the ephemeral pool; a "guest" writing to one of them
from the host's storage address; ``recovery-engine`` processes watching
the cloud with the detector's fast path. "BMC gone" is the emulator
stopped: nothing answers at its address.

Only the first test runs on the real Nova as well: the others use worlds
it cannot make (more hosts) or flows it shows already.
"""

import concurrent.futures
import time

import pytest

from tests.behaviour.checks import FAILED
from tests.behaviour.checks import evacuations
from tests.behaviour.checks import mutations
from tests.behaviour.clouds import HOSTS
from tests.behaviour.storage_world import POOL
from tests.behaviour.storage_world import World
from tests.behaviour.storage_world import log
from tests.behaviour.storage_world import storage_address
from tests.functional.cli_process import run_cli
from tests.functional.engine_process import wait_until
from tests.netlab import netlab  # noqa: F401

SPARE = "compute-5"


@pytest.fixture
def world(netlab, ceph, tmp_path):  # noqa: F811
    """``world(cloud)``: the cloud's hosts in namespaces; BMCs, fences
    and engines are each test's."""
    worlds = []

    def build(cloud, hosts=HOSTS):
        built = World(cloud, netlab, ceph, tmp_path)
        worlds.append(built)
        built.add_hosts(hosts)
        return built

    yield build
    for built in worlds:
        built.close()


def moved(cloud, ids, host):
    """Each instance evacuated once, ACTIVE on another host."""
    assert evacuations(cloud) == {uuid: 1 for uuid in ids}
    for uuid in ids:
        server = cloud.server(uuid)
        assert server["host"] not in (host, None), server
        assert server["status"] == "ACTIVE", server


def test_a_covered_host_whose_bmc_died_with_it_is_fenced_by_ceph(
        cloud, world, engines_for, postgresql_url):
    """Recovered on the fast path by the storage fence, the evidence in
    its events; the old guest's next write fails, the evacuated one
    takes the lock and writes. On its return, once Nova shows the
    evacuations completed, the host's entries and librbd's are lifted."""
    w = world(cloud)
    w.add_bmcs([FAILED])
    w.fence_with_ceph([FAILED])
    ids = w.boot(FAILED, ["vm-0", "vm-1"])
    old = w.guest(FAILED, ids["vm-0"])
    old.next("ok")
    w.watched(engines_for(cloud, postgresql_url, 2, extra=w.config()))

    lost_at = time.monotonic()
    w.lose_power([FAILED])
    item = w.wait_ended([FAILED], "finished", "failed", "error")[FAILED]
    print(f"power loss -> recovered: {time.monotonic() - lost_at:.1f} s")
    assert (item.origin, item.status.value) == ("detector", "finished"), (
        w.story())
    refused = old.next("error", 15)
    assert refused.split()[3:] == ["ConnectionShutdown", "108"]
    moved(cloud, ids.values(), FAILED)

    kinds = [e.kind for e in w.events()]
    assert kinds.index("fenced") < kinds.index("evacuating"), w.story()
    events = {e.kind: e.message for e in w.events(FAILED)}
    assert "agreed" in events, w.story()
    address = w.storage[FAILED]
    assert events["evidence"].startswith(
        f"a storage fence alone is accepted: power yes: no power device "
        f"answered at all (bmc-{FAILED}); probe yes: silent on "), events
    assert "; engines yes: 2 of 2 live engine(s) see it silent" in (
        events["evidence"])
    assert (f"; storage yes: ceph-{FAILED}: watched from its addresses "
            f"({old.addr}), but it has been silent for less than the watch "
            f"timeout") in events["evidence"]
    assert f"blocklisted {address} on Ceph cluster" in events["fenced"]
    assert f"blocklisted {address}" in item.message

    with w.guest(storage_address(), ids["vm-0"]) as new:
        new.next("ok", 20)
        # The fenced guest still runs, and never writes again.
        old.next("error")
        assert not [line for line in old.skipped if "ok" in line]
    # librbd blocklisted the old owner's client when the new one broke
    # its lock: host-return lifts that entry too.
    assert w.blocklisted(FAILED) == sorted([f"{address}:0/0", old.addr])

    old.stop()
    w.hosts[FAILED].restore()
    wait_until(lambda: {m["status"] for m in cloud.evacuation_migrations(
        FAILED)} == {"completed"}, 60, "the evacuations completed")
    engine = w.engines[0]
    returned = engine.post_host_down(FAILED, event="STARTED")
    done = engine.wait_status(returned, "finished", "failed", "error",
                              timeout=60)
    assert done["status"] == "finished", (done["message"], w.story())
    assert w.blocklisted(FAILED) == []
    [unfenced] = [e.message for e in w.events(FAILED, "unfenced")]
    assert unfenced.startswith(f"ceph-{FAILED}: removed "), unfenced
    assert unfenced.endswith(f"; read back: no entry left for {address}")
    assert {f"{address}:0/0", old.addr} == set(unfenced.split(
        ": removed ")[1].split(" from ")[0].split(", "))


def test_an_instance_on_a_local_disk_is_held_and_the_others_move(
        fake_cloud, world, engine_for):
    """Held with its reason, on every attempt of the run; the covered
    ones moved once."""
    w = world(fake_cloud)
    w.add_bmcs([FAILED])
    w.fence_with_ceph([FAILED])
    ids = w.boot(FAILED, ["vm-0", "vm-1", "local"], local=["local"])
    engine = engine_for(fake_cloud, extra=w.config())
    w.watched([engine])
    w.lose_power([FAILED])
    first = w.wait_ended([FAILED], "error", "failed", "finished")[FAILED]
    assert first.status.value == "error", w.story()
    held = (f"local: held: not covered by the storage fence, the only "
            f"proof that {FAILED} is off: its root disk {ids['local']}_disk "
            f"is not in Ceph pool {POOL} (a local disk?). Never evacuated on "
            f"that proof: once you have made sure {FAILED} is off, "
            f"'recovery fencing confirm {FAILED} --reason ...' releases it")
    assert held in first.message
    assert first.message.startswith(f"{FAILED}: 2 recovered, 1 failed "
                                    f"(proved off: level 2: blocklisted ")
    # Its next attempt holds it again, for its disk (the engines stopped
    # probing the isolated host: the first attempt's proof stands for
    # their majority), and moves nothing twice.
    second = wait_until(lambda: (n := w.notifications()[FAILED]).attempts
                        >= 2 and n.status.value != "running" and n, 30,
                        "the run's second attempt")
    assert held in second.message, w.story()
    moved(fake_cloud, [ids["vm-0"], ids["vm-1"]], FAILED)
    local = fake_cloud.server(ids["local"])
    assert local["host"] == FAILED and local["status"] == "ACTIVE", local
    [reason] = [e.message for e in w.events(kind="failed")
                if e.subject.startswith("local ")][:1]
    assert reason == held.removeprefix("local: ")


def test_a_bmc_that_answers_on_holds_the_host_and_nothing_moves(
        fake_cloud, world, engine_for):
    """Its BMC takes the power-off and the power stays On: the host may
    be live, so it is not fenced by storage and nothing moves; nor may
    an operator confirm it off while it answers its probe or
    heartbeats."""
    w = world(fake_cloud)
    w.add_bmcs([FAILED])
    w.bmcs[FAILED].ignore_power_off()
    w.fence_with_ceph([FAILED])
    ids = w.boot(FAILED, ["vm-0"])
    engine = engine_for(fake_cloud, extra=w.config())
    w.watched([engine])
    host = w.hosts[FAILED]
    host.power_loss()
    item = w.wait_ended([FAILED], "error", "failed", "finished")[FAILED]
    assert item.status.value == "error", w.story()
    [evidence] = [e.message for e in w.events(FAILED, "evidence")][:1]
    assert evidence.startswith(
        f"a storage fence alone is refused (bmc_answered): power NO: "
        f"bmc-{FAILED} answered ("), evidence
    assert "a BMC that answers has power, so the host may be live" in (
        evidence)
    assert item.message.startswith(f"{FAILED} could not be proved off: "
                                   f"no fencing level proved it off: "), (
        item.message)
    assert f"; {evidence} (attempt 1; " in item.message, item.message

    def confirm():
        return run_cli(str(engine.config), "fencing", "confirm", FAILED,
                       "--reason", "its rack is dark")

    host.restore(compute=False)          # answers, nova-compute dead
    answers = confirm()
    assert answers.returncode == 3, answers.stderr
    assert answers.stderr.startswith(
        f"recovery: error: refused: {FAILED} ({host.address}) answers on "
        f"TCP"), answers.stderr
    host.restore()                       # heartbeats...
    host.cut_link()                      # ... and is silent
    heartbeats = confirm()
    assert heartbeats.returncode == 3, heartbeats.stderr
    assert heartbeats.stderr.startswith(
        "recovery: error: refused: Nova still hears from the compute "
        "service"), heartbeats.stderr

    assert w.blocklisted(FAILED) == []
    assert w.events(FAILED, "confirmed") == []
    assert mutations(fake_cloud) == []
    assert fake_cloud.server(ids["vm-0"])["host"] == FAILED
    assert w.bmcs[FAILED].power_state() == "On"


def test_a_rack_without_its_bmcs(fake_cloud, world, engine_for):
    """Four hosts of one failure domain lose their power with their
    BMCs: the two fenced by Ceph move at once, as one domain; the two
    others are held under one ALARM that names the domain, and each
    moves once an operator confirms it off."""
    fake_cloud.nova.add_compute(SPARE)
    w = world(fake_cloud, [*HOSTS, SPARE])
    rack, covered, held = list(HOSTS), list(HOSTS[:2]), list(HOSTS[2:])
    w.add_bmcs(rack)
    w.fence_with_ceph(covered)
    ids = {host: w.boot(host, [f"{host}-vm"],
                        local=[] if host in covered else [f"{host}-vm"])
           for host in rack}
    fake_cloud.failure_domain("rack-1", rack)
    engine = engine_for(fake_cloud, extra=w.config())
    w.watched([engine])
    w.lose_power(rack)
    found = w.wait_ended(rack, "finished", "error", "failed")
    story = w.story()
    assert {h: found[h].status.value.replace("error", "held").replace(
        "failed", "held") for h in rack} == {
        **{h: "finished" for h in covered},
        **{h: "held" for h in held}}, story
    for host in covered:
        moved_one = list(ids[host].values())
        assert all(fake_cloud.server(u)["host"] == SPARE
                   for u in moved_one), story
        [claimed] = [e.message for e in w.events(host, "claimed")]
        assert claimed.endswith("one of failure domain rack-1, down as a "
                                "whole"), claimed
    # The engine raises the ALARM once a run's end is recorded: it may
    # come just after the end this test waited for.
    wait_until(lambda: "ALARM" in log(engine), 10, "the rack's ALARM")
    alarms = [line for line in log(engine).splitlines() if "ALARM" in line]
    assert len(alarms) == 1, alarms
    assert "ALARM: failure domain rack-1 is held by fencing: " in alarms[0]
    assert all(host in alarms[0] for host in held), alarms[0]
    assert not evacuations(fake_cloud).keys() & {
        u for h in held for u in ids[h].values()}

    # One confirmation per host, as two operators may give them at once.
    with concurrent.futures.ThreadPoolExecutor(len(held)) as pool:
        confirmed = dict(zip(held, pool.map(lambda host: run_cli(
            str(engine.config), "fencing", "confirm", host, "--reason",
            "rack-1 lost its PDU, checked dark"), held), strict=True))
    for host, proc in confirmed.items():
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(f"Confirmed {host} off, for "
                                      f"notification {found[host].uuid}")
    w.wait_ended(held, "finished")
    for host in held:
        [uuid] = ids[host].values()
        assert fake_cloud.server(uuid)["host"] == SPARE
        [confirmed] = w.events(host, "confirmed")
        assert confirmed.message == "rack-1 lost its PDU, checked dark"
    assert evacuations(fake_cloud) == {
        u: 1 for host in rack for u in ids[host].values()}
    assert [line for line in log(engine).splitlines()
            if "ALARM" in line] == alarms
