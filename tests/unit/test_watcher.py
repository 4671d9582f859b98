"""One poll per interval serves every instance in flight."""

from recovery.flows.watcher import EvacuationWatcher
from tests.unit.fakes import FakeClock
from tests.unit.fakes import MemoryNova


def test_poll_count_per_interval_does_not_grow_with_instances():
    nova = MemoryNova()
    uuids = [f"i{n}" for n in range(50)]
    for uuid in uuids:
        nova.add_server(uuid, host="compute-1")
        nova.evacuate(uuid)
    clock = FakeClock()
    watcher = EvacuationWatcher(nova, "compute-1", clock, interval=1.0)
    for _ in range(3):           # three intervals, 50 askers each
        for uuid in uuids:
            assert watcher.latest(uuid, 0) is not None
        clock.sleep(1.0)
    assert nova.names().count("list_evacuations") == 3


def test_newest_migration_of_an_instance_wins():
    nova = MemoryNova()
    nova.add_server("a", host="compute-1")
    nova.outcomes["a"] = "error"
    nova.evacuate("a")
    clock = FakeClock()
    watcher = EvacuationWatcher(nova, "compute-1", clock, interval=1.0)
    for _ in range(3):
        first = watcher.latest("a", 0, fresh=True)
    assert first.status == "error"
    nova.outcomes.pop("a")
    nova.servers["a"].task_state = None
    nova.servers["a"].host = "compute-1"
    nova.evacuate("a")
    assert watcher.latest("a", 0, fresh=True).id > first.id


def test_baseline_is_what_existed_before_the_first_poll():
    nova = MemoryNova()
    nova.add_server("a", host="compute-1")
    nova.add_server("b", host="compute-1")
    nova.outcomes["a"] = "error"
    nova.evacuate("a")
    old = nova.migrations[-1]["id"]
    watcher = EvacuationWatcher(nova, "compute-1", FakeClock(), interval=1.0)
    assert watcher.baseline("a") == old
    assert watcher.baseline("b") == 0
    # Only migrations above the floor count: the old failure is not ours.
    assert watcher.latest("a", old) is None
    nova.evacuate("b")
    assert watcher.baseline("b") == 0
    assert watcher.latest("b", 0, fresh=True) is not None
