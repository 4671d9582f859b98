"""Fencing levels: tried in order, every device of a level must prove the
host off, each attempt told and measured; and how the credentials file
names levels and devices.

Devices here are scripted fencers on the FakeClock; the real agents and
emulated BMCs are in tests/functional/test_fence_agents.py.
"""

import pytest

from recovery import exception
from recovery.fencing import BmcRefused
from recovery.fencing import DeviceKind
from recovery.fencing import HostFence
from recovery.fencing import Timing
from recovery.fencing import load_fencing
from recovery.fencing.levels import Device
from recovery.fencing.levels import Level
from recovery.metrics import METRICS
from tests import fencing_doubles as doubles
from tests.fencing_doubles import PowerDouble
from tests.fencing_doubles import StorageDouble
from tests.unit.fakes import FakeClock
from tests.unit.test_fencing import PASSWORD
from tests.unit.test_fencing import ScriptedFencer
from tests.unit.test_fencing import make_conf

QUICK = Timing(timeout=10.0, poll_interval=1.0, attempts=1)


def device(name, clock, **script):
    return Device(name, ScriptedFencer(clock, timing=QUICK, **script))


def fence_of(*levels):
    return HostFence("compute-1", [Level(number, devices)
                                   for number, devices in levels])


def observed(level, name, result):
    return METRICS.fencing_devices.labels(level, name, result)._sum.get()


def test_the_first_level_that_proves_it_off_ends_the_fencing():
    clock = FakeClock()
    kdump, ipmi, spare = (device("kdump", clock),
                          device("ipmi", clock, off_at=13.0),
                          device("spare", clock, off_at=0.0))
    told = []
    before = observed("2", "ipmi", "proved")
    proof = fence_of((1, [kdump]), (2, [ipmi]), (3, [spare])).power_off(
        clock, told.append)
    assert proof.text.startswith("level 2: powered off through fake bmc")
    assert not proof.storage_only
    assert [(a.level, a.device, a.proved) for a in told] == [
        (1, "kdump", False), (2, "ipmi", True)]
    assert told[0].seconds == 10.0 and told[1].seconds == 3.0
    assert "not verified Off within 10 s" in told[0].answer
    assert spare.fencer.requests == []          # never reached
    assert observed("2", "ipmi", "proved") - before == 3.0


def test_every_device_of_a_level_must_prove_it():
    clock = FakeClock()
    power, storage = (device("power", clock, off_at=0.0),
                      device("storage", clock))
    after, never = (device("after", clock, off_at=0.0),
                    device("never", clock, off_at=0.0))
    told = []
    proof = fence_of((1, [power, storage, never]), (2, [after])).power_off(
        clock, told.append)
    assert proof.text.startswith("level 2: ")
    assert [a.device for a in told] == ["power", "storage", "after"]
    assert never.fencer.requests == []  # its level had already failed


def test_a_level_of_two_devices_names_both_proofs():
    clock = FakeClock()
    proof = fence_of((1, [device("a", clock, off_at=0.0),
                          device("b", clock, off_at=0.0)])).power_off(clock)
    assert proof.text.count("powered off through fake bmc") == 2


def test_when_every_level_fails_the_error_names_each_device():
    clock = FakeClock()
    fence = fence_of((1, [device("kdump", clock)]),
                     (2, [device("ipmi", clock, send_errors=[
                         BmcRefused(f"fake: 401 for {PASSWORD}")])]))
    with pytest.raises(exception.FenceHeld) as caught:
        fence.power_off(clock)
    message = str(caught.value)
    assert caught.value.cause == "fence_failed"
    assert not caught.value.bmcs_unreachable
    assert message.startswith("no fencing level proved it off: ")
    assert "level 1 device kdump (fake) failed after 10.0 s" in message
    assert "level 2 device ipmi (fake) failed after 0.0 s: fake: 401" in (
        message)


def test_a_refusal_moves_on_to_the_next_level():
    clock = FakeClock()
    fence = fence_of((1, [device("a", clock, read_errors=[
        BmcRefused("fake: 401")])]), (2, [device("b", clock, off_at=0.0)]))
    assert fence.power_off(clock).text.startswith("level 2: ")


def test_one_device_alone_fails_as_its_driver_does():
    clock = FakeClock()
    fence = fence_of((1, [device("only", clock, read_errors=[
        BmcRefused("fake: 401")])]))
    with pytest.raises(exception.FenceHeld, match="^fake: 401$") as caught:
        fence.power_off(clock)
    assert caught.value.cause == "fence_failed"
    assert fence.describe() == "fake power-off of bmc"


def test_one_device_alone_is_measured_and_its_attempt_not_told_twice():
    clock = FakeClock()
    before = observed("1", "only", "proved")
    told = []
    fence_of((1, [device("only", clock, off_at=2.0)])).power_off(
        clock, told.append)
    assert told == []             # the fencing's own event says it
    assert observed("1", "only", "proved") - before == 2.0


def test_a_check_asks_every_device_and_fences_none():
    clock = FakeClock()
    first, second = (device("a", clock, off_at=0.0),
                     device("b", clock, read_errors=[
                         exception.FencingError("fake: no route")]))
    checks = fence_of((1, [first]), (2, [second])).check(clock)
    assert [(c.level, c.device, c.action, c.ok, c.answer) for c in checks] == [
        (1, "a", "status", True, "power Off"),
        (2, "b", "status", False, "fake: no route")]
    assert first.fencer.requests == second.fencer.requests == []


# -- storage-only levels ------------------------------------------------------
def test_a_storage_level_comes_last_and_only_through_its_gate():
    """Level 1 a storage fence, level 2 a dead BMC: the BMC is tried
    first, the gate is asked with its attempt, then the storage fence
    proves it, storage-only."""
    clock = FakeClock()
    storage, bmc = StorageDouble("compute-1"), PowerDouble("compute-1")
    asked = []

    def gate(attempts, level):
        asked.append([(a.device, a.reached, a.device_kind) for a in attempts])
        return "the evidence"

    proof = doubles.fence("compute-1", [storage], [bmc]).power_off(
        clock, gate=gate)
    assert asked == [[("power-double-2-0", False, DeviceKind.POWER)]]
    assert proof.storage_only and proof.storage == (storage,)
    assert proof.text == (
        "level 1: blocklisted compute-1's storage address, read back; a "
        "storage fence alone, on this evidence: the evidence")


def test_a_gate_that_holds_leaves_the_storage_fence_untouched():
    clock = FakeClock()
    storage = StorageDouble("compute-1")

    def gate(attempts, level):
        raise exception.FenceHeld("the BMC answered", "bmc_answered")

    fence = doubles.fence("compute-1", [PowerDouble("compute-1", "On")],
                          [storage])
    with pytest.raises(exception.FenceHeld) as caught:
        fence.power_off(clock, gate=gate)
    assert storage.fenced == 0
    assert caught.value.cause == "bmc_answered"
    assert not caught.value.bmcs_unreachable
    assert str(caught.value).startswith(
        "no fencing level proved it off: level 1 device power-double-1-0 "
        "(power-double) failed after 0.3 s: ")
    assert str(caught.value).endswith("; the BMC answered")


def test_without_a_gate_no_storage_fence_is_tried():
    storage = StorageDouble("compute-1")
    with pytest.raises(exception.FenceHeld, match="never tried without the "
                                                  "evidence rule"):
        doubles.fence("compute-1", [storage]).power_off(FakeClock())
    assert storage.fenced == 0


def device_results(kind, result):
    return METRICS.registry.get_sample_value(
        "recovery_fencing_device_results_total",
        {"kind": kind, "result": result}) or 0


def test_dead_bmcs_alone_hold_as_unreachable():
    fence = doubles.fence("compute-1", [PowerDouble("compute-1")],
                          [PowerDouble("compute-1")])
    before = device_results("power", "unreachable")
    with pytest.raises(exception.FenceHeld) as caught:
        fence.power_off(FakeClock())
    assert device_results("power", "unreachable") - before == 2
    assert caught.value.cause == "unreachable"
    assert caught.value.bmcs_unreachable
    assert "level 1 device power-double-1-0 (power-double) unreachable " \
           "after 0.3 s" in str(caught.value)


def test_a_level_mixing_power_and_storage_needs_its_power_proof():
    """Its power device is tried first, even listed second: when it
    fails, the storage device is not tried, and no gate is asked."""
    clock = FakeClock()
    storage = StorageDouble("compute-1")

    def gate(attempts, level):
        raise AssertionError("a mixed level is a power proof, not gated")

    fence = doubles.fence("compute-1", [storage, PowerDouble("compute-1")])
    with pytest.raises(exception.FenceHeld):
        fence.power_off(clock, gate=gate)
    assert storage.fenced == 0
    proof = doubles.fence("compute-1", [storage, PowerDouble(
        "compute-1", "Off")]).power_off(clock, gate=gate)
    assert storage.fenced == 1 and not proof.storage_only


# -- levels and devices in the credentials file -------------------------------

LEVELS = """
[DEFAULT]
username = admin
password = file-default-pass

[device:first]
driver = ipmi
address = {host}-ipmi.example.com
timeout = 12

[device:second]
driver = redfish
address = https://{host}-bmc.example.com
password = device-pass

[compute-*]
level1 = first
level2 = second

[compute-9]
password = own-pass
level1 = second, first

[plain-1]
driver = ipmi
address = plain-bmc
"""


def fencers(fence):
    return [(level, d.name, d.fencer) for level, d in fence.devices]


def test_levels_name_devices_in_order(tmp_path):
    fencing = load_fencing(make_conf(tmp_path, LEVELS))
    levels = fencers(fencing.for_host("compute-1"))
    assert [(level, name) for level, name, _ in levels] == [
        (1, "first"), (2, "second")]
    first, second = levels[0][2], levels[1][2]
    assert first.settings.address == "compute-1-ipmi.example.com"
    assert first.timing.timeout == 12.0
    assert second.timing.timeout == 30.0        # [fencing] timeout
    assert first.settings.username == second.settings.username == "admin"
    assert first.settings.password.reveal() == "file-default-pass"
    assert second.settings.password.reveal() == "device-pass"


def test_a_device_takes_the_connection_keys_it_lacks_from_its_host(tmp_path):
    fencing = load_fencing(make_conf(tmp_path, LEVELS))
    levels = fencers(fencing.for_host("compute-9"))
    assert [(level, name) for level, name, _ in levels] == [
        (1, "second"), (1, "first")]
    second, first = levels[0][2], levels[1][2]
    assert first.settings.password.reveal() == "own-pass"
    assert second.settings.password.reveal() == "device-pass"


def test_a_host_with_a_driver_has_one_level(tmp_path):
    fencing = load_fencing(make_conf(tmp_path, LEVELS))
    assert [(level, name) for level, name, _ in fencers(
        fencing.for_host("plain-1"))] == [(1, "ipmi")]
    assert fencing.for_host("storage-1") is None


def test_levels_in_the_file_default_fence_every_other_host(tmp_path):
    ini = LEVELS.replace("[DEFAULT]\n", "[DEFAULT]\nlevel1 = first\n")
    fencing = load_fencing(make_conf(tmp_path, ini))
    assert [name for _, name, _ in fencers(
        fencing.for_host("storage-1"))] == ["first"]
    # A host's own driver or levels win over the file's [DEFAULT].
    assert [name for _, name, _ in fencers(
        fencing.for_host("plain-1"))] == ["ipmi"]


@pytest.mark.parametrize("ini, words", [
    ("[h]\nlevel1 = missing\n", ["[h] level1", "no [device:missing]"]),
    ("[h]\ndriver = ipmi\nlevel1 = d\n[device:d]\ndriver = ipmi\n",
     ["[h]", "both 'driver' and levels"]),
    ("[device:d]\ndriver = ipmi\nlevel1 = d\n", ["[device:d]",
                                               "a device has no levels"]),
    ("[h]\nlevel1 = d\n[device:d]\naddress = x\n",
     ["[device:d]", "needs a 'driver'"]),
    ("[device:a b]\ndriver = ipmi\n", ["[device:a b]", "NAME of letters"]),
    ("[h]\nlevel1 = d\n[device:d]\ndriver = ipmi\naddress = a\n"
     "username = u\npassword = p\ntimeout = 0.5\n",
     ["[device:d] timeout", "'0.5'"]),
    ("[h]\nlevel1 = d\n[device:d]\ndriver = ipmi\naddress = a\n"
     "username = u\npassword = p\nlanplus = 1\n",
     ["[device:d] lanplus", "unknown key 'lanplus'",
      "go in a section with driver = fence_agent"]),
    ("[DEFAULT]\npasswrd = x\n", ["[DEFAULT] passwrd", "unknown key"]),
    ("[h]\ndriver = ipmi\npassword = one\n  action=on\n",
     ["[h] password", "a value is one line"]),
    ("[h]\nlevel1 = d\nlanplus = 1\n[device:d]\ndriver = ipmi\n",
     ["[h] lanplus", "unknown key 'lanplus'"]),
])
def test_bad_levels_are_refused_at_load(tmp_path, ini, words):
    with pytest.raises(exception.ConfigError) as caught:
        load_fencing(make_conf(tmp_path, ini))
    for word in words:
        assert word in str(caught.value)


def test_every_mistake_is_reported_at_once(tmp_path):
    ini = ("[a]\nlevel1 = nowhere\n[b]\ndriver = ipmi\naddress = x\n"
           "username = u\n")
    with pytest.raises(exception.ConfigError) as caught:
        load_fencing(make_conf(tmp_path, ini))
    lines = str(caught.value).splitlines()
    assert len(lines) == 2
    assert "no [device:nowhere]" in lines[0]
    assert "needs 'password'" in lines[1] and "[b]" in lines[1]


def test_an_unused_device_is_warned_about(tmp_path, caplog):
    ini = LEVELS + "\n[device:spare]\ndriver = ipmi\n"
    load_fencing(make_conf(tmp_path, ini))
    assert "device spare is in no host's levels" in caplog.text
