"""One poll serves every instance in flight, on every host, made when
their evacuations are expected to have ended."""

import datetime

import pytest

from recovery import exception
from recovery.flows.watcher import CLOCK_SKEW_MARGIN
from recovery.flows.watcher import MAX_GAP
from recovery.flows.watcher import STAMP_MARGIN
from recovery.flows.watcher import EvacuationWatcher
from recovery.models import Migration
from recovery.models import parse_time
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
    """Nothing has ended yet: the interval is the duration expected, and
    the first poll waits for it (an evacuation just sent has not
    ended)."""
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
    assert started == [1.0, 2.0]


def test_the_shortest_interval_of_the_runs_is_the_cadence():
    nova, clock = MemoryNova(), FakeClock()
    nova.add_server("a")
    watcher = EvacuationWatcher(clock)
    with watcher.follow(nova, 1.0), \
            watcher.follow(nova, 0.25) as fast:
        nova.evacuate("a")
        fast.ended("a", 0, timeout=60, what="a")
    # Two polls (MemoryNova), 0.25 s apart.
    assert clock.t == 0.5


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


class TimedNova:
    """Evacuations that take the seconds a test gives each, by the fake
    clock, stamped as Nova stamps them."""

    def __init__(self, clock: FakeClock):
        self.clock = clock
        self.evacuations: dict[str, tuple[int, float, float]] = {}
        self.polled: list[float] = []
        # Each poll's changes-since, and the instances it listed.
        self.since: list[datetime.datetime] = []
        self.listed: list[list[str]] = []

    def check(self) -> None:
        pass

    def evacuate(self, uuid: str, seconds: float) -> None:
        self.evacuations[uuid] = (len(self.evacuations) + 1, self.clock.t,
                                  seconds)

    def list_evacuations(self, changes_since=None):
        self.polled.append(self.clock.t)
        since = parse_time(changes_since)
        self.since.append(since)
        found = []
        for uuid, (ident, sent, seconds) in self.evacuations.items():
            done = self.clock.t >= sent + seconds
            updated = _stamp(sent + seconds if done else sent)
            if updated < since:
                continue
            found.append(Migration(
                id=ident, uuid=f"mig-{ident}", instance_uuid=uuid,
                status="done" if done else "running",
                source_compute="compute-1", dest_compute="compute-2",
                created_at=_stamp(sent), updated_at=updated))
        self.listed.append([m.instance_uuid for m in found])
        return found


def _stamp(t: float) -> datetime.datetime:
    return (datetime.datetime(2026, 11, 22, tzinfo=datetime.timezone.utc)
            + datetime.timedelta(seconds=t))


def test_the_poll_waits_for_the_duration_learned_from_nova():
    """The first evacuation is polled every interval until it ends, 2 s
    by Nova's stamps; the next one is polled once, 2 s after it began
    waiting."""
    clock = FakeClock()
    nova = TimedNova(clock)
    watcher = EvacuationWatcher(clock)
    with watcher.follow(nova, 0.5) as watch:
        nova.evacuate("a", 2.0)
        watch.ended("a", 0, timeout=60, what="a")
        assert nova.polled == [0.5, 1.0, 1.5, 2.0]
        nova.evacuate("b", 2.0)
        watch.ended("b", 0, timeout=60, what="b")
    assert nova.polled[4:] == [4.0]


def test_one_poll_at_the_expected_end_confirms_every_evacuation_due():
    clock = FakeClock()
    nova = TimedNova(clock)
    watcher = EvacuationWatcher(clock)
    with watcher.follow(nova, 0.5) as watch:
        nova.evacuate("a", 1.0)
        watch.ended("a", 0, timeout=60, what="a")
        polls = len(nova.polled)
        for uuid in ("b", "c", "d"):
            nova.evacuate(uuid, 1.0)
        for uuid in ("b", "c", "d"):
            assert watch.ended(uuid, 0, timeout=60,
                               what=uuid).status == "done"
    assert nova.polled[polls:] == [2.0]


def test_an_evacuation_longer_than_expected_is_looked_at_each_duration():
    """Learned: 1 s. One that takes 3.2 s is polled at its expected end
    and then once a second (the duration: it alone waits), not every
    interval."""
    clock = FakeClock()
    nova = TimedNova(clock)
    watcher = EvacuationWatcher(clock)
    with watcher.follow(nova, 0.25) as watch:
        nova.evacuate("a", 1.0)
        watch.ended("a", 0, timeout=60, what="a")
        polls = len(nova.polled)
        nova.evacuate("b", 3.2)
        watch.ended("b", 0, timeout=60, what="b")
    assert nova.polled[polls:] == [2.0, 3.0, 4.0, 5.0]


def test_a_long_learned_duration_still_polls_every_max_gap():
    """Learned: 20 s. The next evacuation ends after 2 s, and is seen at
    the next poll, MAX_GAP after it began waiting, not 20 s later."""
    clock = FakeClock()
    nova = TimedNova(clock)
    watcher = EvacuationWatcher(clock)
    with watcher.follow(nova, 0.5) as watch:
        nova.evacuate("a", 20.0)
        watch.ended("a", 0, timeout=60, what="a")
        polls = len(nova.polled)
        began = clock.t
        nova.evacuate("b", 2.0)
        watch.ended("b", 0, timeout=60, what="b")
    assert nova.polled[polls:] == [began + MAX_GAP]


def test_the_learned_duration_is_forgotten_once_no_run_follows():
    clock = FakeClock()
    nova = TimedNova(clock)
    watcher = EvacuationWatcher(clock)
    with watcher.follow(nova, 0.5) as watch:
        nova.evacuate("a", 3.0)
        watch.ended("a", 0, timeout=60, what="a")
    with watcher.follow(nova, 0.5) as watch:
        nova.evacuate("b", 3.0)
        polls = len(nova.polled)
        watch.ended("b", 0, timeout=60, what="b")
    # Polled every interval again, as at first.
    assert nova.polled[polls:] == [3.5, 4.0, 4.5, 5.0, 5.5, 6.0]


def test_later_polls_ask_only_for_what_changed_lately():
    """The run's first poll looks back CLOCK_SKEW_MARGIN from its start;
    the next ones STAMP_MARGIN from the newest change seen, so an
    evacuation that ended long ago is no longer listed. A run that
    begins later still finds it, from a baseline poll of its own."""
    clock = FakeClock()
    nova = TimedNova(clock)
    watcher = EvacuationWatcher(clock)
    with watcher.follow(nova, 0.5) as watch:
        nova.evacuate("x", 1.0)
        watch.ended("x", 0, timeout=60, what="x")
        assert nova.since[:2] == [_stamp(0) - CLOCK_SKEW_MARGIN,
                                  _stamp(0) - STAMP_MARGIN]
        clock.sleep(120)
        nova.evacuate("y", 1.0)
        watch.ended("y", 0, timeout=60, what="y")
        assert nova.listed[-1] == ["x", "y"]
        ended_y = clock.t
        nova.evacuate("z", 1.0)
        assert watch.ended("z", 0, timeout=60, what="z").status == "done"
        # Once a poll saw y end, x (last changed at 1 s) is no longer
        # asked for.
        assert nova.since[-1] == _stamp(ended_y) - STAMP_MARGIN
        assert nova.listed[-1] == ["y", "z"]
        with watcher.follow(nova, 0.5) as later:
            assert later.baseline("x") == 1
            assert nova.since[-1] == _stamp(clock.t) - CLOCK_SKEW_MARGIN


def test_a_controller_clock_ahead_does_not_move_the_polls_past_now():
    """A migration stamped 600 s ahead of this engine's clock (by a
    conductor whose clock runs fast): the next poll still looks back
    STAMP_MARGIN from now, and sees y end; from that stamp it would not."""
    clock = FakeClock()
    nova = TimedNova(clock)
    nova.evacuations["ahead"] = (1, 600.0, 0.0)
    watcher = EvacuationWatcher(clock)
    with watcher.follow(nova, 1.0) as watch:
        nova.evacuate("y", 2.0)
        assert watch.ended("y", 0, timeout=60, what="y").status == "done"
    assert nova.since == [_stamp(0) - CLOCK_SKEW_MARGIN,
                          _stamp(2.0) - STAMP_MARGIN]
