"""Following a stored run: each change the run's process writes to the
store is told once, in the order it happened, and the notification's
status is said around them."""

import datetime
import io

import pytest

from recovery import exception
from recovery import intake
from recovery.cmd import watch
from recovery.db.claims import Holder
from recovery.db.store import open_store
from recovery.engine.lease import Lease
from recovery.engine.runner import StoreRecorder
from recovery.notification import Kind
from recovery.notification import Status
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import Phase
from recovery.results import StepName
from recovery.results import StepState
from tests.unit.fakes import FakeClock

HOST = "compute-1"
OWNER = "engine-1"
LEASE = 10 ** 6
T0 = datetime.datetime(2026, 11, 22, 10, tzinfo=datetime.timezone.utc)


def at(seconds: float) -> datetime.datetime:
    return T0 + datetime.timedelta(seconds=seconds)


@pytest.fixture
def store(tmp_path):
    store = open_store(f"sqlite:///{tmp_path}/s.sqlite")
    yield store
    store.close()


@pytest.fixture
def run(store):
    item, _ = intake.by_hand(store, kind=Kind.HOST_FAILURE, hostname=HOST,
                             owner=OWNER, lease=LEASE, actor=OWNER)
    return item


class Told:
    """A recorder and a ``say`` that keep what they hear, in order."""

    def __init__(self):
        self.heard = []

    def step_changed(self, step, state, message, *, news=None,
                     instances=None):
        self.heard.append(("step", step, state, instances))

    def instance_changed(self, result):
        outcome = result.outcome.value if result.outcome else None
        self.heard.append(("instance", result.name, result.phase.value,
                           outcome))

    def say(self, line):
        self.heard.append(("status", line.split(": ", 1)[1]))


def vm(name, phase, outcome=None):
    return InstanceResult(uuid=f"{name}-uuid", name=name, source_host=HOST,
                          original_state="active", phase=phase,
                          outcome=outcome)


def test_changes_are_told_once_in_the_order_they_happened(store, run):
    told = Told()
    follower = watch.Follower(store, run.uuid, told, told.say)
    assert follower.poll() is None
    assert told.heard == [("status", "running, attempt 1")]
    told.heard.clear()
    store.add_step_event(run.uuid, "recover-instances", "RUNNING", 0.0,
                         f"2 instance(s) on {HOST}; auto", at(1),
                         instances=2)
    store.save_instance(run.uuid, vm("vm-a", Phase.LOCKING), at(2))
    store.save_instance(run.uuid, vm("vm-b", Phase.LOCKING), at(3))
    # Only the latest write of vm-a is there to see at the next poll.
    store.save_instance(run.uuid, vm("vm-a", Phase.DONE, Outcome.RECOVERED),
                        at(4))
    assert follower.poll() is None
    assert told.heard == [
        ("step", "recover-instances", "RUNNING", 2),
        ("instance", "vm-b", "locking", None),
        ("instance", "vm-a", "done", "recovered")]
    told.heard.clear()
    assert follower.poll() is None
    assert told.heard == []     # nothing new, nothing told

    store.save_instance(run.uuid, vm("vm-b", Phase.DONE, Outcome.FAILED),
                        at(5))
    store.add_step_event(run.uuid, "recover-instances", "FAILURE", 1.0,
                         "1 recovered, 1 failed", at(6))
    store.finish(run.uuid, Status.ERROR, f"{HOST}: 1 recovered, 1 failed",
                 holder=Holder(OWNER, run.version, LEASE))
    # An error is retried: not an end. It is said after the attempt's
    # last changes.
    assert follower.poll() is None
    assert told.heard == [
        ("instance", "vm-b", "done", "failed"),
        ("step", "recover-instances", "FAILURE", None),
        ("status", f"error, attempt 1: {HOST}: 1 recovered, 1 failed "
                   f"(recovery-engine retries it)")]


def test_the_count_is_read_from_its_column_not_the_message(store, run):
    """A step recorded before schema 0016 (a run in progress across the
    upgrade, or an engine of the previous release) has no count: the
    view shows its instances as each is told of."""
    told = Told()
    follower = watch.Follower(store, run.uuid, told, told.say)
    follower.poll()
    told.heard.clear()
    store.add_step_event(run.uuid, "recover-instances", "RUNNING", 0.0,
                         f"2 instance(s) on {HOST}; auto", at(1))
    store.add_step_event(run.uuid, "recover-instances", "RUNNING", 0.0,
                         "resumed", at(2), instances=3)
    follower.poll()
    assert told.heard == [("step", "recover-instances", "RUNNING", None),
                          ("step", "recover-instances", "RUNNING", 3)]


def test_the_run_s_recorder_stores_the_count_with_the_step(store, run):
    clock = FakeClock()
    lease = Lease(run, OWNER, LEASE, clock, clock.monotonic())
    recorder = StoreRecorder(store, lease, clock, notification=run)
    recorder.step_changed(StepName.RECOVER_INSTANCES, StepState.RUNNING,
                          f"2 instance(s) on {HOST}; auto", instances=2)
    recorder.step_changed(StepName.RECOVER_INSTANCES, StepState.SUCCESS,
                          "2 recovered")
    assert [(e.step, e.state, e.instances)
            for e in store.step_events(run.uuid)] == [
        ("recover-instances", "RUNNING", 2),
        ("recover-instances", "SUCCESS", None)]


def test_it_ends_with_the_notification(store, run):
    told = Told()
    follower = watch.Follower(store, run.uuid, told, told.say)
    follower.poll()
    store.save_instance(run.uuid, vm("vm-a", Phase.DONE, Outcome.RECOVERED),
                        at(1))
    store.finish(run.uuid, Status.FINISHED, f"{HOST}: 1 recovered",
                 holder=Holder(OWNER, run.version, LEASE))
    ended = follower.poll()
    assert ended.status is Status.FINISHED
    assert told.heard[-2:] == [
        ("instance", "vm-a", "done", "recovered"),
        ("status", f"finished, attempt 1: {HOST}: 1 recovered")]


def test_off_a_terminal_one_line_per_change(store, run):
    out = io.StringIO()
    store.save_instance(run.uuid, vm("vm-a", Phase.DONE, Outcome.RECOVERED),
                        at(1))
    store.finish(run.uuid, Status.FINISHED, f"{HOST}: 1 recovered",
                 holder=Holder(OWNER, run.version, LEASE))
    ended = watch.follow(store, run.uuid, FakeClock(), 10, out)
    assert ended.status is Status.FINISHED
    assert out.getvalue().splitlines() == [
        "vm-a (vm-a-uui) recovered",
        f"notification {run.uuid} (COMPUTE_HOST STOPPED {HOST}): finished, "
        f"attempt 1: {HOST}: 1 recovered"]


def test_it_polls_on_the_clock_and_gives_up_at_the_timeout(store, run):
    clock = FakeClock()
    with pytest.raises(exception.WaitTimeout,
                       match=f"3s waiting for notification {run.uuid}"):
        watch.follow(store, run.uuid, clock, 3, io.StringIO())
    assert clock.sleeps == [watch.POLL_INTERVAL] * 6


def test_an_unknown_notification_is_not_found(store):
    with pytest.raises(exception.NotFound):
        watch.follow(store, "nope", FakeClock(), 3, io.StringIO())
