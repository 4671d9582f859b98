"""The engine's reads of the hosts' hardware health, and the drains they
start under the brakes: a store on SQLite, an in-memory Nova, and BMC
readers whose health each test sets."""

import dataclasses

import pytest

from recovery.engine.hardware import HardwareWatch
from recovery.notification import Kind
from recovery.notification import Status
from tests.unit.fakes import MemoryNova
from tests.unit.fakes import SyncPool

HOSTS = ("compute-1", "compute-2", "compute-3")


class Reader:
    """A Redfish device's health reads; raises while ``down``."""

    def __init__(self) -> None:
        self.health = "OK"
        self.down = False

    def read_health(self, seconds: float) -> str:
        if self.down:
            raise TimeoutError("the BMC does not answer")
        return self.health


@dataclasses.dataclass
class Device:
    fencer: object


@dataclasses.dataclass
class Fence:
    devices: list


class Fencing:
    def __init__(self, readers):
        self.readers = readers

    def for_host(self, host):
        reader = self.readers.get(host)
        return Fence([(1, Device(reader))]) if reader else None


@pytest.fixture
def readers():
    return {host: Reader() for host in HOSTS[:2]}


@pytest.fixture
def watch(conf, store, clock, readers):
    nova = MemoryNova()
    for host in HOSTS:
        nova.add_service(host, state="up")
    return HardwareWatch(conf, store, nova, Fencing(readers), clock,
                         "engine-a", pool_factory=SyncPool)


def drains(store):
    return [n for n in store.list_notifications()
            if n.kind is Kind.HOST_DRAIN]


def health_events(store, host):
    return [e.message for e in store.events(host=host)
            if e.kind == "health"]


def test_a_host_that_goes_critical_gets_one_drain(watch, store, readers):
    watch.look()
    assert drains(store) == []          # OK at the first read: nothing
    readers["compute-1"].health = "Critical"
    watch.look()
    watch.look()
    [drain] = drains(store)
    assert (drain.hostname, drain.status, drain.origin) == (
        "compute-1", Status.NEW, "health")
    assert drain.payload == {"event": "DRAIN", "health": "Critical"}
    assert health_events(store, "compute-1") == [
        "hardware health OK -> Critical (Redfish); a drain is asked for"]


def test_warning_is_an_event_and_no_drain_at_the_defaults(
        watch, store, readers):
    watch.look()
    readers["compute-1"].health = "Warning"
    watch.look()
    assert drains(store) == []
    assert health_events(store, "compute-1") == [
        "hardware health OK -> Warning (Redfish); no drain: [host_drain] "
        "drain_on_health is Critical"]


def test_warning_drains_when_configured(watch, conf, store, readers):
    conf.set_override("drain_on_health", ["Warning", "Critical"],
                      "host_drain")
    watch.look()
    readers["compute-1"].health = "Warning"
    watch.look()
    assert [d.hostname for d in drains(store)] == ["compute-1"]


def test_critical_at_the_first_read_is_not_a_change(watch, store, readers):
    readers["compute-1"].health = "Critical"
    watch.look()
    assert drains(store) == []
    [said] = health_events(store, "compute-1")
    assert "a drain starts on a change from OK" in said


def test_a_bmc_that_does_not_answer_changes_nothing(watch, store, readers):
    watch.look()
    readers["compute-1"].down = True
    watch.look()
    readers["compute-1"].down = False
    watch.look()
    assert health_events(store, "compute-1") == []


def test_a_drain_waits_while_recovery_is_disarmed(watch, store, clock,
                                                  readers):
    watch.look()
    store.set_arming(False, "operator", "maintenance window", clock.now())
    readers["compute-1"].health = "Critical"
    watch.look()
    watch.look()
    assert drains(store) == []
    held = [e.message for e in store.events(host="compute-1")
            if e.kind == "held"]
    assert held == ["drain on health Critical held: recovery is disarmed "
                    "(maintenance window); asked again at the next read"]
    store.set_arming(True, "operator", None, clock.now())
    watch.look()
    assert [d.hostname for d in drains(store)] == ["compute-1"]


def test_no_drain_while_a_host_failure_is_recovered(watch, store, clock,
                                                    readers):
    watch.look()
    store.add(type="COMPUTE_HOST", kind=Kind.HOST_FAILURE,
              hostname="compute-3", generated_time=clock.now(),
              payload={"event": "STOPPED"}, origin="api", status=Status.NEW,
              now=clock.now())
    readers["compute-1"].health = "Critical"
    watch.look()
    assert drains(store) == []
    [held] = [e.message for e in store.events(host="compute-1")
              if e.kind == "held"]
    assert "a host failure is being recovered (compute-3)" in held


def test_at_most_max_drains_at_once(watch, store, readers):
    watch.look()
    for reader in readers.values():
        reader.health = "Critical"
    watch.look()
    assert [d.hostname for d in drains(store)] == ["compute-1"]
    [held] = [e.message for e in store.events(host="compute-2")
              if e.kind == "held"]
    assert "1 drain(s) already under way ([host_drain] max_drains = 1)" in (
        held)
