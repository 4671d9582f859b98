"""The engine's gates: the per-window cap and the mass-failure brake."""

import datetime
import logging

import pytest

from recovery.engine.gates import CENSUS_REUSE
from recovery.engine.gates import Gates
from recovery.notification import Status
from recovery.notification import classify
from tests.unit.fakes import MemoryNova

STOPPED = {"event": "STOPPED", "host_status": "NORMAL"}
HOSTS = [f"compute-{n}" for n in range(1, 5)]



@pytest.fixture
def nova():
    nova = MemoryNova()
    for host in HOSTS:
        nova.add_service(host, state="up")
    return nova


def notify(store, clock, host, event="STOPPED"):
    payload = {**STOPPED, "event": event}
    return store.add(type="COMPUTE_HOST",
                     kind=classify("COMPUTE_HOST", payload), hostname=host,
                     generated_time=clock.now(), payload=payload,
                     origin="api", status=Status.NEW, now=clock.now())


def fail(nova, *hosts):
    for host in hosts:
        nova.add_service(host, state="down")


def test_one_failed_host_of_four_passes(conf, store, nova, clock):
    fail(nova, "compute-1")
    item = notify(store, clock, "compute-1")
    assert Gates(conf, store, nova, clock).check(item) is None


def test_three_of_four_failed_hosts_trip_the_brake(conf, store, nova,
                                                    caplog, clock):
    fail(nova, "compute-1", "compute-2", "compute-3")
    gates = Gates(conf, store, nova, clock)
    with caplog.at_level(logging.ERROR):
        holds = [gates.check(notify(store, clock, host))
                 for host in ("compute-1", "compute-2", "compute-3")]
    assert all(hold is not None for hold in holds)
    assert "3 of 4 compute services are down or in recovery (75% > " \
           "max_failed_hosts_percent 50%)" in holds[0].message
    assert holds[0].delay == 30
    # One loud line for the verdict, not one per notification.
    lines = [r for r in caplog.records if "Mass-failure brake" in r.message]
    assert len(lines) == 1


def test_hosts_in_recovery_count_as_failed(conf, store, nova, clock):
    """Hosts this engine is recovering count, whatever Nova says of
    them now."""
    for host in HOSTS[:2]:
        store.take(notify(store, clock, host), "me:1", 60)
    fail(nova, "compute-3")
    hold = Gates(conf, store, nova, clock).check(
        notify(store, clock, "compute-3"))
    assert hold is not None and "3 of 4" in hold.message


def test_every_host_down_is_the_observer_cut_off(conf, store, nova, clock):
    conf.set_override("max_failed_hosts_percent", 100, "safety")
    fail(nova, *HOSTS)
    hold = Gates(conf, store, nova, clock).check(
        notify(store, clock, "compute-1"))
    assert hold is not None and "looks down at once" in hold.message


def test_the_brake_releases_when_the_share_drops(conf, store, nova, clock):
    fail(nova, "compute-1", "compute-2", "compute-3")
    gates = Gates(conf, store, nova, clock)
    item = notify(store, clock, "compute-1")
    assert gates.check(item) is not None
    nova.add_service("compute-3", state="up")
    nova.add_service("compute-2", state="up")
    clock.sleep(CENSUS_REUSE)
    assert gates.check(item) is None


def test_a_census_serves_the_checks_of_one_second(conf, store, nova,
                                                  clock):
    """A rack's notifications, checked one after another, cost one
    services listing; the next second's check lists them again."""
    fail(nova, "compute-1", "compute-2")
    gates = Gates(conf, store, nova, clock)
    for host in ("compute-1", "compute-2"):
        gates.check(notify(store, clock, host))
    assert nova.names().count("list_services") == 1
    clock.sleep(CENSUS_REUSE)
    gates.check(notify(store, clock, "compute-1"))
    assert nova.names().count("list_services") == 2


def test_a_host_return_passes_the_brake(conf, store, nova, clock):
    fail(nova, *HOSTS)
    item = notify(store, clock, "compute-1", event="STARTED")
    assert Gates(conf, store, nova, clock).check(item) is None


def test_the_window_caps_recoveries_and_the_rest_wait(conf, store, nova,
                                                      clock):
    conf.set_override("max_host_recoveries_per_window", 2, "safety")
    conf.set_override("window_seconds", 60, "safety")
    conf.set_override("max_failed_hosts_percent", 100, "safety")
    gates = Gates(conf, store, nova, clock)
    started = []
    for host in HOSTS[:2]:
        item = notify(store, clock, host)
        assert gates.check(item) is None
        started.append(store.take(item, "me:1", 60))
        clock.sleep(10)
    waiting = notify(store, clock, "compute-3")
    hold = gates.check(waiting)
    assert hold is not None
    assert "2 host recoveries started in the last 60 s" in hold.message
    # It may start when the first start leaves the window.
    assert clock.now() + datetime.timedelta(seconds=hold.delay) == (
        started[0].started_at + datetime.timedelta(seconds=60))
    clock.sleep(40)
    assert gates.check(waiting) is None
