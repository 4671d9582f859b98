"""The decision log's recording points, over a real SQLite store with a
clock that never sleeps: a run's events through ``StoreRecorder`` (once
per change, in the journal's transactions), the intake's, the gates'
holds, and the command line's ``--since``."""

import datetime

import pytest
from oslo_config import cfg

from recovery import conf as recovery_conf
from recovery import exception
from recovery import intake
from recovery.api import validation
from recovery.cmd import events as events_command
from recovery.engine import runner
from recovery.engine import server
from recovery.engine.lease import Lease
from recovery.engine.runner import StoreRecorder
from recovery.fencing import load_fencing
from recovery.flows import host_failure as hf
from recovery.flows import isolation
from recovery.flows import process_failure
from recovery.notification import Kind
from recovery.notification import Status
from recovery.results import StepState
from tests.unit.fakes import FakeFencer
from tests.unit.fakes import MemoryNova
from tests.unit.fakes import SyncPool
from tests.unit.fakes import make_env

HOST = "compute-1"
OWNER = "engine-a:1"
STOPPED = {"event": "STOPPED", "host_status": "NORMAL"}



def notify(store, clock, *, type="COMPUTE_HOST", payload=STOPPED,
           host=HOST, **kwargs):
    return intake.accept(store, type=type, hostname=host,
                         generated_time=clock.now(), payload=payload,
                         origin="api", now=clock.now(), **kwargs)


def held_run(store, clock, notification):
    """``notification`` taken by OWNER, and a recorder of its run."""
    taken = store.take(notification, OWNER, 60)
    lease = Lease(taken, OWNER, 60, clock, clock.monotonic())
    return taken, StoreRecorder(store, lease, clock, notification=taken)


def said(events):
    return [(e.actor, e.subject, e.kind, e.message) for e in events]


def test_a_mixed_run_records_each_decision_once(store, clock):
    nova = MemoryNova()
    nova.add_service(HOST, state="down")
    nova.add_service("compute-2", state="up")
    nova.add_server("ok")
    nova.add_server("bad")
    nova.outcomes["bad"] = "error"
    nova.add_server("shelved", vm_state="shelved")
    taken, recorder = held_run(store, clock, notify(store, clock))
    report = hf.recover_host(make_env(nova, clock, recorder=recorder), HOST,
                             fencer=FakeFencer(nova), pool_factory=SyncPool)
    [bad] = [r for r in report.instances if r.uuid == "bad"]

    events = store.events(taken.uuid)
    assert said(events[:4]) == [
        ("api", HOST, "received", "COMPUTE_HOST STOPPED, host_status NORMAL"),
        (OWNER, HOST, "claimed", f"attempt 1 starts on {OWNER}"),
        (OWNER, HOST, "fenced", "powered off, verified Off"),
        (OWNER, HOST, "isolated",
         "forced down and disabled in Nova: out of scheduling, and its "
         "instances may be evacuated")]
    by_instance = {}
    for event in events[4:]:
        by_instance.setdefault(event.subject, []).append(
            (event.kind, event.message))
    assert by_instance == {
        "vm-ok (ok)": [
            ("evacuating", "evacuating from compute-1 (auto)"),
            ("recovered", "evacuated from compute-1 to compute-2 (auto); "
                          "active as before")],
        "vm-bad (bad)": [
            ("evacuating", "evacuating from compute-1 (auto)"),
            ("failed", bad.reason)],
        "vm-shelved (shelved)": [("skipped", report.instances[-1].reason)]}
    assert "evacuation error" in bad.reason
    # Each instance's journal was written before each of its steps; its
    # events only when something changed.
    assert all(e.actor == OWNER for e in events[1:])


def test_an_unlock_that_fails_after_the_outcome_is_told_again(store,
                                                              clock):
    nova = MemoryNova()
    nova.add_service(HOST, state="down")
    nova.add_server("a")
    # Once by the instance, once by the run's lock sweep.
    down = exception.NovaError("Nova is down")
    nova.fail("unlock", "a", down, down)
    taken, recorder = held_run(store, clock, notify(store, clock))
    hf.recover_host(make_env(nova, clock, recorder=recorder), HOST,
                    pool_factory=SyncPool)
    told = [(e.kind, e.message) for e in store.events(taken.uuid)
            if e.subject == "vm-a (a)"]
    assert told == [
        ("evacuating", "evacuating from compute-1 (auto)"),
        ("recovered", "evacuated from compute-1 to compute-2 (auto); "
                      "active as before"),
        ("failed", "left locked, unlock failed: Nova is down")]


def test_a_recovered_instance_in_another_state_says_what_it_was(
        store, clock):
    nova = MemoryNova()
    nova.add_service(HOST, state="down")
    nova.add_server("a", vm_state="rescued")
    taken, recorder = held_run(store, clock, notify(store, clock))
    hf.recover_host(make_env(nova, clock, recorder=recorder), HOST,
                    pool_factory=SyncPool)
    told = [(e.kind, e.message) for e in store.events(taken.uuid)
            if e.subject == "vm-a (a)"]
    assert told[-1] == (
        "recovered", "evacuated from compute-1 to compute-2 (auto); "
                     "active (was rescued)")


def tell(recorder, step, state, message):
    """What ``run_steps`` tells the recorder of ``step``'s change."""
    recorder.step_changed(step.name, state, message,
                          news=step.news.get(state))


def test_only_the_steps_that_declare_news_are_decisions(store, clock):
    """A process failure's "disable" is not an isolation; a step that is
    no decision is journaled only."""
    process = notify(store, clock, type="PROCESS", payload={
        "process_name": "nova-compute", "event": "STOPPED"})
    taken, recorder = held_run(store, clock, process)
    tell(recorder, process_failure.Disable, StepState.SUCCESS, "disabled")
    host_failure = notify(store, clock, host="compute-2")
    other, recorder = held_run(store, clock, host_failure)
    tell(recorder, isolation.VerifyHostDown, StepState.SUCCESS, "done")
    tell(recorder, isolation.ProbeSilent, StepState.FAILURE,
         "compute-2 answers on TCP port 22")
    tell(recorder, isolation.ForceDown, StepState.REVERTED, "undone")
    assert [e.kind for e in store.events(taken.uuid)] == [
        "received", "claimed"]
    assert [(e.kind, e.message) for e in store.events(other.uuid)][2:] == [
        ("probe-answered", "compute-2 answers on TCP port 22"),
        ("undone", "force-down undone: a later step failed")]
    assert len(store.step_events(other.uuid)) == 3


def test_the_intake_records_what_it_received_or_ignored(store, clock):
    new = notify(store, clock, note="sent for 'compute-1.example.com'")
    ignored = notify(store, clock, host="compute-2",
                     payload={"event": "STOPPED", "host_status": "UNKNOWN"})
    vm = notify(store, clock, type="VM", payload={
        "instance_uuid": "6f1d7a3e", "event": "LIFECYCLE",
        "vir_domain_event": "STARTED"})
    assert said(store.events(new.uuid)) == [
        ("api", HOST, "received", "COMPUTE_HOST STOPPED, host_status "
                                  "NORMAL; sent for 'compute-1.example.com'")]
    [event] = store.events(ignored.uuid)
    assert (event.kind, event.message) == (
        "ignored", f"COMPUTE_HOST STOPPED, host_status UNKNOWN: "
                   f"{ignored.message}")
    assert ignored.status is Status.IGNORED
    [event] = store.events(vm.uuid)
    assert event.kind == "ignored"
    assert event.message.startswith(
        "VM LIFECYCLE/STARTED of instance 6f1d7a3e: event LIFECYCLE/"
        "STARTED is not an instance failure")


def test_the_brake_s_hold_is_recorded_once_per_verdict(store, clock):
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf([])
    nova = MemoryNova()
    nova.clock = clock
    for n, state in enumerate(("down", "down", "down", "up"), 1):
        nova.add_service(f"compute-{n}", state=state)
    engine = server.engine_for(
        conf, store, runner.Means.of(conf, nova, load_fencing(conf), clock))
    item = notify(store, clock)
    for _ in range(3):
        engine._claim()
        clock.sleep(conf.safety.recheck_interval)
    nova.add_service("compute-4", state="down")
    engine._claim()
    assert said(store.events(item.uuid))[1:] == [
        (engine.owner, HOST, "held",
         "held by the mass-failure brake: 3 of 4 compute services are "
         "down or in recovery (75% > max_failed_hosts_percent 50%)"),
        (engine.owner, HOST, "held",
         "held by the mass-failure brake: every one of the 4 compute "
         "services looks down at once: recovery is more likely cut off "
         "from Nova's hosts, or Nova's control plane is failing, than "
         "looking at dead hosts")]
    assert store.get(item.uuid).kind is Kind.HOST_FAILURE
    assert store.get(item.uuid).status is Status.NEW


@pytest.mark.parametrize("value, seconds", [
    ("90s", 90), ("30m", 1800), ("1h", 3600), ("2d", 172800)])
def test_since_takes_a_time_ago(value, seconds):
    now = datetime.datetime(2026, 11, 22, 10, tzinfo=datetime.timezone.utc)
    assert events_command.since(value, now) == now - datetime.timedelta(
        seconds=seconds)


def test_since_takes_an_iso_time_utc_unless_it_says():
    now = datetime.datetime(2026, 11, 22, 10, tzinfo=datetime.timezone.utc)
    assert events_command.since("2026-11-22T08:30:00", now) == (
        datetime.datetime(2026, 11, 22, 8, 30,
                          tzinfo=datetime.timezone.utc))
    assert events_command.since("2026-11-22T09:30:00+01:00", now).hour == 8
    with pytest.raises(validation.Invalid, match="--since: '1 hour'"):
        events_command.since("1 hour", now)
