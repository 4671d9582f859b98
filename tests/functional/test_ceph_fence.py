"""The Ceph storage fence on a real Ceph (tests/ceph.py: one monitor, one
memstore OSD, cephx), with recovery's cephx user holding exactly the
caps the docs give (``ceph.MON_CAPS``, ``ceph.OSD_CAPS``).

A "guest" (tests/ceph_guest.py) writes to an RBD image through librbd
from a host's address (127.0.0.x on the loopback); after the fence its
next write fails, a second client (the evacuated instance) takes the
lock and writes, and ``unfence`` leaves no entry behind. Each test uses
addresses of its own: the blocklist is the session's.
"""

import dataclasses
import logging
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from oslo_config import cfg

from recovery.concurrency import Clock
from recovery.conf import fencing as fencing_conf
from recovery.exception import FencingError
from recovery.fencing import Unreachable
from recovery.fencing import load_fencing
from recovery.fencing.ceph import MON_CAPS
from recovery.models import Server
from tests.bmc import free_port
from tests.bmc import write_sections
from tests.ceph import COMPUTE_CAPS
from tests.ceph import recovery_caps
from tests.ceph_guest import Guest
from tests.functional.cli_process import run_cli

HOST = "compute-1"
ROOT = Path(__file__).resolve().parents[2]
EXPIRE = 2592000


@dataclasses.dataclass(frozen=True)
class Cluster:
    ceph: object
    recovery: Path        # the documented caps
    compute: Path         # a compute host's: profile rbd
    weak: Path            # profile rbd on the mon, no volumes pool


@pytest.fixture(scope="module")
def cluster(ceph):
    ceph.pools("vms", "volumes")
    return Cluster(
        ceph, ceph.user("recovery", recovery_caps("vms", "volumes")),
        ceph.user("compute", COMPUTE_CAPS),
        ceph.user("weak", {"mon": "profile rbd",
                           "osd": "profile rbd-read-only pool=vms"}))


def credentials(tmp_path, cluster, address, **keys):
    """A credentials file: HOST fenced by [device:ceph] only."""
    device = {"driver": "ceph", "ceph_conf": str(cluster.ceph.conf),
              "keyring": str(cluster.recovery), "storage_address": address,
              "ephemeral_pool": "vms", "volume_pools": "volumes",
              "timeout": "10", **keys}
    return write_sections(tmp_path / "fencing.ini", {
        HOST: {"level1": "ceph"},
        "device:ceph": {k: v for k, v in device.items() if v is not None}})


def fencer(tmp_path, cluster, address, **keys):
    conf = cfg.ConfigOpts()
    fencing_conf.register_opts(conf)
    conf([])
    conf.set_override("credentials_file", str(credentials(
        tmp_path, cluster, address, **keys)), "fencing")
    conf.set_override("poll_interval", 0.1, "fencing")
    [(_, device)] = load_fencing(conf).for_host(HOST).devices
    return device.fencer


def server(**disks) -> Server:
    return Server(id=str(uuid.uuid4()), name="vm", host=HOST,
                  vm_state="active", task_state=None, status="ACTIVE",
                  locked=False, locked_reason=None, metadata={}, **disks)


def of(ip, entries):
    return sorted(e for e in entries if e.startswith(f"{ip}:"))


def test_the_fence_stops_the_guest_and_the_evacuated_one_takes_over(
        cluster, tmp_path, caplog):
    ceph = cluster.ceph
    vm = server(image_id="img")
    ceph.image("vms", f"{vm.id}_disk")
    fence = fencer(tmp_path, cluster, "127.0.0.10")
    with Guest(ceph, "127.0.0.10", cluster.compute, "vms",
               f"{vm.id}_disk") as old:
        old.next("ok")
        # Its watch, seen from the host's address only.
        assert fence.watchers([vm], Clock()) == [old.addr]
        (tmp_path / "other").mkdir()
        with caplog.at_level(logging.WARNING, "recovery.fencing.ceph"):
            assert fencer(tmp_path / "other", cluster,
                          "127.0.0.11").watchers([vm], Clock()) == []
        # A watch from an address the host is not configured with: said,
        # as the sign of a wrong storage_address.
        assert [r.getMessage() for r in caplog.records] == [
            f"{HOST}: its instances' images are also watched from "
            f"{old.addr}, none of its storage addresses (127.0.0.11); if "
            f"that is this host, its storage_address is wrong and a "
            f"storage fence would not stop it"]

        proof = fence.power_off(Clock())
        refused = old.next("error", 10)
        assert refused.split()[3:] == ["ConnectionShutdown", "108"]
        assert proof.startswith(
            f"blocklisted 127.0.0.10 on Ceph cluster {ceph.fsid} for "
            f"{EXPIRE} s (until ")
        assert "read back in osd blocklist ls as 127.0.0.10:0/0 after" in (
            proof)

        with Guest(ceph, "127.0.0.20", cluster.compute, "vms",
                   f"{vm.id}_disk") as evacuated:
            evacuated.next("ok", 20)
            # The fenced guest still runs, and never writes again.
            old.next("error")
            assert not [line for line in old.skipped if "ok" in line]
            # librbd blocklisted the old owner's instance when it broke
            # its lock: host-return must lift that one too.
            assert of("127.0.0.10", ceph.blocklist()) == sorted(
                ["127.0.0.10:0/0", old.addr])

            lifted = fence.unfence(Clock())
            assert of("127.0.0.10", ceph.blocklist()) == []
            assert lifted.startswith("removed ")
            assert {old.addr, "127.0.0.10:0/0"} <= set(
                lifted.split(" from ")[0][len("removed "):].split(", "))
            assert lifted.endswith(f"Ceph cluster {ceph.fsid}; read back: "
                                   f"no entry left for 127.0.0.10")
            evacuated.next("ok")


def test_a_fence_over_an_earlier_one_says_its_expiry_is_the_first(
        cluster, tmp_path):
    """Ceph 16 keeps an entry's expiry when it is added again: the proof
    gives the expiry read back, and says so."""
    ceph = cluster.ceph
    ceph.block("add", "127.0.0.23")       # for an hour
    earlier = ceph.blocklist_until()["127.0.0.23:0/0"]
    fence = fencer(tmp_path, cluster, "127.0.0.23")
    proof = fence.power_off(Clock())
    assert ceph.blocklist_until()["127.0.0.23:0/0"] == earlier
    fence.unfence(Clock())
    assert f"for {EXPIRE} s (until {earlier}); read back" in proof
    assert proof.endswith(f"; 127.0.0.23:0/0 was already listed, and Ceph "
                          f"keeps an entry's first expiry ({earlier})")


def test_unfence_lifts_every_client_entry_of_the_host_only(cluster,
                                                           tmp_path):
    """A host whose 12 instances' locks were broken has 12 entries of
    librbd's beside its own: all go, in the device's 10 s (one after the
    other, a monitor proposal each, they would take 13 s); another
    host's entries and a daemon's (a port) on its address stay."""
    ceph = cluster.ceph
    mine = ["127.0.0.21:0/0"] + [f"127.0.0.21:0/{n}" for n in range(1, 13)]
    others = ["127.0.0.22:0/5", "127.0.0.21:6800/7"]
    ceph.block("add", *mine, *others)
    lifted = fencer(tmp_path, cluster, "127.0.0.21").unfence(Clock())
    assert of("127.0.0.21", ceph.blocklist()) == ["127.0.0.21:6800/7"]
    assert of("127.0.0.22", ceph.blocklist()) == ["127.0.0.22:0/5"]
    assert sorted(lifted.split(" from ")[0][len("removed "):].split(
        ", ")) == sorted(mine)
    ceph.block("rm", *others)


def test_coverage_per_server_shape(cluster, tmp_path):
    ceph = cluster.ceph
    on_rbd, local = server(image_id="img"), server(image_id="img")
    ceph.image("vms", f"{on_rbd.id}_disk")
    volume, gone = str(uuid.uuid4()), str(uuid.uuid4())
    ceph.image("volumes", f"volume-{volume}")
    from_volume = server(volume_ids=(volume,))
    with_swap = server(volume_ids=(volume,), swap_mb=512)
    missing = server(volume_ids=(volume, gone))
    servers = [on_rbd, local, from_volume, with_swap, missing]

    covered = fencer(tmp_path, cluster, "127.0.0.12").coverage(servers,
                                                                 Clock())
    assert covered == {
        on_rbd.id: None,
        local.id: f"its root disk {local.id}_disk is not in Ceph pool vms "
                  f"(a local disk?)",
        from_volume.id: None, with_swap.id: None,
        missing.id: f"volume {gone}: no image volume-{gone} in Ceph "
                    f"pool(s) volumes"}

    undeclared = fencer(tmp_path, cluster, "127.0.0.12", ephemeral_pool=None)
    covered = undeclared.coverage(servers, Clock())
    assert covered[on_rbd.id] == (
        "its root disk (from image img) is taken as local: no "
        "ephemeral_pool is declared for this Ceph fence")
    assert covered[from_volume.id] is None
    assert covered[with_swap.id] == (
        "its swap disk (512 MB) is taken as local: no ephemeral_pool is "
        "declared for this Ceph fence")


def test_check_only_reads_and_the_documented_caps_pass(cluster, tmp_path):
    before = cluster.ceph.blocklist()
    checks = fencer(tmp_path, cluster, "127.0.0.13").check(Clock())
    assert [(action, ok) for action, ok, _, _ in checks] == [
        ("addresses", True), ("keyring", True), ("monitor", True),
        ("caps", True), ("blocklist", True), ("pool vms", True),
        ("pool volumes", True)]
    answers = {action: answer for action, _, answer, _ in checks}
    assert answers["caps"] == "client.recovery may add and remove entries"
    assert answers["monitor"] == f"cluster {cluster.ceph.fsid} answered"
    assert cluster.ceph.blocklist() == before


def test_missing_caps_are_found_by_check_one_line_each(cluster, tmp_path):
    before = cluster.ceph.blocklist()
    weak = fencer(tmp_path, cluster, "127.0.0.14", ceph_user="weak",
                  keyring=str(cluster.weak))
    answers = {action: (ok, answer) for action, ok, answer, _
               in weak.check(Clock())}
    assert answers["caps"] == (False, (
        f"client.weak may not add blocklist entries (access denied): "
        f"give it mon '{MON_CAPS}'"))
    assert answers["pool vms"][0] is True
    ok, answer = answers["pool volumes"]
    assert not ok and "\n" not in answer
    assert "listing the images of pool volumes: permission denied" in answer
    assert answer.endswith("give client.weak osd 'profile rbd-read-only "
                           "pool=volumes'")
    assert cluster.ceph.blocklist() == before
    with pytest.raises(FencingError, match="osd blocklist add 127.0.0.14: "
                                           "Permission denied"):
        weak.power_off(Clock())
    assert cluster.ceph.blocklist() == before


def test_a_key_the_monitors_refuse(cluster, tmp_path):
    wrong = tmp_path / "wrong.keyring"
    key = subprocess.run(["ceph-authtool", "--gen-print-key"],
                         capture_output=True, text=True, timeout=30,
                         check=True).stdout.strip()
    wrong.write_text(f"[client.recovery]\n\tkey = {key}\n")
    fence = fencer(tmp_path, cluster, "127.0.0.19", keyring=str(wrong))
    action, ok, answer, _ = fence.check(Clock())[-1]
    assert (action, ok) == ("monitor", False)
    assert "connecting to the monitors (client_mount_timeout 10 s): " \
           "permission denied (the cephx user's key or caps)" in answer
    assert key not in answer


def test_a_monitor_that_does_not_answer_is_unreachable_quickly(cluster,
                                                               tmp_path):
    dead = tmp_path / "dead.conf"
    dead.write_text(cluster.ceph.config_text(
        f"[v2:127.0.0.1:{free_port()},v1:127.0.0.1:{free_port()}]"))
    fence = fencer(tmp_path, cluster, "127.0.0.15", ceph_conf=str(dead),
                   timeout="2")
    started = time.monotonic()
    checks = fence.check(Clock())
    assert time.monotonic() - started < 5
    action, ok, answer, seconds = checks[-1]
    assert (action, ok) == ("monitor", False)
    assert "no Ceph monitor answered: connecting to the monitors " \
           "(client_mount_timeout 2 s) timed out" in answer
    started = time.monotonic()
    with pytest.raises(Unreachable, match="no Ceph monitor answered"):
        fence.power_off(Clock())
    assert time.monotonic() - started < 5


def test_a_storage_name_that_does_not_resolve(cluster, tmp_path):
    before = cluster.ceph.blocklist()
    fence = fencer(tmp_path, cluster, "{host}.invalid")
    action, ok, answer, _ = fence.check(Clock())[0]
    assert (action, ok) == ("addresses", False)
    assert "storage address compute-1.invalid does not resolve" in answer
    with pytest.raises(FencingError, match="compute-1.invalid does not "
                                           "resolve"):
        fence.power_off(Clock())
    assert cluster.ceph.blocklist() == before


def test_recovery_fencing_check_cli(cluster, tmp_path):
    """The CLI's dry run of a host fenced by Ceph: exit 0 with the
    documented caps, 1 (and the caps' line) without them."""
    def check(user, keyring):
        path = credentials(tmp_path, cluster, "127.0.0.16", ceph_user=user,
                           keyring=str(keyring))
        config = tmp_path / "recovery.conf"
        config.write_text(f"[fencing]\ncredentials_file = {path}\n")
        return run_cli(str(config), "fencing", "check", HOST)

    good = check("recovery", cluster.recovery)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "| caps " in good.stdout and "| NO " not in good.stdout
    weak = check("weak", cluster.weak)
    assert weak.returncode == 1, weak.stdout + weak.stderr
    assert "client.weak may not add blocklist entries" in weak.stdout


GREEN = textwrap.dedent("""
    import sys, time
    from recovery import concurrency
    concurrency.monkey_patch()
    from oslo_config import cfg
    from recovery.conf import fencing as fencing_conf
    from recovery.exception import FencingError
    from recovery.fencing import load_fencing

    conf = cfg.ConfigOpts()
    fencing_conf.register_opts(conf)
    conf(["--config-file", sys.argv[1]])
    fencing = load_fencing(conf)
    ticks = []
    concurrency.spawn(lambda: [ticks.append(time.sleep(0.05))
                               for _ in range(200)])

    def fence(host):
        started = time.monotonic()
        try:
            [(_, device)] = fencing.for_host(host).devices
            answer = device.fencer.power_off(concurrency.Clock())
        except FencingError as exc:
            answer = type(exc).__name__
        return f"{time.monotonic() - started:.1f} {answer.split()[0]}"

    for outcome in concurrency.task_pool(2).run(fence, ["live", "dead"]):
        print(f"{outcome.item}: {outcome.value}", flush=True)
    print(f"ticks: {len(ticks)}")
""")


def test_librados_does_not_freeze_a_green_process(cluster, tmp_path):
    """Under eventlet, a fence whose monitor does not answer (3 s) holds
    up neither the hub (a green thread ticks every 50 ms) nor a fence
    of the live Ceph at the same time."""
    dead = tmp_path / "dead.conf"
    dead.write_text(cluster.ceph.config_text(
        f"[v2:127.0.0.1:{free_port()},v1:127.0.0.1:{free_port()}]"))
    device = {"driver": "ceph", "keyring": str(cluster.recovery),
              "timeout": "3"}
    ini = write_sections(tmp_path / "fencing.ini", {
        "live": {**device, "ceph_conf": str(cluster.ceph.conf),
                 "storage_address": "127.0.0.17"},
        "dead": {**device, "ceph_conf": str(dead),
                 "storage_address": "127.0.0.18"}})
    config = tmp_path / "recovery.conf"
    config.write_text(f"[fencing]\ncredentials_file = {ini}\n"
                      f"poll_interval = 0.1\n")
    done = subprocess.run([sys.executable, "-c", GREEN, str(config)],
                          capture_output=True, text=True, timeout=60,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(": ") for line in done.stdout.splitlines())
    live_seconds, live = lines["live"].split()
    dead_seconds, dead_answer = lines["dead"].split()
    assert (live, dead_answer) == ("blocklisted", "Unreachable")
    assert float(live_seconds) < 3.0 <= float(dead_seconds)
    # 3 s of a stuck connection: a frozen hub would tick a few times.
    assert int(lines["ticks"]) >= 40
    assert of("127.0.0.17", cluster.ceph.blocklist()) == ["127.0.0.17:0/0"]
    assert of("127.0.0.18", cluster.ceph.blocklist()) == []
