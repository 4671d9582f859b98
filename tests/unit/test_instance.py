"""The per-instance state machine over the table of instance states."""

import pytest

from recovery import exception
from recovery.flows.instance import InstanceRecovery
from recovery.flows.placement import auto
from recovery.results import InstanceResult
from recovery.results import Outcome
from tests.unit.fakes import FakeClock
from tests.unit.fakes import ListRecorder
from tests.unit.fakes import MemoryNova
from tests.unit.fakes import make_env

SOURCE = "compute-1"


def recover(nova: MemoryNova, uuid: str, **overrides):
    clock = FakeClock()
    recorder = ListRecorder()
    env = make_env(nova, clock, recorder, **overrides)
    server = nova.servers[uuid].snapshot()
    result = InstanceResult(uuid=uuid, name=server.name, source_host=SOURCE,
                            original_state=server.vm_state)
    run(env, server, result)
    return result, recorder, clock


def run(env, server, result):
    with env.watcher.follow(env.nova, env.settings.poll_interval) as watch:
        return InstanceRecovery(env, watch, server, result, auto()).run()


def actions(nova: MemoryNova, uuid: str) -> list[str]:
    mutating = {"lock", "unlock", "reset_state", "evacuate", "stop",
                "start", "pause", "suspend", "confirm_resize"}
    return [c[0] if c[0] != "reset_state" else f"reset_state:{c[2]}"
            for c in nova.calls if c[0] in mutating and c[1] == uuid]


@pytest.mark.parametrize("vm_state,task_state,expected_actions,final", [
    ("active", None, ["lock", "evacuate", "unlock"], "active"),
    ("stopped", None, ["lock", "evacuate", "unlock"], "stopped"),
    ("error", None,
     ["lock", "evacuate", "reset_state:error", "unlock"], "error"),
    # A task stuck on the dead host: Nova evacuates over it.
    ("active", "rebooting", ["lock", "evacuate", "unlock"], "active"),
    ("stopped", "powering-on", ["lock", "evacuate", "unlock"], "stopped"),
    ("error", "deleting",
     ["lock", "evacuate", "reset_state:error", "unlock"], "error"),
    # Nova evacuates them only once reset to active (see selection).
    ("paused", None, ["lock", "reset_state:active", "evacuate", "pause",
                      "unlock"], "paused"),
    ("suspended", None, ["lock", "reset_state:active", "evacuate",
                         "suspend", "unlock"], "suspended"),
    ("rescued", None, ["lock", "reset_state:active", "evacuate", "unlock"],
     "active"),
    ("paused", "unpausing", ["lock", "reset_state:active", "evacuate",
                             "pause", "unlock"], "paused"),
    # VERIFY_RESIZE on the failed host: confirmed by the source host.
    ("resized", None, ["lock", "confirm_resize", "evacuate", "unlock"],
     "active"),
])
def test_state_table(vm_state, task_state, expected_actions, final):
    nova = MemoryNova()
    nova.add_server("a", vm_state=vm_state, task_state=task_state)
    result, _, _ = recover(nova, "a")
    assert result.outcome is Outcome.RECOVERED, result.reason
    assert actions(nova, "a") == expected_actions
    assert result.final_state == final
    assert nova.servers["a"].vm_state == final
    assert result.dest_host == "compute-2"
    assert not nova.servers["a"].locked


def test_active_instance_started_again_under_2_95_semantics():
    nova = MemoryNova(active_ends_stopped=True)
    nova.add_server("a")
    result, _, _ = recover(nova, "a")
    assert actions(nova, "a") == ["lock", "evacuate", "start", "unlock"]
    assert nova.servers["a"].vm_state == "active"
    assert result.final_state == "active"


def test_lock_held_by_someone_else_is_left_alone():
    nova = MemoryNova()
    nova.add_server("a", locked=True, locked_reason="owner's maintenance")
    result, _, _ = recover(nova, "a")
    assert result.outcome is Outcome.RECOVERED
    assert actions(nova, "a") == ["evacuate"]
    assert nova.servers["a"].locked
    assert nova.servers["a"].locked_reason == "owner's maintenance"


def test_lock_left_by_a_crashed_run_is_released():
    nova = MemoryNova()
    nova.add_server("a", locked=True, locked_reason="recovery lock")
    result, _, _ = recover(nova, "a")
    assert actions(nova, "a") == ["evacuate", "unlock"]
    assert not nova.servers["a"].locked


def test_evacuation_ending_in_error_fails_fast_and_unlocks():
    nova = MemoryNova()
    nova.add_server("a")
    nova.outcomes["a"] = "error"
    result, _, clock = recover(nova, "a")
    assert result.outcome is Outcome.FAILED
    assert "evacuation error" in result.reason
    assert not nova.servers["a"].locked
    assert clock.t < 30   # did not wait for the timeout


def test_evacuation_that_never_finishes_times_out_and_unlocks():
    nova = MemoryNova()
    nova.add_server("a")
    nova.outcomes["a"] = "hang"
    result, _, clock = recover(nova, "a", evacuation_timeout=20.0)
    assert result.outcome is Outcome.FAILED
    assert "gave up after 20s" in result.reason
    assert clock.t == pytest.approx(20.0)
    assert not nova.servers["a"].locked


def test_evacuate_refused_is_not_retried():
    nova = MemoryNova()
    nova.add_server("a")
    nova.fail("evacuate", "a", exception.NovaConflict("no", status=400))
    result, _, _ = recover(nova, "a")
    assert result.outcome is Outcome.FAILED
    assert actions(nova, "a") == ["lock", "evacuate", "unlock"]


def test_evacuate_with_lost_answer_is_not_repeated():
    nova = MemoryNova()
    nova.add_server("a")
    nova.acted_then_failed.add("a")
    result, _, _ = recover(nova, "a")
    assert result.outcome is Outcome.RECOVERED, result.reason
    assert actions(nova, "a").count("evacuate") == 1


def test_evacuate_that_failed_before_nova_acted_is_retried():
    nova = MemoryNova()
    nova.add_server("a")
    nova.fail("evacuate", "a", exception.NovaUnreachable("timed out"))
    result, _, _ = recover(nova, "a")
    assert result.outcome is Outcome.RECOVERED, result.reason
    assert actions(nova, "a") == ["lock", "evacuate", "evacuate", "unlock"]


def test_unexpected_exception_becomes_a_failed_result_and_unlocks():
    nova = MemoryNova()
    nova.add_server("a")
    nova.fail("evacuate", "a", RuntimeError("boom"))
    result, _, _ = recover(nova, "a")
    assert result.outcome is Outcome.FAILED
    assert "boom" in result.reason
    assert not nova.servers["a"].locked


def test_an_unlock_failure_keeps_the_lock_ours_for_the_runs_sweep():
    nova = MemoryNova()
    nova.add_server("a")
    nova.fail("unlock", "a", exception.NovaUnreachable("down"))
    result, _, _ = recover(nova, "a")
    assert result.outcome is Outcome.RECOVERED
    assert result.locked_by_us


def test_each_phase_is_recorded_before_its_side_effect():
    nova = MemoryNova()
    nova.add_server("a", task_state="rebooting")
    _, recorder, _ = recover(nova, "a")
    phases = [phase for _, phase, _ in recorder.events]
    assert phases == ["locking", "evacuating", "confirming",
                      "restoring", "unlocking", "done"]
    assert recorder.events[-1][2] == "recovered"


class JournalFailsOnce(ListRecorder):
    """A journal whose write of ``phase`` fails once, as a store that is
    briefly unreachable does."""

    def __init__(self, phase: str) -> None:
        super().__init__()
        self.phase = phase

    def instance_changed(self, result: InstanceResult) -> None:
        if result.phase.value == self.phase:
            self.phase = None
            raise exception.StoreUnavailable("database is locked")
        super().instance_changed(result)


def test_a_journal_failure_stops_the_instance_without_an_outcome():
    nova = MemoryNova()
    nova.add_server("a")
    recorder = JournalFailsOnce("evacuating")
    env = make_env(nova, FakeClock(), recorder)
    server = nova.servers["a"].snapshot()
    result = InstanceResult(uuid="a", name=server.name, source_host=SOURCE,
                            original_state=server.vm_state)
    with pytest.raises(exception.StoreUnavailable):
        run(env, server, result)
    # No outcome written, nothing more asked of Nova: the lock (journaled
    # as ours) stays for the resumed run, which finishes the instance.
    assert result.outcome is None
    assert all(outcome is None for _, _, outcome in recorder.events)
    assert actions(nova, "a") == ["lock"]
    assert result.locked_by_us

    run(env, nova.servers["a"].snapshot(), result)
    assert result.outcome is Outcome.RECOVERED
    assert actions(nova, "a") == ["lock", "evacuate", "unlock"]
    assert not nova.servers["a"].locked


def test_a_lost_lease_on_unlock_is_not_the_instance_failing():
    nova = MemoryNova()
    nova.add_server("a")
    nova.fail("unlock", "a", exception.LeaseLost("another engine owns it"))
    with pytest.raises(exception.LeaseLost):
        recover(nova, "a")
    assert nova.servers["a"].locked


def test_paused_instance_started_then_paused_under_2_95_semantics():
    nova = MemoryNova(active_ends_stopped=True)
    nova.add_server("a", vm_state="paused")
    result, _, _ = recover(nova, "a")
    assert result.outcome is Outcome.RECOVERED, result.reason
    assert actions(nova, "a") == ["lock", "reset_state:active", "evacuate",
                                  "start", "pause", "unlock"]
    assert nova.servers["a"].vm_state == "paused"


def test_the_reset_is_journaled_before_it_is_sent():
    nova = MemoryNova()
    nova.add_server("a", vm_state="suspended")
    recorder = ListRecorder()
    seen = []
    reset_state = nova.reset_state

    def recording_reset(uuid, state):
        seen.append(recorder.events[-1][1])
        reset_state(uuid, state)

    nova.reset_state = recording_reset
    env = make_env(nova, FakeClock(), recorder)
    server = nova.servers["a"].snapshot()
    result = InstanceResult(uuid="a", name="a", source_host=SOURCE,
                            original_state="suspended")
    run(env, server, result)
    assert result.outcome is Outcome.RECOVERED, result.reason
    # Sent once, in the evacuating phase: journaled (with the migration
    # floor) before it.
    assert seen == ["evacuating"]
    assert result.migration_floor is not None


def resume_active(original_state):
    """Resume an instance whose journal says ``original_state`` and whose
    evacuation was announced, while Nova already shows it active (the
    reset or confirm went through before the crash)."""
    nova = MemoryNova()
    nova.add_server("a", vm_state="active")
    clock = FakeClock()
    env = make_env(nova, clock, ListRecorder())
    server = nova.servers["a"].snapshot()
    result = InstanceResult(uuid="a", name=server.name, source_host=SOURCE,
                            original_state=original_state,
                            migration_floor=0)
    run(env, server, result)
    return nova, result


def test_a_resumed_run_does_not_reset_again():
    """Crashed between the reset and the evacuate: the journal keeps the
    original state (paused), Nova shows active: evacuate, pause again."""
    nova, result = resume_active("paused")
    assert result.outcome is Outcome.RECOVERED, result.reason
    assert actions(nova, "a") == ["lock", "evacuate", "pause", "unlock"]
    assert (result.original_state, result.final_state) == ("paused",
                                                           "paused")


def test_a_resumed_run_does_not_confirm_again():
    """Crashed between the confirm and the evacuate: Nova shows it
    active; it is evacuated, never confirmed twice."""
    nova, result = resume_active("resized")
    assert result.outcome is Outcome.RECOVERED, result.reason
    assert actions(nova, "a") == ["lock", "evacuate", "unlock"]
    assert result.final_state == "active"
