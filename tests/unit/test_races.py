"""Races under preemption (native threads), one test per guard.

Each test stops one thread at the critical point of a shared object (a
hook in something the object calls: the metrics, the store, Nova, the
recorder, the clock), lets the other threads run their whole call, then
lets the first go on. Unguarded, the first thread then acts on what it
read before the others ran, and the test fails; guarded, the others
either found the object already changed, or never waited on the first.
No test sleeps: a bound (``BOUND``) only keeps a failing run from
hanging, where the unguarded code holds a lock across the hook.

The guards, and the objects, are listed in ``recovery.concurrency``'s
docstring.
"""

import dataclasses
import logging
import threading

import pytest

from recovery import exception
from recovery.engine import lease as lease_module
from recovery.engine.lease import Lease
from recovery.engine.lease import LeaseKeeper
from recovery.flows import placement
from recovery.flows.priority import Phases
from recovery.metrics import InstanceOutcomes
from recovery.notification import Kind
from recovery.notification import Status
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import Phase
from tests.unit.fakes import FakeClock
from tests.unit.fakes import ListRecorder
from tests.unit.fakes import SegmentRecord
from tests.unit.fakes import make_env

# The longest a test waits for a thread: only a failing run waits it.
BOUND = 3.0
SECONDS = 60


class Hold:
    """Stops the first thread that calls ``point()`` until ``release()``
    (at most twice BOUND); any later caller goes through."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self._release = threading.Event()
        self._lock = threading.Lock()
        # The thread itself, not its ident: an ended thread's is reused.
        self._first: threading.Thread | None = None

    def point(self) -> None:
        with self._lock:
            if self._first is None:
                self._first = threading.current_thread()
            first = self._first is threading.current_thread()
        if first and not self._release.is_set():
            self.reached.set()
            # Longer than any join: a thread that waits on the one held
            # is seen waiting.
            self._release.wait(2 * BOUND)

    def release(self) -> None:
        self._release.set()


def start(fn, *args) -> threading.Thread:
    thread = threading.Thread(target=fn, args=args, daemon=True)
    thread.start()
    return thread


def finishes(thread: threading.Thread) -> bool:
    thread.join(BOUND)
    return not thread.is_alive()


def held_then_others(hold: Hold, first, *others) -> None:
    """Run ``first`` until it reaches the hold, then each of ``others``
    to its end on threads of their own, then let ``first`` end."""
    held = start(first)
    assert hold.reached.wait(BOUND), "the first thread never got there"
    threads = [start(other) for other in others]
    ended = [finishes(thread) for thread in threads]
    hold.release()
    assert finishes(held)
    assert all(ended), "a thread waited for the one held"


# -- the lease and its keeper --------------------------------------------
class Gauge:
    def __init__(self, hold: Hold | None = None) -> None:
        self.value = 0.0
        self.hold = hold
        self._lock = threading.Lock()

    def _change(self, fn) -> None:
        if self.hold is not None:
            self.hold.point()
        with self._lock:
            self.value = fn(self.value)

    def set(self, value: float) -> None:
        self._change(lambda _: value)

    def inc(self, amount: float = 1) -> None:
        self._change(lambda v: v + amount)

    def dec(self, amount: float = 1) -> None:
        self._change(lambda v: v - amount)

    def labels(self, *names: str) -> "Gauge":
        return self


@dataclasses.dataclass
class FakeMetrics:
    leases: Gauge = dataclasses.field(default_factory=Gauge)
    leases_lost: Gauge = dataclasses.field(default_factory=Gauge)
    renewals: Gauge = dataclasses.field(default_factory=Gauge)


@pytest.fixture
def metrics(monkeypatch):
    fake = FakeMetrics()
    monkeypatch.setattr(lease_module, "METRICS", fake)
    return fake


def notification(store, clock, host="compute-1"):
    return store.add(type="COMPUTE_HOST", kind=Kind.HOST_FAILURE,
                     hostname=host, generated_time=clock.now(),
                     payload={"event": "STOPPED"}, origin="api",
                     status=Status.NEW, now=clock.now())


def taken(store, clock, owner="engine-a:1"):
    sent_at = clock.monotonic()
    item = store.take(store.next_runnable(), owner, SECONDS)
    return Lease(item, owner, SECONDS, clock, taken_at=sent_at)


class FakeNotification:
    def __init__(self, uuid: str) -> None:
        self.uuid, self.version = uuid, 1


def test_the_keeper_counts_every_run_tracked_at_once(metrics):
    """The engine's loop tracks a run while another run's task untracks
    its own (and the keeper's task drops a lost one): the gauge of leases
    held must end at the number held, whatever the order."""
    hold = Hold()
    metrics.leases.hold = hold
    keeper = LeaseKeeper(store=None, clock=FakeClock(), seconds=SECONDS)
    first, second = (Lease(FakeNotification(uuid), "engine-a:1", SECONDS,
                           FakeClock(), 0.0) for uuid in ("n-1", "n-2"))
    held_then_others(hold, lambda: keeper.track(first),
                     lambda: keeper.track(second))
    assert len(keeper.tracked()) == 2
    assert metrics.leases.value == 2


def test_a_renewal_the_end_of_the_run_overtook_is_no_loss(
        store, clock, metrics, caplog):
    """The keeper lists the run, the run ends (its last write, then
    untracked), then the keeper's renewal reaches the store: refused,
    since the run is no longer running. That is the end of a run, not a
    lost lease: no alarm, no count."""
    uuid = notification(store, clock).uuid
    lease = taken(store, clock)
    keeper = LeaseKeeper(store, clock, SECONDS)
    keeper.track(lease)
    hold = Hold()

    class Store:
        @staticmethod
        def renew_leases(holders):
            hold.point()
            return store.renew_leases(holders)

    keeper._store = Store()

    def end_the_run():
        lease.end(store.finish, uuid, Status.FINISHED, "done")
        keeper.untrack(lease)

    with caplog.at_level(logging.ERROR):
        held_then_others(hold, keeper.renew, end_the_run)
    assert store.get(uuid).status is Status.FINISHED
    assert "Lost the lease" not in caplog.text
    assert metrics.leases_lost.value == 0


def test_a_lease_is_lost_once_whichever_tasks_find_it(clock, metrics,
                                                      caplog):
    """Every task of a run checks the lease before each Nova request:
    past the deadline, several find it at once. One loss: one alarm, one
    count."""
    hold = Hold()
    metrics.leases_lost.hold = hold
    lease = Lease(FakeNotification("n-1"), "engine-a:1", SECONDS, clock, 0.0)
    clock.t = SECONDS + 1

    def check():
        with pytest.raises(exception.LeaseLost):
            lease.check()

    with caplog.at_level(logging.ERROR):
        held_then_others(hold, check, check, check)
    assert metrics.leases_lost.value == 1
    assert caplog.text.count("Lost the lease") == 1


class HookedHolder:
    """A Holder whose lease, read by ``extended``, is the hook."""

    def __init__(self, hold: Hold) -> None:
        self._hold = hold

    @property
    def lease(self) -> float:
        self._hold.point()
        return SECONDS


def test_two_writes_answered_at_once_keep_the_later_deadline(clock):
    """Two tasks' writes extend the lease; the one sent later may answer
    first. The deadline never goes back."""
    hold = Hold()
    lease = Lease(FakeNotification("n-1"), "engine-a:1", SECONDS, clock, 0.0)
    lease.holder = HookedHolder(hold)
    held_then_others(hold, lambda: lease.extended(10.0),
                     lambda: lease.extended(20.0))
    clock.t = 20 + SECONDS - 1
    lease.check()       # not lost: the later write's deadline holds


# -- the phases of a priority recovery ------------------------------------
def test_a_late_phase_is_recorded_with_no_lock_held():
    """``on_timeout`` writes to the store. Made under the phases' lock,
    every task that enters or leaves waits on that write."""
    clock = FakeClock()
    left = []

    def on_timeout(phase):
        # Another task of the run leaves its phase meanwhile.
        leaving = start(phases.leave, 1)
        left.append(finishes(leaving))

    phases = Phases([1, 1], clock, timeout=5, on_timeout=on_timeout)
    clock.t = 6
    entering = start(phases.enter, 2)
    assert finishes(entering)
    assert left == [True]


def test_a_late_phase_s_failed_record_never_masks_the_task_s_error():
    """A task leaves its phase in a ``finally``: when that is when the
    phase is found late and its record fails (the lease was lost), the
    task's own error is the one raised."""
    clock = FakeClock()

    def on_timeout(phase):
        raise exception.LeaseLost("notification n-1: lease lost")

    phases = Phases([2, 1], clock, timeout=5, on_timeout=on_timeout)

    def task():
        phases.enter(1)
        clock.t = 6
        try:
            raise RuntimeError("the task's own error")
        finally:
            phases.leave(1)

    with pytest.raises(RuntimeError, match="the task's own error"):
        task()
    # The next phase opened all the same.
    phases.enter(2)


# -- reserved hosts -------------------------------------------------------
class ReservedStore:
    """The store's reserved hosts, with the claims counted."""

    def __init__(self, names) -> None:
        self.hosts = [SegmentRecord(f"h-{name}", name) for name in names]
        self.claims: list[str] = []
        self._lock = threading.Lock()

    def host_record(self, name):
        return SegmentRecord("h-dead", name), SegmentRecord("seg", "seg")

    def reserved_hosts(self, segment_uuid, notification_uuid):
        with self._lock:
            return [h for h in self.hosts if h.claimed_by in (
                None, notification_uuid)]

    def claim_reserved(self, host_uuid, notification_uuid, now):
        with self._lock:
            self.claims.append(host_uuid)
            [host] = [h for h in self.hosts if h.uuid == host_uuid]
            if host.claimed_by not in (None, notification_uuid):
                return False
            host.claimed_by = notification_uuid
            return True

    def release_reserved(self, host_uuid, notification_uuid, now):
        raise AssertionError("not released in these tests")


@dataclasses.dataclass
class Service:
    host: str
    state: str = "up"
    status: str = "disabled"

    @property
    def is_up(self) -> bool:
        return self.state == "up"

    @property
    def is_enabled(self) -> bool:
        return self.status == "enabled"


class ReservedNova:
    """Nova as a take of a reserved host sees it; ``hook`` is called in
    each read of a compute service."""

    def __init__(self, hook=lambda host: None) -> None:
        self.hook = hook
        self.enabled: list[str] = []
        self._lock = threading.Lock()

    def get_compute_service(self, host):
        self.hook(host)
        return Service(host)

    def enable(self, service):
        with self._lock:
            self.enabled.append(service.host)

    def aggregates_of(self, host):
        return []


class HookedRecorder(ListRecorder):
    def __init__(self, hook) -> None:
        super().__init__()
        self.hook = hook

    def step_changed(self, step, state, message, **told):
        self.hook(message)
        super().step_changed(step, state, message, **told)


def reserved(nova, store, recorder=None, clock=None):
    env = make_env(nova, clock=clock or FakeClock(),
                   recorder=recorder or ListRecorder())
    return placement.ReservedHosts(env, store, "seg", "n-1", "compute-1")


def test_a_failure_is_told_while_another_task_takes_a_host():
    """Taking a reserved host reads Nova, claims it in the store, enables
    it: a task whose evacuation failed does not wait for all that."""
    hold = Hold()
    rh = reserved(ReservedNova(hook=lambda host: hold.point()),
                  ReservedStore(["r1", "r2"]))
    taking = start(rh.target)
    assert hold.reached.wait(BOUND)
    told = start(rh.timed_out, placement.Target(placement.RESERVED_HOST,
                                                "r0"))
    try:
        assert finishes(told), "timed_out() waited on the take in Nova"
    finally:
        hold.release()
        assert finishes(taking)


def test_a_host_left_is_reported_with_no_lock_held():
    """Leaving a host is written to the store (the recorder): another
    task's failure is not held up by that write."""
    hold = Hold()
    rh = reserved(ReservedNova(), ReservedStore(["r1", "r2", "r3"]),
                  recorder=HookedRecorder(lambda message: hold.point()))
    target = placement.Target
    held_then_others(
        hold, lambda: rh.timed_out(target(placement.RESERVED_HOST, "r1")),
        lambda: rh.failed(target(placement.RESERVED_HOST, "r2"), True))
    assert rh._left == {"r1", "r2"}


class CountingClock(FakeClock):
    """Counts the tasks parked waiting for another's take."""

    def __init__(self) -> None:
        super().__init__()
        self.parked = 0
        self.changed = threading.Condition()

    def wait(self, event, seconds):
        with self.changed:
            self.parked += 1
            self.changed.notify_all()
        return super().wait(event, seconds)


def test_tasks_that_ask_at_once_take_one_reserved_host():
    """Twenty tasks ask for a target at once: the first takes a host
    (Nova, then the store), the others wait for it and get the same one.
    None takes a host of its own meanwhile."""
    tasks = 20
    clock = CountingClock()
    asked = []

    def hook(host):
        # The first take waits until every other task is parked on it,
        # or has come here itself (the race).
        asked.append(host)
        with clock.changed:
            clock.changed.wait_for(
                lambda: clock.parked == tasks - 1 or len(asked) > 1,
                BOUND / 3)

    nova, store = ReservedNova(hook=hook), ReservedStore(["r1", "r2", "r3"])
    rh = reserved(nova, store, clock=clock)
    barrier = threading.Barrier(tasks)
    targets = []

    def ask():
        barrier.wait(BOUND)
        targets.append(rh.target())

    threads = [start(ask) for _ in range(tasks)]
    for thread in threads:
        assert finishes(thread)
    assert {t.host for t in targets} == {"r1"}
    assert store.claims == ["h-r1"]
    assert nova.enabled == ["r1"]


def test_tasks_waiting_for_a_take_that_finds_none_get_none():
    tasks = 5
    clock = CountingClock()

    def hook(host):
        with clock.changed:
            clock.changed.wait_for(lambda: clock.parked == tasks - 1,
                                   BOUND / 3)

    nova = ReservedNova(hook=hook)
    nova.get_compute_service = lambda host, get=nova.get_compute_service: (
        dataclasses.replace(get(host), state="down"))
    rh = reserved(nova, ReservedStore(["r1"]), clock=clock)
    results = []
    threads = [start(lambda: results.append(rh.target()))
               for _ in range(tasks)]
    for thread in threads:
        assert finishes(thread)
    assert results == [None] * tasks
    assert "no reserved host" in rh.why_none()


# -- the metrics of a run ---------------------------------------------------
class HookedResult(InstanceResult):
    """An instance result whose uuid, read a second time by the thread
    that read it first, is the hook."""

    hold: Hold | None = None

    def __getattribute__(self, name):
        if name == "uuid":
            hold = object.__getattribute__(self, "hold")
            reads = object.__getattribute__(self, "reads")
            me = threading.current_thread()
            reads[me] = reads.get(me, 0) + 1
            if hold is not None and reads[me] > 1:
                hold.point()
        return object.__getattribute__(self, name)


def test_an_outcome_told_twice_at_once_counts_once(monkeypatch):
    counted = []

    class Metrics:
        @staticmethod
        def instance_done(outcome, method, seconds):
            counted.append(outcome)

    monkeypatch.setattr("recovery.metrics.METRICS", Metrics)
    outcomes = InstanceOutcomes()
    hold = Hold()
    result = HookedResult(uuid="i-1", name="vm-1", source_host="compute-1",
                          original_state="active", phase=Phase.DONE,
                          outcome=Outcome.RECOVERED)
    result.reads = {}
    result.hold = hold

    def tell():
        outcomes.instance_changed(result)
        hold.reached.set()

    hold_first = start(tell)
    # Unguarded, the first thread stops between "not counted yet" and
    # "counted"; guarded, it reads the uuid once, and ends.
    assert hold.reached.wait(BOUND)
    others = [start(tell) for _ in range(3)]
    for thread in others:
        assert finishes(thread)
    hold.release()
    assert finishes(hold_first)
    assert counted == ["recovered"]
