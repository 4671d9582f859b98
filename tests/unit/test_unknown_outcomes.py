"""Requests whose outcome is unknown (a timeout, a reset after sending, a
5xx): an evacuate is never sent again while the first may still reach
Nova, and a lock that may arrive after the unlock is looked for and
lifted (issue 33). The clock is the fake one: waits cost no time."""

import datetime

from recovery import exception
from recovery.flows import host_failure as hf
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import Phase
from tests.unit.fakes import FakeClock
from tests.unit.fakes import MemoryNova
from tests.unit.fakes import SyncPool
from tests.unit.fakes import make_env

HOST = "compute-1"
# [nova] timeout (30) + late_request_margin (30), the defaults.
WINDOW = 60.0


def cloud(*uuids):
    nova, clock = MemoryNova(), FakeClock()
    nova.clock = clock
    nova.add_service(HOST, state="down")
    for uuid in uuids:
        nova.add_server(uuid)
    return nova, clock


def recover(nova, clock, journal=()):
    env = make_env(nova, clock)
    return hf.recover_host(env, HOST, pool_factory=SyncPool,
                           journal=journal)


def sent(nova, method, uuid):
    """The calls of ``method`` for ``uuid`` the facade took."""
    return [c for c in nova.calls if c[0] == method and c[1] == uuid]


def evacuations_of(nova, uuid):
    return [m for m in nova.migrations if m["uuid"] == uuid]


# -- evacuate ----------------------------------------------------------------
def test_a_late_delivered_evacuate_is_not_followed_by_a_second_one():
    nova, clock = cloud("a")
    nova.deliver_late("evacuate", "a", after=20)
    report = recover(nova, clock)
    [result] = report.instances
    assert result.outcome is Outcome.RECOVERED, result.reason
    assert len(sent(nova, "evacuate", "a")) == 1
    assert len(evacuations_of(nova, "a")) == 1
    assert nova.servers["a"].host == "compute-2"


def test_an_unknown_evacuate_is_sent_again_only_once_it_cannot_arrive():
    nova, clock = cloud("a")
    nova.fail("evacuate", "a", exception.NovaUnreachable("timed out"))
    report = recover(nova, clock)
    [result] = report.instances
    assert result.outcome is Outcome.RECOVERED, result.reason
    assert len(sent(nova, "evacuate", "a")) == 2
    assert clock.t >= WINDOW
    assert len(evacuations_of(nova, "a")) == 1


def test_a_5xx_from_in_front_of_nova_is_decided_by_nova_and_the_window():
    nova, clock = cloud("a")
    nova.fail("evacuate", "a", exception.NovaError("busy", status=503))
    report = recover(nova, clock)
    assert report.instances[0].outcome is Outcome.RECOVERED
    assert len(sent(nova, "evacuate", "a")) == 2
    assert clock.t >= WINDOW


def test_a_5xx_of_nova_itself_is_decided_at_once():
    """With Nova's request id, the request ended in Nova: what Nova shows
    now is final, and nothing is waited out."""
    nova, clock = cloud("a")
    nova.fail("evacuate", "a", exception.NovaError(
        "busy", status=503, request_id="req-1"))
    report = recover(nova, clock)
    assert report.instances[0].outcome is Outcome.RECOVERED
    assert len(sent(nova, "evacuate", "a")) == 2
    assert clock.t < 10


def test_an_evacuate_never_sent_is_sent_again_without_waiting():
    nova, clock = cloud("a")
    nova.fail("evacuate", "a",
              exception.NovaUnreachable("refused", not_sent=True))
    report = recover(nova, clock)
    assert report.instances[0].outcome is Outcome.RECOVERED
    assert len(sent(nova, "evacuate", "a")) == 2
    assert clock.t < 10


def test_the_send_time_is_journaled_before_the_evacuate():
    nova, clock = cloud("a")
    env = make_env(nova, clock)
    seen = []

    def instance_changed(result):
        seen.append((result.phase, result.evacuate_sent_at,
                     len(sent(nova, "evacuate", "a"))))

    env.recorder.instance_changed = instance_changed
    hf.recover_host(env, HOST, pool_factory=SyncPool)
    [(stamp, count)] = [(t, n) for phase, t, n in seen
                        if phase is Phase.EVACUATING]
    assert stamp is not None and count == 0


def test_a_resumed_run_waits_out_an_evacuate_that_may_be_in_flight():
    """The engine died just after it sent an evacuate that is still held
    in a load balancer: the resumed run sees nothing yet, and waits."""
    nova, clock = cloud("a")
    nova.arrives(25, "evacuate", "a")
    prior = InstanceResult(uuid="a", name="vm-a", source_host=HOST,
                           original_state="active",
                           phase=Phase.EVACUATING, locked_by_us=True,
                           migration_floor=0,
                           evacuate_sent_at=clock.now())
    report = recover(nova, clock, journal=[prior])
    [result] = report.instances
    assert result.outcome is Outcome.RECOVERED, result.reason
    assert sent(nova, "evacuate", "a") == []
    assert len(evacuations_of(nova, "a")) == 1


def test_a_resumed_run_sends_again_once_the_window_has_passed():
    nova, clock = cloud("a")
    clock.t = 1000.0
    prior = InstanceResult(
        uuid="a", name="vm-a", source_host=HOST, original_state="active",
        phase=Phase.EVACUATING, locked_by_us=True, migration_floor=0,
        evacuate_sent_at=clock.now() - datetime.timedelta(seconds=WINDOW))
    report = recover(nova, clock, journal=[prior])
    assert report.instances[0].outcome is Outcome.RECOVERED
    assert len(sent(nova, "evacuate", "a")) == 1
    assert clock.t < 1010


# -- lock --------------------------------------------------------------------
def test_a_late_delivered_lock_leaves_no_lock_behind():
    nova, clock = cloud("a")
    nova.deliver_late("lock", "a", after=20)
    report = recover(nova, clock)
    [result] = report.instances
    assert result.outcome is Outcome.RECOVERED, result.reason
    locking = {"lock", "unlock", "late_lock", "list_locked_servers"}
    assert [c[0] for c in nova.calls if c[0] in locking] == [
        "lock", "lock", "unlock", "late_lock", "list_locked_servers",
        "unlock"]
    assert not nova.servers["a"].locked
    assert result.lock_uncertain_at is None
    assert clock.t >= WINDOW


def test_a_lock_of_someone_else_is_never_lifted_by_the_sweep():
    """The lock's outcome is unknown; before the sweep, an operator
    locks the instance with a reason of their own."""
    nova, clock = cloud("a")
    nova.fail("lock", "a", exception.NovaUnreachable("timed out"))
    nova.arrives(30, "lock", "a", reason="operator: disk check")
    recover(nova, clock)
    assert nova.servers["a"].locked_reason == "operator: disk check"
    assert [c[0] for c in nova.calls].count("unlock") == 1


def test_a_run_resumed_while_locking_looks_for_a_late_lock():
    nova, clock = cloud("a")
    prior = InstanceResult(uuid="a", name="vm-a", source_host=HOST,
                           original_state="active", phase=Phase.LOCKING)
    nova.arrives(40, "lock", "a")
    recover(nova, clock, journal=[prior])
    assert not nova.servers["a"].locked
    assert clock.t >= WINDOW


def test_every_run_ends_with_a_sweep_of_its_locks():
    """An unlock that failed is retried by the sweep; no wait is needed."""
    nova, clock = cloud("a")
    nova.fail("unlock", "a", exception.NovaConflict("no", status=409))
    report = recover(nova, clock)
    assert not nova.servers["a"].locked
    assert report.instances[0].locked_by_us is False
    assert [c[0] for c in nova.calls].count("unlock") == 2
    assert report.instances[0].outcome is Outcome.RECOVERED
    assert clock.t < 10


def test_an_instance_is_reported_left_locked_only_if_it_is():
    nova, clock = cloud("a", "b")
    down = exception.NovaUnreachable("down")
    nova.fail("unlock", "a", down, down)
    report = recover(nova, clock)
    a, b = sorted(report.instances, key=lambda r: r.uuid)
    assert a.outcome is Outcome.FAILED and a.locked_by_us
    assert a.reason == "left locked, unlock failed: down"
    assert nova.servers["a"].locked
    assert b.outcome is Outcome.RECOVERED and not nova.servers["b"].locked


def test_an_unlock_whose_answer_was_lost_is_not_reported_left_locked():
    """The unlock reached Nova; its answer did not come back."""
    nova, clock = cloud("a")
    original = nova.unlock

    def unlock_then_drop(uuid):
        original(uuid)
        raise exception.NovaUnreachable("connection reset")

    nova.unlock = unlock_then_drop
    report = recover(nova, clock)
    [result] = report.instances
    assert result.outcome is Outcome.RECOVERED
    assert not result.locked_by_us
    assert not nova.servers["a"].locked
