"""Restart priority: instances of a higher priority first, each priority a
phase that starts once the one before it has finished, or after
phase_timeout."""

import logging

import pytest

from recovery import concurrency
from recovery import intake
from recovery.db.store import open_store
from recovery.engine.lease import Lease
from recovery.engine.runner import StoreRecorder
from recovery.events import EventKind
from recovery.events import News
from recovery.flows import host_failure as hf
from recovery.flows import watcher
from recovery.flows.priority import Phases
from recovery.flows.priority import priority_of
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import Phase
from recovery.results import StepName
from recovery.results import StepState
from tests.unit.fakes import FakeClock
from tests.unit.fakes import ListRecorder
from tests.unit.fakes import MemoryNova
from tests.unit.fakes import SyncPool
from tests.unit.fakes import make_env
from tests.unit.fakes import settings

HOST = "compute-1"
KEY = "HA_Priority"


def nova_with(**priorities):
    """One instance per keyword, its HA_Priority the value (None: none)."""
    nova = MemoryNova()
    nova.add_service(HOST, state="down")
    for uuid, priority in priorities.items():
        metadata = {} if priority is None else {KEY: priority}
        nova.add_server(uuid, metadata=metadata)
    return nova


def calls(nova, *methods):
    return [c[:2] for c in nova.calls if c[0] in methods]


def assert_phases_in_order(nova, phases):
    """Every instance of a phase ended (unlocked) before any evacuate of
    a later phase, per Nova's own record."""
    order = calls(nova, "evacuate", "unlock")
    for at, phase in enumerate(phases[:-1]):
        last_unlock = max(order.index(("unlock", u)) for u in phase)
        for later in phases[at + 1:]:
            first = min(order.index(("evacuate", u)) for u in later)
            assert last_unlock < first, order


# -- priority_of -------------------------------------------------------------
@pytest.mark.parametrize("value,expected", [
    ("10", (10, None)), (" -3 ", (-3, None)), ("0", (0, None))])
def test_priority_from_metadata(value, expected):
    nova = nova_with(a=value)
    assert priority_of(nova.get_server("a"), settings()) == expected


def test_missing_priority_is_the_default_without_a_note():
    nova = nova_with(a=None)
    assert priority_of(nova.get_server("a"),
                       settings(default_priority=4)) == (4, None)


@pytest.mark.parametrize("value", ["high", "1.5", ""])
def test_a_priority_that_is_not_an_integer_is_the_default(value):
    nova = nova_with(a=value)
    priority, note = priority_of(nova.get_server("a"),
                                 settings(default_priority=2))
    assert priority == 2
    assert f"{KEY}={value!r} is not an integer" in note


# -- Phases, without threads -------------------------------------------------
class NoWait(FakeClock):
    """A clock that fails a test which would wait."""

    def wait(self, event, seconds):
        if event.is_set():
            return True
        raise AssertionError(f"would wait {seconds}")


def test_a_phase_opens_when_the_one_before_has_finished():
    clock, late = NoWait(), []
    phases = Phases([2, 1, 1], clock, 600, late.append)
    phases.enter(1)
    phases.enter(1)
    phases.leave(1)
    with pytest.raises(AssertionError, match="would wait 600"):
        phases.enter(2)
    phases.leave(1)
    phases.enter(2)
    with pytest.raises(AssertionError, match="would wait 600"):
        phases.enter(3)
    phases.leave(2)
    phases.enter(3)
    assert late == [] and clock.t == 0


def test_a_late_phase_lets_the_next_start_after_the_timeout():
    clock, late = FakeClock(), []
    phases = Phases([1, 1, 1], clock, 600, late.append)
    phases.enter(1)
    clock.t = 100
    phases.enter(2)             # waits out phase 1's timeout on the clock
    assert clock.t == 600 and late == [1]
    # Phase 2's own timeout counts from when it opened.
    phases.enter(3)
    assert clock.t == 1200 and late == [1, 2]
    phases.leave(1)
    phases.leave(2)
    phases.leave(3)
    assert late == [1, 2]


def test_an_earlier_finish_opens_the_phase_before_its_timeout():
    clock, late = FakeClock(), []
    phases = Phases([1, 1], clock, 600, late.append)
    phases.enter(1)
    clock.t = 50
    phases.leave(1)
    phases.enter(2)
    assert clock.t == 50 and late == []


# -- the host recovery -------------------------------------------------------
def test_phases_run_in_priority_order_with_results_and_plan():
    nova = nova_with(low="1", none=None, high="10", mid="5", high2="10")
    report = hf.recover_host(make_env(nova), HOST, pool_factory=SyncPool)
    got = {r.uuid: (r.priority, r.priority_phase, r.outcome)
           for r in report.instances}
    assert got == {
        "high": (10, 1, Outcome.RECOVERED),
        "high2": (10, 1, Outcome.RECOVERED),
        "mid": (5, 2, Outcome.RECOVERED),
        "low": (1, 3, Outcome.RECOVERED),
        "none": (0, 4, Outcome.RECOVERED)}
    assert [r.uuid for r in report.instances] == [
        "high", "high2", "mid", "low", "none"]
    assert_phases_in_order(nova, [["high", "high2"], ["mid"], ["low"],
                                  ["none"]])
    assert report.to_dict()["instances"][0]["priority_phase"] == 1


def test_within_a_phase_ha_enabled_instances_go_first():
    nova = MemoryNova()
    nova.add_service(HOST, state="down")
    nova.add_server("plain", metadata={KEY: "5"})
    nova.add_server("ha", metadata={KEY: "5", "HA_Enabled": "True"})
    nova.add_server("top", metadata={KEY: "9"})
    report = hf.recover_host(make_env(nova), HOST, pool_factory=SyncPool)
    assert [r.uuid for r in report.instances] == ["top", "ha", "plain"]


class BlockingNova(MemoryNova):
    """Evacuates ``held`` only once ``release`` is set."""

    def __init__(self, held):
        super().__init__()
        self.held = held
        self.release = concurrency.Event()

    def evacuate(self, uuid, host=None):
        if uuid == self.held:
            assert self.release.wait(30), "never released"
        super().evacuate(uuid, host)

    def unlock(self, uuid):
        super().unlock(uuid)
        if uuid != self.held:
            self.release.set()


class EndlessWaits(FakeClock):
    """Waits end only when their event is set: no phase ever times out,
    nor an instance's wait for its evacuation. The migrations poll's own
    waits, up to the longest time between polls, pass at once, as
    FakeClock's do."""

    def wait(self, event, seconds):
        if seconds is not None and seconds <= watcher.MAX_GAP:
            return super().wait(event, seconds)
        return event.wait()


def test_on_threads_a_phase_starts_only_once_the_one_before_has_ended():
    nova = nova_with(a="3", b="3", c="2", d="2", e="1")
    clock = EndlessWaits()
    nova.clock = clock
    env = make_env(nova, clock=clock, evacuation_timeout=10 ** 6)
    report = hf.recover_host(env, HOST,
                             pool_factory=concurrency.ThreadTaskPool)
    assert {r.outcome for r in report.instances} == {Outcome.RECOVERED}
    assert_phases_in_order(nova, [["a", "b"], ["c", "d"], ["e"]])


def test_a_late_phase_lets_the_next_start_and_keeps_running(caplog):
    nova = BlockingNova(held="slow")
    nova.add_service(HOST, state="down")
    nova.add_server("slow", metadata={KEY: "9"})
    nova.add_server("next", metadata={KEY: "1"})
    clock, recorder = FakeClock(), ListRecorder()
    nova.clock = clock
    env = make_env(nova, clock=clock, recorder=recorder, phase_timeout=600,
                   evacuation_timeout=10 ** 6)
    with caplog.at_level(logging.WARNING):
        report = hf.recover_host(env, HOST,
                                 pool_factory=concurrency.ThreadTaskPool)
    # "next" went while "slow" was held, and "slow" then finished.
    order = calls(nova, "evacuate", "unlock")
    assert order.index(("unlock", "next")) < order.index(
        ("evacuate", "slow"))
    assert {r.uuid: r.outcome for r in report.instances} == {
        "slow": Outcome.RECOVERED, "next": Outcome.RECOVERED}
    assert clock.t >= 600
    [warning] = [r.getMessage() for r in caplog.records
                 if "phase_timeout" in r.getMessage()]
    assert "phase 1 (priority 9) not finished after 600 s" in warning
    assert "phase 2 (priority 1) starts" in warning
    assert [s for s in recorder.steps if s[0] == StepName.PHASE_TIMEOUT] == [
        (StepName.PHASE_TIMEOUT, "SUCCESS")]
    # An event of the host.
    assert [n for n in recorder.news if n[0] == StepName.PHASE_TIMEOUT] == [
        (StepName.PHASE_TIMEOUT, "SUCCESS", News(EventKind.PHASE_TIMEOUT))]


def test_without_phases_one_pool_in_priority_order():
    nova = nova_with(low="1", high="10", mid="5")
    seen = []

    class Recording(SyncPool):
        def run(self, fn, items):
            items = list(items)
            seen.append((fn, [i.result.uuid for i in items]))
            return super().run(fn, items)

    report = hf.recover_host(make_env(nova, priority_phases=False), HOST,
                             pool_factory=Recording)
    [(fn, order)] = seen
    assert order == ["high", "mid", "low"]
    assert fn is hf._run_unless_stopping      # no gates
    assert {r.uuid: (r.priority, r.priority_phase)
            for r in report.instances} == {
        "high": (10, None), "mid": (5, None), "low": (1, None)}


def test_bad_metadata_gets_the_default_priority_and_says_why(caplog):
    nova = nova_with(bad="urgent", good="1")
    with caplog.at_level(logging.WARNING):
        report = hf.recover_host(make_env(nova, default_priority=3), HOST,
                                 pool_factory=SyncPool)
    bad, good = report.instances
    assert (bad.uuid, bad.priority, bad.priority_phase) == ("bad", 3, 1)
    assert (good.uuid, good.priority, good.priority_phase) == ("good", 1, 2)
    assert bad.outcome is Outcome.RECOVERED
    assert "HA_Priority='urgent' is not an integer" in bad.reason
    assert len([r for r in caplog.records
                if "'urgent'" in r.getMessage()]) == 1


def test_dry_run_plans_the_phases():
    nova = nova_with(low="1", high="10", bad="x")
    report = hf.recover_host(make_env(nova), HOST, dry_run=True,
                             pool_factory=SyncPool)
    plans = {r.uuid: r.reason for r in report.instances}
    assert plans["high"].startswith("phase 1 (priority 10), evacuate")
    assert plans["low"].startswith("phase 2 (priority 1), evacuate")
    assert plans["bad"].startswith("phase 3 (priority 0), evacuate")
    assert "HA_Priority='x' is not an integer" in plans["bad"]
    assert {c[0] for c in nova.calls} <= {"list_services",
                                          "get_compute_service",
                                          "list_servers", "free_room",
                                          "aggregates_of"}


def test_a_resumed_run_keeps_phases_and_redoes_no_finished_phase():
    nova = nova_with(b="5", c="1")
    nova.add_server("a", host="compute-2", metadata={KEY: "10"})
    journal = [
        InstanceResult(uuid="a", name="vm-a", source_host=HOST,
                       original_state="active", dest_host="compute-2",
                       final_state="active", outcome=Outcome.RECOVERED,
                       phase=Phase.DONE, priority=10, priority_phase=1),
        # Its metadata changed since: the journal's priority holds.
        InstanceResult(uuid="c", name="vm-c", source_host=HOST,
                       original_state="active", priority=7,
                       priority_phase=2)]
    report = hf.recover_host(make_env(nova), HOST, pool_factory=SyncPool,
                             journal=journal)
    got = {r.uuid: (r.priority, r.priority_phase, r.outcome)
           for r in report.instances}
    assert got == {"a": (10, 1, Outcome.RECOVERED),
                   "c": (7, 2, Outcome.RECOVERED),
                   "b": (5, 3, Outcome.RECOVERED)}
    assert ("evacuate", "a") not in calls(nova, "evacuate")
    assert_phases_in_order(nova, [["c"], ["b"]])


def test_a_step_s_news_is_an_event_of_the_host(tmp_path):
    clock = FakeClock()
    store = open_store(f"sqlite:///{tmp_path}/s.sqlite")
    store.lease_clock = lambda conn: clock.now()
    try:
        item = intake.accept(store, type="COMPUTE_HOST", hostname=HOST,
                             generated_time=clock.now(),
                             payload={"event": "STOPPED",
                                      "host_status": "NORMAL"},
                             origin="api", now=clock.now())
        taken = store.take(item, "engine-a:1", 60)
        lease = Lease(taken, "engine-a:1", 60, clock, clock.monotonic())
        recorder = StoreRecorder(store, lease, clock, notification=taken)
        recorder.step_changed(StepName.PHASE_TIMEOUT, StepState.SUCCESS,
                              "phase 1 (priority 9) not finished",
                              news=News(EventKind.PHASE_TIMEOUT))
        [event] = [e for e in store.events(taken.uuid)
                   if e.kind == "phase-timeout"]
        assert (event.subject, event.message) == (
            HOST, "phase 1 (priority 9) not finished")
    finally:
        store.close()
