"""The host-level steps and the orchestration of a host recovery."""

import dataclasses
import datetime

import pytest

from recovery import exception
from recovery.flows import base
from recovery.flows import host_failure as hf
from recovery.flows import isolation
from recovery.flows.host_context import HostContext
from recovery.probe import Probe
from recovery.results import HostReport
from recovery.results import Outcome
from tests.unit.fakes import FakeClock
from tests.unit.fakes import FakeFencer
from tests.unit.fakes import MemoryNova
from tests.unit.fakes import SyncPool
from tests.unit.fakes import make_env

HOST = "compute-1"


def nova_with(state="down", forced_down=False, status="enabled",
              heartbeat_age=None):
    nova = MemoryNova()
    nova.add_service(HOST, state=state, forced_down=forced_down,
                     status=status, heartbeat_age=heartbeat_age)
    return nova


def ctx_for(nova, fencer=None):
    env = make_env(nova)
    return HostContext(env=env, host=HOST, fencer=fencer,
                       report=HostReport(HOST, env.clock.now()))


def recover(nova, **kwargs):
    return hf.recover_host(make_env(nova), HOST, pool_factory=SyncPool,
                           **kwargs)


MUTATIONS = {"isolate", "force_down", "disable", "enable", "lock", "unlock",
             "reset_state", "evacuate", "stop", "start", "power_off"}


def mutations(nova):
    return [c for c in nova.calls if c[0] in MUTATIONS]


# -- verify-host-down --------------------------------------------------------
def test_verify_refuses_a_host_that_heartbeats():
    nova = nova_with(state="up")
    with pytest.raises(exception.HostNotDown, match="still heartbeats"):
        isolation.VerifyHostDown().execute(ctx_for(nova))


class HeartbeatingNova(MemoryNova):
    """The host is forced down, but its nova-compute still reports."""

    def list_services(self):
        service = self.services[HOST]
        self.services[HOST] = dataclasses.replace(
            service, updated_at=service.updated_at
            + datetime.timedelta(seconds=1))
        return super().list_services()


def test_verify_refuses_a_forced_down_host_that_still_heartbeats():
    """Forced down hides the heartbeats from ``state``; a heartbeat that
    moves on proves the host alive."""
    nova = HeartbeatingNova()
    nova.add_service(HOST, state="down", forced_down=True, heartbeat_age=5)
    with pytest.raises(exception.HostNotDown, match="forced down"):
        isolation.VerifyHostDown().execute(ctx_for(nova))
    assert mutations(nova) == []


def test_verify_waits_out_a_young_heartbeat_of_a_forced_down_host():
    """A run resumed 5 s after it forced the host down: Nova would call
    the host up for 55 s more; so does recovery, then it proceeds."""
    nova = nova_with(state="down", forced_down=True, heartbeat_age=5)
    ctx = ctx_for(nova)
    nova.clock = ctx.env.clock
    isolation.VerifyHostDown().execute(ctx)
    assert 55 <= ctx.env.clock.t <= 56
    assert mutations(nova) == []


@pytest.mark.parametrize("state,forced,age", [
    ("down", False, None), ("down", True, 61), ("down", True, 3600)])
def test_verify_accepts(state, forced, age):
    nova = nova_with(state=state, forced_down=forced, heartbeat_age=age)
    ctx = ctx_for(nova)
    isolation.VerifyHostDown().execute(ctx)
    assert ctx.service.host == HOST


def test_verify_lets_a_live_host_through_to_fencing():
    nova = nova_with(state="up")
    ctx = ctx_for(nova, fencer=FakeFencer(nova))
    isolation.VerifyHostDown().execute(ctx)
    assert mutations(nova) == []


def test_unknown_host():
    with pytest.raises(exception.UnknownHost):
        isolation.VerifyHostDown().execute(ctx_for(MemoryNova()))


# -- force-down and disable --
def test_force_down_then_rollback():
    nova = nova_with()
    ctx = ctx_for(nova)
    isolation.VerifyHostDown().execute(ctx)
    isolation.ForceDown().execute(ctx)
    assert nova.services[HOST].forced_down
    isolation.ForceDown().rollback(ctx, RuntimeError())
    assert not nova.services[HOST].forced_down


def test_force_down_disables_in_the_same_request():
    nova = nova_with()
    ctx = ctx_for(nova)
    isolation.VerifyHostDown().execute(ctx)
    isolation.ForceDown().execute(ctx)
    isolation.Disable().execute(ctx)
    assert mutations(nova) == [("isolate", HOST, "host down")]
    assert nova.services[HOST].status == "disabled"
    isolation.Disable().rollback(ctx, RuntimeError())
    isolation.ForceDown().rollback(ctx, RuntimeError())
    assert nova.services[HOST].status == "enabled"
    assert not nova.services[HOST].forced_down


def test_force_down_keeps_an_existing_disable():
    nova = nova_with(status="disabled")
    ctx = ctx_for(nova)
    isolation.VerifyHostDown().execute(ctx)
    isolation.ForceDown().execute(ctx)
    isolation.Disable().execute(ctx)
    isolation.Disable().rollback(ctx, RuntimeError())
    assert mutations(nova) == [("isolate", HOST, None)]


def test_force_down_leaves_an_already_forced_host_alone():
    nova = nova_with(forced_down=True)
    ctx = ctx_for(nova)
    isolation.VerifyHostDown().execute(ctx)
    isolation.ForceDown().execute(ctx)
    isolation.ForceDown().rollback(ctx, RuntimeError())
    assert mutations(nova) == []


def test_force_down_answered_down_needs_no_further_read():
    nova = nova_with(state="up")
    ctx = ctx_for(nova, fencer=FakeFencer(nova))
    isolation.VerifyHostDown().execute(ctx)
    isolation.ForceDown().execute(ctx)
    assert nova.names()[-1] == "isolate"


def test_force_down_waits_for_nova_to_report_down():
    nova = nova_with(state="up")
    isolate = nova.isolate

    def answered_up(service, reason):
        isolate(service, reason)
        return dataclasses.replace(service, state="up")

    nova.isolate = answered_up
    ctx = ctx_for(nova, fencer=FakeFencer(nova))
    isolation.VerifyHostDown().execute(ctx)
    isolation.ForceDown().execute(ctx)
    assert nova.names()[-2:] == ["isolate", "get_compute_service"]


def test_isolation_is_undone_when_nova_never_reports_the_host_down():
    """Force-down and disable go in one request; when Nova then never
    reports the host down, the run gives up and both are undone, as when
    a later step fails: the host is left as it was found."""
    nova = nova_with(state="up")
    isolate = nova.isolate

    def never_down(service, reason):
        isolate(service, reason)
        nova.services[HOST] = dataclasses.replace(nova.services[HOST],
                                                  state="up")
        return nova.services[HOST]

    nova.isolate = never_down
    nova.add_server("a")
    with pytest.raises(exception.WaitTimeout, match=f"{HOST} down"):
        recover(nova, fencer=FakeFencer(nova))
    assert [c[0] for c in mutations(nova)] == [
        "power_off", "isolate", "enable", "force_down"]
    assert nova.services[HOST].status == "enabled"
    assert not nova.services[HOST].forced_down


def test_disable_with_reason_and_rollback():
    nova = nova_with(forced_down=True)
    ctx = ctx_for(nova)
    isolation.VerifyHostDown().execute(ctx)
    isolation.Disable().execute(ctx)
    assert nova.services[HOST].disabled_reason == "host down"
    isolation.Disable().rollback(ctx, RuntimeError())
    assert nova.services[HOST].status == "enabled"


def test_disable_keeps_an_existing_disable():
    nova = nova_with(status="disabled")
    ctx = ctx_for(nova)
    isolation.VerifyHostDown().execute(ctx)
    isolation.Disable().execute(ctx)
    isolation.Disable().rollback(ctx, RuntimeError())
    assert mutations(nova) == []


# -- orchestration --
def test_refused_host_changes_nothing():
    nova = nova_with(state="up")
    nova.add_server("a")
    with pytest.raises(exception.HostNotDown):
        recover(nova)
    assert mutations(nova) == []


def test_order_isolate_then_list_then_recover():
    nova = nova_with()
    nova.add_server("a")
    report = recover(nova)
    names = [n for n in nova.names()
             if n not in ("get_compute_service", "list_services")]
    assert names[:2] == ["isolate", "list_servers"]
    assert report.instances[0].outcome is Outcome.RECOVERED


def test_a_live_host_is_fenced_before_anything_else():
    nova = nova_with(state="up")
    nova.add_server("a")
    report = recover(nova, fencer=FakeFencer(nova))
    assert [c[0] for c in mutations(nova)][:2] == [
        "power_off", "isolate"]
    assert report.instances[0].outcome is Outcome.RECOVERED


def test_a_heartbeat_newer_than_the_detected_one_stops_the_fencing():
    """The detector's fast path fails a host on one heartbeat, before
    Nova calls it down: one that came since proves the host alive."""
    nova = nova_with(state="up", heartbeat_age=2)
    nova.add_server("a")
    judged_on = nova.services[HOST].updated_at - datetime.timedelta(
        seconds=10)
    with pytest.raises(exception.HostAlive, match="the host is alive"):
        recover(nova, fencer=FakeFencer(nova), heartbeat=judged_on)
    assert mutations(nova) == []
    # The heartbeat it was judged on, and no newer: fenced, recovered.
    report = recover(nova, fencer=FakeFencer(nova),
                     heartbeat=nova.services[HOST].updated_at)
    assert report.instances[0].outcome is Outcome.RECOVERED


def test_failed_fencing_changes_nothing_in_nova(caplog):
    nova = nova_with(state="up")
    nova.add_server("a")
    error = exception.FencingError("BMC says no")
    with pytest.raises(exception.FenceHeld,
                       match=f"^{HOST} could not be proved off: BMC says no"
                       ) as caught:
        recover(nova, fencer=FakeFencer(nova, error))
    assert caught.value.cause == "fence_failed"
    assert mutations(nova) == [("power_off", "")]
    # A warning: the engine raises the alarm, once per host or domain.
    assert (f"{HOST} could not be proved off (held: fence_failed): BMC says "
            f"no. Nothing is forced down or evacuated") in caplog.text
    assert "ALARM" not in caplog.text


def test_dry_run_plans_the_fencing_without_fencing():
    nova = nova_with(state="up")
    nova.add_server("a")
    env = make_env(nova)
    report = hf.recover_host(env, HOST, fencer=FakeFencer(nova),
                             dry_run=True, pool_factory=SyncPool)
    assert mutations(nova) == []
    assert ("fence", "SUCCESS") in env.recorder.steps
    assert report.instances[0].outcome is Outcome.PLANNED


# -- a detected failure proved off by its liveness probe ---------------------
def probe(answer):
    """A probe of port 22 whose connection ``answer`` decides: "accept",
    or silence."""
    def connect(address, timeout):
        if answer != "accept":
            raise TimeoutError("timed out")
    return Probe(ports=(22,), timeout=1.0, connect=connect)


def test_a_silent_probe_is_asked_again_before_the_isolation():
    nova = nova_with()
    nova.add_server("a")
    env = make_env(nova)
    report = hf.recover_host(env, HOST, liveness=probe("silence"),
                             pool_factory=SyncPool)
    assert report.instances[0].outcome is Outcome.RECOVERED
    assert env.recorder.steps[:4] == [
        ("verify-host-down", "RUNNING"), ("verify-host-down", "SUCCESS"),
        ("liveness-probe", "RUNNING"), ("liveness-probe", "SUCCESS")]


def test_a_host_that_answers_its_probe_now_is_not_touched():
    nova = nova_with()
    nova.add_server("a")
    with pytest.raises(exception.HostNotDown, match="answers on TCP port"):
        recover(nova, liveness=probe("accept"))
    assert mutations(nova) == []


def test_fencing_is_the_proof_when_there_is_a_fencer():
    nova = nova_with()
    nova.add_server("a")
    recover(nova, fencer=FakeFencer(nova), liveness=probe("accept"))
    assert [c[0] for c in mutations(nova)][:1] == ["power_off"]


def test_dry_run_names_the_probe():
    nova = nova_with()
    nova.add_server("a")
    env = make_env(nova)
    hf.recover_host(env, HOST, liveness=probe("accept"), dry_run=True,
                    pool_factory=SyncPool)
    assert ("liveness-probe", "SUCCESS") in env.recorder.steps
    assert mutations(nova) == []


def test_isolation_is_undone_when_listing_fails():
    nova = nova_with()
    nova.fail("list_servers", HOST, exception.NovaUnreachable("gone"))
    with pytest.raises(exception.NovaUnreachable):
        recover(nova)
    assert [c[0] for c in mutations(nova)] == [
        "isolate", "enable", "force_down"]
    assert not nova.services[HOST].forced_down
    assert nova.services[HOST].status == "enabled"


def test_run_steps_rolls_back_in_reverse_and_reraises():
    undone = []

    class Ok(base.Step):
        def __init__(self, name):
            self.name = name

        def execute(self, ctx):
            pass

        def rollback(self, ctx, exc):
            undone.append(self.name)

    class Boom(base.Step):
        def execute(self, ctx):
            raise ValueError("boom")

    observed = []
    with pytest.raises(ValueError, match="boom"):
        base.run_steps([Ok("one"), Ok("two"), Boom()], None,
                       lambda name, state, message, news: observed.append(
                           (name, state.value)))
    assert undone == ["two", "one"]
    assert observed == [
        ("one", "RUNNING"), ("one", "SUCCESS"),
        ("two", "RUNNING"), ("two", "SUCCESS"),
        ("step", "RUNNING"), ("step", "FAILURE"),
        ("two", "REVERTED"), ("one", "REVERTED")]


def test_one_failure_does_not_stop_the_others():
    nova = nova_with()
    for uuid in "abc":
        nova.add_server(uuid)
    nova.outcomes["b"] = "error"
    report = recover(nova)
    outcomes = {r.uuid: r.outcome for r in report.instances}
    assert outcomes == {"a": Outcome.RECOVERED, "b": Outcome.FAILED,
                        "c": Outcome.RECOVERED}
    assert not report.succeeded


def test_pool_is_sized_by_threads():
    nova = nova_with()
    sizes = []

    def factory(size):
        sizes.append(size)
        return SyncPool(size)

    hf.recover_host(make_env(nova, threads=7), HOST, pool_factory=factory)
    assert sizes == [7]


def test_worker_exception_becomes_a_failed_result():
    nova = nova_with()
    nova.add_server("a")

    class Exploding(SyncPool):
        def run(self, fn, items):
            return super().run(lambda item: 1 / 0, items)

    report = hf.recover_host(make_env(nova), HOST, pool_factory=Exploding)
    assert report.instances[0].outcome is Outcome.FAILED
    assert "ZeroDivisionError" in report.instances[0].reason


def test_instance_appearing_during_recovery_is_recovered():
    nova = nova_with()
    nova.add_server("a")
    original = nova.list_servers

    def list_servers(host):
        found = original(host)
        if "late" not in nova.servers:
            nova.add_server("late")
        return found

    nova.list_servers = list_servers
    report = recover(nova)
    assert {r.uuid: r.outcome for r in report.instances} == {
        "a": Outcome.RECOVERED, "late": Outcome.RECOVERED}


def test_skipped_instances_are_reported_with_reason():
    nova = nova_with()
    nova.add_server("a", vm_state="shelved")
    report = recover(nova)
    assert report.instances[0].outcome is Outcome.SKIPPED
    assert "shelved" in report.instances[0].reason
    assert report.succeeded


def test_dry_run_changes_nothing_and_plans():
    nova = nova_with()
    nova.add_server("a", task_state="rebooting")
    nova.add_server("b", vm_state="shelved")
    nova.add_server("c", locked=True, locked_reason="owner")
    report = hf.recover_host(make_env(nova), HOST, dry_run=True,
                             pool_factory=SyncPool)
    assert mutations(nova) == []
    plan = {r.uuid: (r.outcome, r.reason) for r in report.instances}
    assert plan["a"] == (Outcome.PLANNED, "evacuate (auto)")
    assert plan["b"][0] is Outcome.SKIPPED
    assert plan["c"] == (Outcome.PLANNED,
                         "evacuate (auto), leave the existing lock")


def test_dry_run_still_refuses_a_live_host():
    nova = nova_with(state="up")
    with pytest.raises(exception.HostNotDown):
        hf.recover_host(make_env(nova), HOST, dry_run=True,
                        pool_factory=SyncPool)


def test_report_times_come_from_the_clock():
    nova = nova_with()
    clock = FakeClock()
    clock.t = 5
    report = hf.recover_host(make_env(nova, clock), HOST,
                             pool_factory=SyncPool)
    assert report.started_at == report.finished_at == clock.now()


def test_dry_run_plans_the_steps_of_each_vm_state():
    nova = nova_with()
    nova.add_server("p", vm_state="paused")
    nova.add_server("r", vm_state="resized")
    report = hf.recover_host(make_env(nova), HOST, dry_run=True,
                             pool_factory=SyncPool)
    assert mutations(nova) == []
    plan = {r.uuid: (r.outcome, r.reason) for r in report.instances}
    assert plan["p"] == (Outcome.PLANNED, "reset-state to active, "
                         "evacuate (auto), then pause")
    assert plan["r"] == (Outcome.PLANNED,
                         "confirm the resize, evacuate (auto)")
