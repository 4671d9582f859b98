"""One poll per interval serves every instance in flight, on every host."""

import pytest

from recovery import exception
from recovery.flows.watcher import EvacuationWatcher
from tests.unit.fakes import FakeClock
from tests.unit.fakes import MemoryNova


def polls(nova: MemoryNova) -> int:
    return nova.names().count("list_evacuations")


def test_one_poll_per_interval_for_every_instance_of_every_host():
    """A rack: three hosts, 50 instances each, followed by three runs.
    Every migration needs two polls to end (MemoryNova): three polls in
    all with the baseline, one interval apart, whatever the instances and
    hosts."""
    nova, clock = MemoryNova(), FakeClock()
    hosts = ["compute-1", "compute-3", "compute-4"]
    uuids = {host: [f"{host}-{n}" for n in range(50)] for host in hosts}
    watcher = EvacuationWatcher(clock)
    with watcher.follow(nova, 1.0) as w1, \
            watcher.follow(nova, 1.0) as w2, \
            watcher.follow(nova, 1.0) as w3:
        for host, watch in zip(hosts, (w1, w2, w3), strict=True):
            for uuid in uuids[host]:
                nova.add_server(uuid, host=host)
                assert watch.baseline(uuid) == 0
                nova.evacuate(uuid)
        baseline_polls = polls(nova)
        for host, watch in zip(hosts, (w1, w2, w3), strict=True):
            for uuid in uuids[host]:
                migration = watch.ended(uuid, 0, timeout=60, what=uuid)
                assert migration.status == "done"
    assert baseline_polls == 1
    assert polls(nova) == 3
    # Nova was asked for every evacuation, not one host's.
    assert all(c[1] == "" for c in nova.calls if c[0] == "list_evacuations")
    assert clock.t == 2.0


def test_polls_start_one_interval_apart_whatever_a_poll_costs():
    nova, clock = MemoryNova(), FakeClock()
    nova.add_server("a")
    nova.outcomes["a"] = "hang"
    started = []
    list_evacuations = nova.list_evacuations

    def slow_poll(source_host=None, changes_since=None):
        started.append(clock.t)
        clock.sleep(0.3)    # what the request costs
        return list_evacuations(source_host, changes_since)

    nova.list_evacuations = slow_poll
    watcher = EvacuationWatcher(clock)
    with watcher.follow(nova, 1.0) as watch:
        nova.evacuate("a")
        with pytest.raises(exception.WaitTimeout,
                           match="gave up after 2.5s waiting for a to move"):
            watch.ended("a", 0, timeout=2.5, what="a to move")
    assert started == [0.0, 1.0, 2.0]


def test_the_shortest_interval_of_the_runs_is_the_cadence():
    nova, clock = MemoryNova(), FakeClock()
    nova.add_server("a")
    watcher = EvacuationWatcher(clock)
    with watcher.follow(nova, 1.0), \
            watcher.follow(nova, 0.25) as fast:
        nova.evacuate("a")
        fast.ended("a", 0, timeout=60, what="a")
    assert clock.t == 0.25


def test_newest_migration_of_an_instance_wins():
    nova, clock = MemoryNova(), FakeClock()
    nova.add_server("a")
    nova.outcomes["a"] = "error"
    nova.evacuate("a")
    watcher = EvacuationWatcher(clock)
    with watcher.follow(nova, 1.0) as watch:
        first = watch.ended("a", 0, timeout=60, what="a")
        assert first.status == "error"
        nova.outcomes.pop("a")
        nova.servers["a"].task_state = None
        nova.evacuate("a")
        second = watch.ended("a", first.id, timeout=60, what="a")
        assert second.id > first.id and second.status == "done"


def test_baseline_is_what_existed_before_the_run_began_following():
    nova = MemoryNova()
    nova.add_server("a")
    nova.add_server("b")
    nova.outcomes["a"] = "error"
    nova.evacuate("a")
    old = nova.migrations[-1]["id"]
    watcher = EvacuationWatcher(FakeClock())
    with watcher.follow(nova, 1.0) as watch:
        assert watch.baseline("a") == old
        assert watch.baseline("b") == 0
        nova.evacuate("b")
        # Polled once, when the run began: b's migration is this run's.
        assert watch.baseline("b") == 0
        assert polls(nova) == 1
        # A run that begins later gets its own baseline poll.
        with watcher.follow(nova, 1.0) as later:
            assert later.baseline("b") == nova.migrations[-1]["id"]
        assert polls(nova) == 2


def test_a_run_that_may_no_longer_act_stops_waiting():
    nova, clock = MemoryNova(), FakeClock()
    nova.add_server("a")
    nova.outcomes["a"] = "hang"

    def lost() -> None:
        if clock.t >= 2:
            raise exception.LeaseLost("another engine owns it")

    nova.check = lost
    watcher = EvacuationWatcher(clock)
    with watcher.follow(nova, 1.0) as watch:
        nova.evacuate("a")
        with pytest.raises(exception.LeaseLost):
            watch.ended("a", 0, timeout=600, what="a")
    assert clock.t == 2


def test_nothing_is_polled_or_kept_once_no_run_follows():
    nova, clock = MemoryNova(), FakeClock()
    nova.add_server("a")
    watcher = EvacuationWatcher(clock)
    with watcher.follow(nova, 1.0) as watch:
        nova.evacuate("a")
        watch.ended("a", 0, timeout=60, what="a")
    clock.sleep(10)
    with watcher.follow(nova, 1.0) as watch:
        # A new run: its baseline poll sees the old migration as old.
        assert watch.baseline("a") == nova.migrations[-1]["id"]
    assert polls(nova) == 3
