"""The engine's refresh of the failures tolerated (its metric and
events), the segments it reads, the simulation's gates and estimate,
and what 'recovery capacity' and 'recovery simulate' print."""

import datetime
import json
from types import SimpleNamespace

import pytest
import yaml
from oslo_config import cfg

from recovery import conf as recovery_conf
from recovery import exception
from recovery.cmd import capacity as cmd_capacity
from recovery.engine import capacity
from recovery.engine import simulation as game_day
from recovery.events import Decision
from recovery.events import Event
from recovery.events import EventKind
from recovery.metrics import METRICS
from recovery.models import Need
from recovery.results import Outcome
from tests import fencing_doubles as doubles
from tests.fencing_doubles import PowerDouble
from tests.fencing_doubles import StorageDouble
from tests.unit.fakes import FakeClock
from tests.unit.fakes import MemoryNova
from tests.unit.test_metrics import ETC

SLOT = Need(1, 1024, 10)
NOW = datetime.datetime(2026, 11, 22, tzinfo=datetime.timezone.utc)


class WholeCloudNova(MemoryNova):
    """MemoryNova with the capacity view's one listing of every
    instance."""

    def list_all_servers(self):
        self._record("list_all_servers", "")
        return [s.snapshot() for s in self.servers.values()]


@pytest.fixture
def conf():
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf([])
    conf.set_override("hosts", ["compute-*"], group="detector")
    return conf


@pytest.fixture
def nova():
    nova = WholeCloudNova()
    nova.room = {}
    for host, free in (("compute-1", 0), ("compute-2", 2),
                       ("other-1", 9)):
        nova.add_service(host, state="up")
        nova.room[host] = Need(free, free * 1024, free * 10)
    for n in range(2):
        nova.add_server(f"vm-{n}", host="compute-1", need=SLOT)
    return nova


def tolerated(name):
    return METRICS.registry.get_sample_value(
        "recovery_failures_tolerated", {"segment": name})


def test_without_segments_the_watched_hosts_are_one_group(conf, store,
                                                          nova):
    watch = capacity.CapacityWatch(conf, store, nova, FakeClock(), "e-1")
    [found] = watch.refresh()
    # Three Nova requests: services, Placement's room, every instance.
    assert [c[0] for c in nova.calls] == [
        "list_services", "free_room", "list_all_servers"]
    assert found.group.name == capacity.WATCHED
    assert found.group.hosts == ("compute-1", "compute-2")
    # compute-1's two fit on compute-2 (or other-1, the scheduler's
    # choice too); then compute-2 fails: other-1 takes all.
    assert found.tolerated == 2
    assert tolerated(capacity.WATCHED) == 2
    assert METRICS.registry.get_sample_value(
        "recovery_failures_to_tolerate") == 1
    assert store.events() == []


def test_an_event_when_a_segment_falls_short_and_when_it_is_back(
        conf, store, nova):
    seg = store.create_segment(name="rack-a", recovery_method="auto",
                               now=NOW)
    for host in ("compute-1", "compute-2"):
        store.create_host(seg.uuid, name=host, now=NOW)
    conf.set_override("failures_to_tolerate", 2, group="capacity")
    nova.room["other-1"] = Need(0, 0, 0)
    clock = FakeClock()
    watch = capacity.CapacityWatch(conf, store, nova, clock, "e-1")
    [found] = watch.refresh()
    assert found.tolerated == 1 and tolerated("rack-a") == 1
    [event] = store.events()
    assert (event.actor, event.subject, event.kind) == (
        "e-1", "rack-a", "capacity-short")
    assert event.message == (
        "tolerates 1 host failure(s), fewer than [capacity] "
        "failures_to_tolerate = 2: with compute-1, compute-2 failed, no "
        "room for vm-vm-0, vm-vm-1")
    watch.refresh()
    assert len(store.events()) == 1          # said once
    conf.set_override("failures_to_tolerate", 1, group="capacity")
    watch.refresh()
    assert [e.kind for e in store.events()] == [
        "capacity-short", "capacity-ok"]


def test_a_segment_gone_leaves_no_series_behind(conf, store, nova):
    """A deleted segment's figure goes with it: a short one would keep
    its alert firing for ever."""
    seg = store.create_segment(name="rack-b", recovery_method="auto",
                               now=NOW)
    for host in ("compute-1", "compute-2"):
        store.create_host(seg.uuid, name=host, now=NOW)
    conf.set_override("failures_to_tolerate", 5, group="capacity")
    watch = capacity.CapacityWatch(conf, store, nova, FakeClock(), "e-1")
    watch.refresh()
    assert tolerated("rack-b") is not None
    store.delete_segment(seg.uuid)
    watch.refresh()
    assert tolerated("rack-b") is None
    assert tolerated(capacity.WATCHED) is not None


def test_no_refresh_while_the_engine_recovers(conf, store, nova):
    """Nova's request budget goes to the recoveries in flight; the
    figure waits for the next interval."""
    clock = FakeClock()
    stopping = StopAfter(clock, seconds=3 * 300)
    busy = [1]
    watch = capacity.CapacityWatch(conf, store, nova, clock, "e-1",
                                   busy=lambda: busy[0])
    watch.run(stopping)
    assert nova.calls == []
    busy[0] = 0
    watch.run(StopAfter(clock, seconds=300))
    assert [c[0] for c in nova.calls] == [
        "list_services", "free_room", "list_all_servers"]


def test_of_several_engines_the_first_live_one_looks(conf, store, nova):
    """One look and one event per change for the cloud, however many
    engines share the database; the next engine takes over when the
    first one stops, and a figure it no longer refreshes is dropped."""
    METRICS.failures_tolerated.clear()      # earlier tests' series
    clock = FakeClock()
    first = capacity.CapacityWatch(conf, store, nova, clock, "e-1")
    second = capacity.CapacityWatch(conf, store, nova, clock, "e-2")
    for name in ("e-1", "e-2"):
        store.engine_seen(name, "node", 1)
    second.run(StopAfter(clock, seconds=300))
    assert nova.calls == [] and tolerated(capacity.WATCHED) is None
    first.run(StopAfter(clock, seconds=300))
    assert len(nova.calls) == 3
    assert tolerated(capacity.WATCHED) == 2
    store.engine_gone("e-1")
    first.forget()
    second.run(StopAfter(clock, seconds=300))
    assert len(nova.calls) == 6
    assert tolerated(capacity.WATCHED) == 2
    # The first is back: the second lets go of its figure.
    store.engine_seen("e-1", "node", 1)
    second.run(StopAfter(clock, seconds=300))
    assert len(nova.calls) == 6 and tolerated(capacity.WATCHED) is None


def test_the_engine_that_takes_over_goes_on_from_what_was_said(
        conf, store, nova):
    """A short cloud is announced once, whichever engine looks, and a
    restarted engine too; the one that took over says when it is
    back."""
    conf.set_override("failures_to_tolerate", 3, group="capacity")
    clock = FakeClock()

    def kinds():
        return [(e.actor, e.kind) for e in store.events()]

    capacity.CapacityWatch(conf, store, nova, clock, "e-1").refresh()
    assert kinds() == [("e-1", "capacity-short")]
    store.add_event(Decision("e-1", capacity.WATCHED, EventKind.HELD, "x"),
                    clock.now())
    second = capacity.CapacityWatch(conf, store, nova, clock, "e-2")
    second.refresh()
    assert kinds()[-1] == ("e-1", "held")        # still short: nothing
    conf.set_override("failures_to_tolerate", 1, group="capacity")
    second.refresh()
    assert kinds()[-1] == ("e-2", "capacity-ok")
    # A restart (a new watch) that finds it as it was last said: silent.
    capacity.CapacityWatch(conf, store, nova, clock, "e-2").refresh()
    assert len(kinds()) == 3


class StopAfter:
    """An event that is set once ``seconds`` have passed on ``clock``
    (the watch waits on it with the clock)."""

    def __init__(self, clock, seconds):
        self.clock, self.until = clock, clock.monotonic() + seconds

    def is_set(self):
        return self.clock.monotonic() > self.until


def test_reserved_hosts_come_from_one_read_of_the_segments(conf, store,
                                                           nova):
    seg = store.create_segment(name="rh", recovery_method="reserved_host",
                               now=NOW)
    store.create_host(seg.uuid, name="compute-1", now=NOW)
    store.create_host(seg.uuid, name="spare-1", reserved=True, now=NOW)
    nova.add_service("spare-1", state="up", status="disabled")
    nova.room["spare-1"] = Need(2, 2048, 20)
    view = capacity.capacity_view(conf, store, nova, FakeClock())
    [(found, plans)] = view.groups
    assert found.group.hosts == ("compute-1",)
    assert found.tolerated == 1
    assert set(plans[0].forecast.destinations.values()) == {"spare-1"}
    text = cmd_capacity.render_view(view, "table")
    assert "Segment rh: tolerates 1 host failure(s) of 1" in text
    assert "vm-vm-0 -> spare-1" in text
    body = json.loads(cmd_capacity.render_view(view, "json"))
    assert body["segments"][0]["if_failed"]["compute-1"]["instances"][0][
        "predicted_host"] == "spare-1"


def storage_fenced(monkeypatch):
    """Every host with a dead BMC, then a storage fence that covers its
    volumes and no local disk."""
    def fences(conf):
        return lambda host: doubles.fence(host, [PowerDouble(host)],
                                          [StorageDouble(host)])
    monkeypatch.setattr(capacity, "fences", fences)
    monkeypatch.setattr(game_day, "fences", fences)


def test_capacity_and_simulate_say_what_a_storage_fence_covers(
        conf, store, nova, monkeypatch):
    storage_fenced(monkeypatch)
    nova.servers["vm-1"].image_id = "image-1"
    view = capacity.capacity_view(conf, store, nova, FakeClock())
    lines = cmd_capacity._where(view.groups[0][1][0])
    assert lines == [
        "vm-vm-0 -> other-1; storage fence covers it",
        "vm-vm-1 -> other-1; NOT covered by the storage fence (its root "
        "disk (image image-1) is on compute-1's local disk)"]
    assert "NOT covered by the storage fence" in cmd_capacity.render_view(
        view, "table")
    body = json.loads(cmd_capacity.render_view(view, "json"))
    found = {i["name"]: i for i in body["segments"][0]["if_failed"][
        "compute-1"]["instances"]}
    assert found["vm-vm-0"]["storage_covered"] is True
    assert found["vm-vm-1"]["storage_covered"] is False
    assert found["vm-vm-1"]["storage_not_covered_why"].startswith(
        "its root disk")
    simulation = game_day.simulate(conf, store, nova, FakeClock(),
                                   ["compute-1"], "op@desk")
    text = cmd_capacity.render_simulation(simulation, "table")
    assert "not covered by the storage fence alone (its root disk" in text


def events(*pairs):
    """An evacuating and a recovered event per (start, seconds)."""
    found, ident = [], 0
    for n, (start, seconds) in enumerate(pairs):
        for kind, at in (("evacuating", start), ("recovered",
                                                 start + seconds)):
            ident += 1
            found.append(Event(ident, "n-1", NOW + datetime.timedelta(
                seconds=at), "e", f"vm ({n})", kind, ""))
    return found


def test_past_evacuations_are_paired_per_instance():
    assert game_day.evacuation_seconds(events((0, 10), (1, 30), (2, 20))
                                       ) == [10, 30, 20]


def test_the_estimate_recovers_hosts_in_waves_of_the_engine_s_limit(store):
    """Three hosts of 7, 4 and 1 instances, 3 threads (3, 2 and 1
    rounds), two hosts at a time: the 3-round and 2-round hosts side by
    side, then the last: 4 rounds of the median."""
    store.add_event(Decision("e", "x", EventKind.EVACUATING, ""), NOW)
    store.add_event(Decision("e", "x", EventKind.RECOVERED, ""),
                    NOW + datetime.timedelta(seconds=10))

    def plan(instances):
        return SimpleNamespace(report=SimpleNamespace(instances=[
            SimpleNamespace(outcome=Outcome.PLANNED, priority_phase=None)
        ] * instances))

    plans = [plan(1), plan(7), plan(4)]
    assert game_day.estimate_time(store, plans, 3, 2).seconds == 40
    assert game_day.estimate_time(store, plans, 3, 8).seconds == 30


def test_the_simulation_reads_only_and_records_that_it_ran(conf, store,
                                                           nova):
    nova.add_service("compute-3", state="down")
    store.add_event(Decision("e", "x", EventKind.EVACUATING, ""), NOW)
    store.add_event(Decision("e", "x", EventKind.RECOVERED, ""),
                    NOW + datetime.timedelta(seconds=12))
    store.set_arming(False, "op", "maintenance", NOW)
    conf.set_override("max_failed_hosts_percent", 40, group="safety")
    simulation = game_day.simulate(conf, store, nova, FakeClock(),
                                   ["compute-1"], "op@desk")
    assert {c[0] for c in nova.calls} <= {
        "list_services", "free_room",
        "list_all_servers", "list_aggregates"}
    gates = {g.gate: g for g in simulation.gates}
    assert gates["disarm"].holds and "maintenance" in gates["disarm"].says
    # compute-3 down and compute-1 failing: 2 of 4, over 40%.
    assert gates["brake"].holds
    assert not gates["window"].holds
    # Two instances, three threads: one round of the median 12 s.
    assert simulation.estimate.seconds == 12
    assert simulation.estimate.says == (
        "about 12 s: 1 round(s) of 3 evacuation(s) at the "
        "median 12.0 s of the 1 past evacuation(s) recorded")
    [*_, ran] = store.events()
    assert (ran.actor, ran.subject, ran.kind) == ("op@desk", "compute-1",
                                                  "simulated")
    assert ran.message.startswith("simulated the failure of compute-1: 2 "
                                  "instance(s) evacuated, 0 without room "
                                  "predicted; held by disarm, brake; ")
    text = cmd_capacity.render_simulation(simulation, "table")
    assert "Plan for host compute-1" in text
    # The scheduler's spread: the most memory free first.
    assert text.count("to other-1 (predicted)") == 2
    assert "Time to recover: about 12 s" in text


def test_the_alert_and_the_panel_read_the_figure():
    rules = yaml.safe_load(
        (ETC / "prometheus/recovery-alerts.yml").read_text())
    alerts = {r["alert"]: r["expr"] for group in rules["groups"]
              for r in group["rules"]}
    assert "recovery_failures_tolerated" in alerts["RecoveryCapacityShort"]
    assert "recovery_failures_to_tolerate" in alerts[
        "RecoveryCapacityShort"]
    panels = json.loads(
        (ETC / "grafana/recovery-dashboard.json").read_text())["panels"]
    assert any("recovery_failures_tolerated" in t["expr"]
               for p in panels for t in p.get("targets", []))


def test_a_host_nova_does_not_know_is_refused_before_anything(conf, store,
                                                              nova):
    with pytest.raises(exception.UnknownHost):
        game_day.simulate(conf, store, nova, FakeClock(), ["compute-9"],
                          "op@desk")
    assert store.events() == []
