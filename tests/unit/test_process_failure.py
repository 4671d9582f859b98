"""The process-failure flow (PROCESS notifications), against an in-memory
Nova with a clock that never sleeps."""

import dataclasses
import datetime

import pytest

from recovery import exception
from recovery.flows import process_failure
from recovery.notification import Kind
from recovery.notification import Notification
from recovery.notification import Status
from tests.unit.fakes import FakeClock
from tests.unit.fakes import MemoryNova
from tests.unit.fakes import make_env

HOST = "compute-1"
REASON = "Process failure: nova-compute stopped; disabled by recovery"
HOST_FAILURE_REASON = "host down"   # tests.unit.fakes.settings
WHEN = datetime.datetime(2026, 11, 22, tzinfo=datetime.timezone.utc)


class LaggingNova(MemoryNova):
    """Nova shows a disable or enable after ``lag`` more looks at the
    service, and the service comes up after ``up_after`` looks (None:
    never)."""

    def __init__(self, lag=2, up_after=None):
        super().__init__()
        self.lag, self.up_after = lag, up_after
        self.shown: dict[str, list] = {}

    def get_compute_service(self, host):
        super().get_compute_service(host)
        if self.up_after is not None:
            self.up_after -= 1
            if self.up_after < 0:
                self.services[host] = dataclasses.replace(
                    self.services[host], state="up")
        pending = self.shown.get(host)
        if pending is not None:
            pending[0] -= 1
            if pending[0] < 0:
                self.services[host] = pending[1]
                del self.shown[host]
        return self.services[host]

    def disable(self, service, reason):
        self._delay(service, super().disable, reason)

    def enable(self, service):
        self._delay(service, super().enable)

    def _delay(self, service, change, *args):
        before = self.services[service.host]
        change(service, *args)
        self.shown[service.host] = [self.lag, self.services[service.host]]
        self.services[service.host] = before


def nova_with(state="up", status="enabled", reason=None, **kwargs):
    nova = LaggingNova(**kwargs)
    nova.add_service(HOST, state=state, status=status)
    nova.services[HOST] = dataclasses.replace(nova.services[HOST],
                                              disabled_reason=reason)
    return nova


def notification(event, process="nova-compute"):
    return Notification(
        id=1, uuid="n-1", type="PROCESS", kind=Kind.PROCESS, hostname=HOST,
        generated_time=WHEN, origin="api",
        payload={"process_name": process, "event": event},
        status=Status.RUNNING, created_at=WHEN, updated_at=WHEN)


def run(nova, event, clock=None, **overrides):
    env = make_env(nova, clock or FakeClock(), **overrides)
    return env, process_failure.handle_process_event(env, notification(event))


def changes(nova):
    return [c[:3] for c in nova.calls if c[0] in ("disable", "enable",
                                                  "force_down")]


def steps(env):
    return [(step, getattr(state, "value", state))
            for step, state in env.recorder.steps]


# -- STOPPED ------------------------------------------------------------------
def test_stopped_disables_with_the_reason_and_confirms():
    nova = nova_with(state="down")
    clock = FakeClock()
    env, message = run(nova, "STOPPED", clock,
                       process_disable_reason=REASON)
    assert changes(nova) == [("disable", HOST, REASON)]
    service = nova.services[HOST]
    assert (service.status, service.disabled_reason) == ("disabled", REASON)
    assert message == (f"nova-compute stopped on {HOST}: nova-compute "
                       f"service disabled")
    assert steps(env) == [("disable", "RUNNING"), ("disable", "SUCCESS")]
    # It waited for Nova to show the disable, polling.
    assert clock.sleeps == [1.0, 1.0]


def test_the_default_reason_is_the_process_failure_one():
    nova = nova_with(state="down")
    run(nova, "STOPPED")
    assert nova.services[HOST].disabled_reason == REASON


def test_stopped_never_touches_force_down_or_anything_else():
    nova = nova_with(state="down")
    run(nova, "STOPPED")
    assert set(nova.names()) == {"get_compute_service", "disable"}
    assert nova.services[HOST].forced_down is False


@pytest.mark.parametrize("reason", ["RAM replacement", HOST_FAILURE_REASON,
                                    REASON, None])
def test_an_already_disabled_service_is_left_as_it_is(reason):
    nova = nova_with(state="down", status="disabled", reason=reason)
    _, message = run(nova, "STOPPED")
    assert changes(nova) == []
    assert nova.services[HOST].disabled_reason == reason
    assert message.endswith(f"already disabled ({reason!r}): left as it is")


def test_a_disable_nova_does_not_show_in_time_is_an_error():
    nova = nova_with(state="down", lag=10 ** 6)
    with pytest.raises(exception.WaitTimeout,
                       match=f"gave up after 10s waiting for Nova to report "
                             f"nova-compute on {HOST} disabled"):
        run(nova, "STOPPED")


def test_an_unknown_host_is_refused():
    nova = LaggingNova()
    with pytest.raises(exception.UnknownHost):
        run(nova, "STOPPED")


# -- STARTED ------------------------------------------------------------------
def test_started_waits_for_up_then_enables():
    nova = nova_with(state="down", status="disabled", reason=REASON,
                     up_after=3)
    clock = FakeClock()
    env, message = run(nova, "STARTED", clock)
    assert changes(nova) == [("enable", HOST)]
    service = nova.services[HOST]
    assert (service.state, service.status) == ("up", "enabled")
    assert message == (f"nova-compute started on {HOST}: nova-compute "
                       f"service enabled")
    assert [s for s, state in steps(env) if state == "SUCCESS"] == [
        "await-service-up", "enable"]
    # The enable came only once Nova reported the service up.
    up_at = [n for n, c in enumerate(nova.calls) if c[0] == "enable"][0]
    assert up_at > 3


@pytest.mark.parametrize("reason", ["RAM replacement", HOST_FAILURE_REASON,
                                    None])
def test_started_leaves_a_service_disabled_for_another_reason(reason):
    nova = nova_with(state="up", status="disabled", reason=reason)
    _, message = run(nova, "STARTED")
    assert changes(nova) == []
    assert nova.services[HOST].status == "disabled"
    assert f"left disabled: it was disabled for another reason " \
           f"({reason!r})" in message


def test_started_with_the_service_enabled_changes_nothing():
    nova = nova_with(state="up")
    _, message = run(nova, "STARTED")
    assert changes(nova) == []
    assert message.endswith("already enabled")


def test_started_times_out_when_the_service_never_comes_up():
    nova = nova_with(state="down", status="disabled", reason=REASON)
    clock = FakeClock()
    env = make_env(nova, clock)
    with pytest.raises(exception.WaitTimeout,
                       match=f"gave up after 10s waiting for Nova to report "
                             f"nova-compute on {HOST} up"):
        process_failure.handle_process_event(env, notification("STARTED"))
    assert changes(nova) == []
    assert nova.services[HOST].status == "disabled"
    assert clock.t == pytest.approx(10.0)
    assert ("await-service-up", "FAILURE") in steps(env)


def test_started_on_a_forced_down_host_says_why_it_waits():
    nova = nova_with(state="down", status="disabled", reason=REASON)
    nova.services[HOST] = dataclasses.replace(nova.services[HOST],
                                              forced_down=True)
    with pytest.raises(exception.WaitTimeout,
                       match="forced down, by a host failure recovery"):
        run(nova, "STARTED")
    assert changes(nova) == []


def test_the_process_and_host_failure_reasons_do_not_mix():
    """A host failure's disable survives a process STARTED; a process
    failure's disable is the only one it lifts."""
    nova = nova_with(state="down")
    run(nova, "STOPPED")
    nova.services[HOST] = dataclasses.replace(nova.services[HOST],
                                              state="up")
    run(nova, "STARTED")
    assert nova.services[HOST].status == "enabled"
