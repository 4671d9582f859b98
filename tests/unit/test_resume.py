"""A run that continues an earlier one from its journal: finished work is
kept, work in flight is reconciled with Nova, nothing is evacuated twice."""

import dataclasses

import pytest

from recovery import exception
from recovery.flows import host_failure as hf
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import Phase
from tests.unit.fakes import MemoryNova
from tests.unit.fakes import SyncPool
from tests.unit.fakes import make_env

HOST = "compute-1"
LOCK = "recovery lock"


def nova_with(*uuids):
    nova = MemoryNova()
    nova.add_service(HOST, state="down", forced_down=True,
                     status="disabled")
    for uuid in uuids:
        nova.add_server(uuid, host=HOST)
    return nova


def entry(uuid, phase, outcome=None, floor=None, original="active"):
    return InstanceResult(uuid=uuid, name=f"vm-{uuid}", source_host=HOST,
                          original_state=original, phase=phase,
                          outcome=outcome, migration_floor=floor,
                          locked_by_us=phase not in (Phase.PENDING,
                                                     Phase.DONE))


def recover(nova, journal, **env):
    return hf.recover_host(make_env(nova, **env), HOST,
                           pool_factory=SyncPool, journal=journal)


def evacuations(nova, uuid):
    return [c for c in nova.calls if c[:2] == ("evacuate", uuid)]


def test_evacuation_sent_before_the_crash_is_confirmed_not_resent():
    nova = nova_with("a")
    nova.lock("a", LOCK)
    nova.evacuate("a")               # the crashed run's evacuate
    nova.calls.clear()
    report = recover(nova, [entry("a", Phase.EVACUATING, floor=0)])
    assert evacuations(nova, "a") == []
    [result] = report.instances
    assert result.outcome is Outcome.RECOVERED
    assert result.dest_host == "compute-2"
    assert not nova.servers["a"].locked


def test_instance_that_already_moved_is_confirmed_and_unlocked():
    nova = nova_with("a")
    nova.lock("a", LOCK)
    nova.evacuate("a")
    for _ in range(3):               # Nova finishes while we are down
        nova.list_evacuations(HOST, "")
    assert nova.servers["a"].host == "compute-2"
    nova.calls.clear()
    report = recover(nova, [entry("a", Phase.CONFIRMING, floor=0)])
    assert evacuations(nova, "a") == []
    assert report.instances[0].outcome is Outcome.RECOVERED
    assert not nova.servers["a"].locked


def test_recovered_instance_killed_before_its_unlock_is_unlocked():
    """The crashed run had recorded the outcome and was unlocking: the
    instance is not finished while our lock holds it."""
    nova = nova_with("a")
    nova.lock("a", LOCK)
    nova.evacuate("a")
    for _ in range(3):
        nova.list_evacuations(HOST, "")
    nova.calls.clear()
    report = recover(nova, [entry("a", Phase.UNLOCKING,
                                  outcome=Outcome.RECOVERED, floor=0)])
    assert evacuations(nova, "a") == []
    assert not nova.servers["a"].locked
    [result] = report.instances
    assert result.outcome is Outcome.RECOVERED
    assert (result.phase, result.locked_by_us) == (Phase.DONE, False)


def test_evacuate_journaled_but_never_sent_is_sent_once():
    nova = nova_with("a")
    nova.lock("a", LOCK)
    report = recover(nova, [entry("a", Phase.EVACUATING, floor=0)])
    assert len(evacuations(nova, "a")) == 1
    assert report.instances[0].outcome is Outcome.RECOVERED


def test_a_stuck_task_is_not_mistaken_for_an_evacuation():
    """Journaled as evacuating, never sent; the instance has a task stuck
    on the dead host. Only a rebuild task_state means Nova acted."""
    nova = nova_with()
    nova.add_server("a", host=HOST, task_state="rebooting")
    nova.lock("a", LOCK)
    report = recover(nova, [entry("a", Phase.EVACUATING, floor=0)])
    assert len(evacuations(nova, "a")) == 1
    assert report.instances[0].outcome is Outcome.RECOVERED


def test_finished_instances_are_kept_and_not_touched():
    nova = nova_with("b")
    done = entry("a", Phase.DONE, outcome=Outcome.RECOVERED)
    skipped = entry("b", Phase.DONE, outcome=Outcome.SKIPPED)
    report = recover(nova, [done, skipped])
    assert {r.uuid: r.outcome for r in report.instances} == {
        "a": Outcome.RECOVERED, "b": Outcome.SKIPPED}
    assert [c for c in nova.calls if c[1] in ("a", "b")
            and c[0] != "list_servers"] == []


def test_retry_after_a_failed_evacuation_evacuates_again():
    nova = nova_with("a")
    nova.outcomes["a"] = "error"
    first = recover(nova, [])
    [failed] = first.instances
    assert failed.outcome is Outcome.FAILED
    nova.outcomes.pop("a")
    second = recover(nova, [failed])
    [result] = second.instances
    assert result.outcome is Outcome.RECOVERED, result.reason
    assert len(evacuations(nova, "a")) == 2
    # One result per instance: the old failure is not counted again.
    assert second.counts()["failed"] == 0


def test_original_state_comes_from_the_journal():
    """An evacuated error instance comes back active; the crashed run
    died before resetting it to error. The journal still says error."""
    nova = nova_with()
    nova.add_server("a", host=HOST, vm_state="error")
    nova.lock("a", LOCK)
    nova.evacuate("a")
    for _ in range(3):
        nova.list_evacuations(HOST, "")
    assert nova.servers["a"].vm_state == "active"
    report = recover(nova, [entry("a", Phase.CONFIRMING, floor=0,
                                  original="error")])
    assert report.instances[0].final_state == "error"
    assert nova.servers["a"].vm_state == "error"


def test_deleted_instance_is_skipped():
    nova = nova_with()
    nova.servers = {}

    def missing(uuid):
        raise exception.NovaNotFound(f"no server {uuid}", status=404)

    nova.get_server = missing
    report = recover(nova, [entry("gone", Phase.CONFIRMING, floor=0)])
    [result] = report.instances
    assert result.outcome is Outcome.SKIPPED
    assert "deleted" in result.reason


def test_stopping_starts_no_instance_and_interrupts():
    nova = nova_with("a", "b")
    env = make_env(nova)
    env = dataclasses.replace(env, stopping=lambda: True)
    with pytest.raises(exception.Interrupted):
        hf.recover_host(env, HOST, pool_factory=SyncPool)
    assert evacuations(nova, "a") == evacuations(nova, "b") == []
