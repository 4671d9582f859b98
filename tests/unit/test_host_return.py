"""The host-return flow, step by step, against an in-memory Nova."""

import dataclasses
import datetime

import pytest

from recovery import exception
from recovery.flows import host_return
from recovery.models import Migration
from tests.unit.fakes import NOVA_NOW
from tests.unit.fakes import MemoryNova
from tests.unit.fakes import make_env

HOST = "compute-1"
REASON = "host down"    # the disable reason of tests.unit.fakes.settings


class ReturningNova(MemoryNova):
    """A host recovery left forced down and disabled. Its nova-compute
    restarts after ``restart_after`` service listings: its heartbeat
    moves on (still forced down) and its "done" evacuations complete."""

    def __init__(self, evacuations=("done",), restart_after=2,
                 disabled_reason=REASON):
        super().__init__()
        self.add_service(HOST, state="down", forced_down=True,
                         status="disabled")
        self.services[HOST] = dataclasses.replace(
            self.services[HOST], disabled_reason=disabled_reason)
        self.evacuations = list(evacuations)
        self.restart_after = restart_after
        self.restarted = False

    def list_services(self):
        self.restart_after -= 1
        if self.restart_after == 0:
            self.restarted = True
            self.calls.append(("restart", HOST))
            self.services[HOST] = dataclasses.replace(
                self.services[HOST],
                updated_at=NOVA_NOW - datetime.timedelta(seconds=1))
            self.evacuations = ["completed" if s == "done" else s
                                for s in self.evacuations]
        return super().list_services()

    def list_evacuations(self, source_host, changes_since=None):
        self._record("list_evacuations", source_host)
        return [Migration(id=n, uuid=f"m{n}", instance_uuid=f"i{n}",
                          status=status, source_compute=HOST,
                          dest_compute="compute-2")
                for n, status in enumerate(self.evacuations)]

    def force_down(self, service, forced):
        super().force_down(service, forced)
        if not forced and self.restarted:
            self.services[HOST] = dataclasses.replace(self.services[HOST],
                                                      state="up")
        return self.services[HOST]


def order(nova):
    return [c[:2] for c in nova.calls
            if c[0] in ("restart", "force_down", "enable", "disable")]


def test_a_host_returns_in_order():
    nova = ReturningNova()
    env = make_env(nova)
    message = host_return.return_host(env, HOST)
    assert order(nova) == [("restart", HOST), ("force_down", HOST),
                           ("enable", HOST)]
    assert nova.services[HOST].forced_down is False
    assert nova.services[HOST].status == "enabled"
    assert message == f"{HOST} is back: service up, enabled"
    steps = [s for s, state in env.recorder.steps if state == "SUCCESS"]
    assert steps == ["check-evacuations", "await-heartbeat",
                     "clear-force-down", "enable"]


@pytest.mark.parametrize("status", ["accepted", "pre-migrating"])
def test_refused_while_an_evacuation_is_in_flight(status):
    nova = ReturningNova(evacuations=("done", status))
    with pytest.raises(exception.EvacuationsUnfinished,
                       match="still in flight"):
        host_return.return_host(make_env(nova), HOST)
    assert order(nova) == []


def test_a_recent_heartbeat_before_the_restart_is_not_enough():
    """The host died seconds ago: its last heartbeat is young, but it is
    not a new one. Nothing changes until a heartbeat newer than the first
    look arrives."""
    nova = ReturningNova(restart_after=0)
    nova.services[HOST] = dataclasses.replace(
        nova.services[HOST],
        updated_at=NOVA_NOW - datetime.timedelta(seconds=5))
    with pytest.raises(exception.WaitTimeout, match="to heartbeat"):
        host_return.return_host(make_env(nova), HOST)
    assert order(nova) == []


def test_a_host_whose_compute_never_restarts_is_left_alone():
    nova = ReturningNova(restart_after=10 ** 6)
    with pytest.raises(exception.WaitTimeout,
                       match=f"nova-compute on {HOST} to heartbeat"):
        host_return.return_host(make_env(nova), HOST)
    assert order(nova) == []
    assert nova.services[HOST].forced_down


def test_a_host_disabled_for_another_reason_stays_disabled():
    nova = ReturningNova(disabled_reason="RAM replacement, ticket 4711")
    message = host_return.return_host(make_env(nova), HOST)
    assert order(nova) == [("restart", HOST), ("force_down", HOST)]
    assert nova.services[HOST].status == "disabled"
    assert message.endswith("disabled")


def test_a_host_disabled_by_a_process_failure_is_enabled():
    """A process failure disabled it, then the host failed: once back,
    its nova-compute runs again, so recovery's disable is lifted."""
    reason = make_env(MemoryNova()).settings.process_disable_reason
    nova = ReturningNova(disabled_reason=reason)
    host_return.return_host(make_env(nova), HOST)
    assert order(nova) == [("restart", HOST), ("force_down", HOST),
                           ("enable", HOST)]
    assert nova.services[HOST].status == "enabled"
