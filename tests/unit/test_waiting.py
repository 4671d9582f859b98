import pytest

from recovery import exception
from recovery.waiting import wait_for
from tests.unit.fakes import FakeClock


def test_returns_the_first_truthy_value():
    clock = FakeClock()
    answers = iter([None, 0, "ready"])
    assert wait_for(lambda: next(answers), what="x", timeout=10,
                    interval=2, clock=clock) == "ready"
    assert clock.sleeps == [2, 2]


def test_timeout_names_what_it_waited_for():
    clock = FakeClock()
    with pytest.raises(exception.WaitTimeout,
                       match="gave up after 5s waiting for the thing"):
        wait_for(lambda: None, what="the thing", timeout=5, interval=2,
                 clock=clock)
    assert clock.t == 5   # the last sleep is cut to the deadline


def test_check_may_fail_fast():
    def check():
        raise exception.InstanceRecoveryError("broken")

    with pytest.raises(exception.InstanceRecoveryError):
        wait_for(check, what="x", timeout=5, interval=1, clock=FakeClock())
