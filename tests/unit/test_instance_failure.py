"""The instance-failure flow (VM notifications), against an in-memory
Nova and a real store, with a clock that never sleeps."""

import dataclasses
import datetime

import pytest
from oslo_config import cfg

from recovery import conf as recovery_conf
from recovery import exception
from recovery.db.store import open_store
from recovery.engine.lease import Lease
from recovery.engine.runner import StoreRecorder
from recovery.engine.runner import restart_history
from recovery.flows import instance_failure
from recovery.flows.context import Settings
from recovery.notification import Kind
from recovery.notification import Status
from tests.unit.fakes import FakeClock
from tests.unit.fakes import MemoryNova
from tests.unit.fakes import make_env
from tests.unit.runs import LEASE
from tests.unit.runs import finish_at
from tests.unit.runs import take_at

HOST = "compute-1"
VM = "6f1d7a3e-9a9c-4a55-8f0e-0a1c2b3d4e5f"
OTHER_VM = "0b8c2d4e-1111-4a55-8f0e-0a1c2b3d4e5f"
LOCK_REASON = "Locked by recovery: instance-failure restart"
HA = {"HA_Enabled": "True"}
MUTATING = {"lock", "unlock", "stop", "start", "reset_state", "evacuate",
            "disable", "enable", "force_down"}
OWNER = "engine-a:1"


class LaggingNova(MemoryNova):
    """Stop and start set their task_state; the new vm_state shows after
    ``lag`` more looks at the instance (``None``: never)."""

    def __init__(self, lag: int | None = 2, start_ends: str = "active"):
        super().__init__()
        self.lag = lag
        self.start_ends = start_ends
        self.pending: dict[str, list] = {}

    def get_server(self, uuid):
        if uuid not in self.servers:
            self._record("get_server", uuid)
            raise exception.NovaNotFound(f"Instance {uuid} could not be "
                                         f"found", status=404)
        pending = self.pending.get(uuid)
        if pending is not None and self.lag is not None:
            pending[0] -= 1
            if pending[0] < 0:
                server = self.servers[uuid]
                server.vm_state, server.task_state = pending[1], None
                del self.pending[uuid]
        return super().get_server(uuid)

    def stop(self, uuid):
        self._record("stop", uuid)
        self._begin(uuid, "powering-off", "stopped")

    def start(self, uuid):
        self._record("start", uuid)
        self._begin(uuid, "powering-on", self.start_ends)

    def _begin(self, uuid, task_state, vm_state):
        self.servers[uuid].task_state = task_state
        self.pending[uuid] = [self.lag or 0, vm_state]


@pytest.fixture
def store(tmp_path):
    store = open_store(f"sqlite:///{tmp_path}/s.sqlite")
    yield store
    store.close()


@pytest.fixture
def clock():
    return FakeClock()


def nova_with(vm_state="active", lag=2, host=HOST, **fields):
    nova = LaggingNova(lag=lag)
    nova.add_service(HOST, state="up")
    fields.setdefault("metadata", dict(HA))
    nova.add_server(VM, host=host, vm_state=vm_state, **fields)
    return nova


def vm_notification(store, clock, instance=VM, *, status=None,
                    at=None):
    """A VM notification as the engine holds it: claimed, running; or,
    with ``status``, one that ended so, started at ``at``."""
    now = at or clock.now()
    item = store.add(type="VM", kind=Kind.INSTANCE, hostname=HOST,
                     generated_time=now,
                     payload={"instance_uuid": instance,
                              "event": "LIFECYCLE",
                              "vir_domain_event": "STOPPED_FAILED"},
                     origin="api", status=Status.NEW, now=now)
    taken = take_at(store, item, OWNER, now)
    if status is not None:
        finish_at(store, taken, OWNER, status, "done", now)
    return taken


def restart(nova, store, clock, notification=None, **overrides):
    env = make_env(nova, clock, **overrides)
    notification = notification or vm_notification(store, clock)
    return env, restart_instance(env, store, notification)


def restart_instance(env, store, notification):
    """The flow, given what the engine reads for it from the store."""
    return instance_failure.restart_instance(
        env, notification,
        restarts=restart_history(env, store, notification),
        steps=store.step_events(notification.uuid))


def mutations(nova):
    return [c[0] for c in nova.calls if c[0] in MUTATING]


def steps(env):
    return [(step, str(state.value if hasattr(state, "value") else state))
            for step, state in env.recorder.steps]


def succeeded(env):
    return [step for step, state in steps(env) if state == "SUCCESS"]


# -- restarts -----------------------------------------------------------------
def test_an_instance_nova_still_shows_active_is_stopped_then_started(
        store, clock):
    nova = nova_with("active")
    env, message = restart(nova, store, clock)
    assert mutations(nova) == ["lock", "stop", "start", "unlock"]
    assert ("lock", VM, LOCK_REASON) in nova.calls
    server = nova.servers[VM]
    assert (server.vm_state, server.task_state) == ("active", None)
    assert not server.locked
    assert message == f"instance {VM} (vm-{VM}) restarted: ACTIVE on {HOST}"
    assert succeeded(env) == ["lock", "stop", "start", "confirm-active",
                              "unlock"]
    # It waited for the stop, then for ACTIVE, polling without busy loops.
    assert clock.sleeps and set(clock.sleeps) == {1.0}


def test_a_stopped_instance_is_only_started(store, clock):
    nova = nova_with("stopped")
    env, _ = restart(nova, store, clock)
    assert mutations(nova) == ["lock", "start", "unlock"]
    assert nova.servers[VM].vm_state == "active"
    assert dict(steps(env))["stop"] == "SUCCESS"


def test_an_instance_in_error_is_stopped_then_started(store, clock):
    nova = nova_with("error")
    restart(nova, store, clock)
    assert mutations(nova) == ["lock", "stop", "start", "unlock"]
    assert nova.servers[VM].vm_state == "active"


def test_a_task_of_novas_own_is_waited_for_first(store, clock):
    """Nova's power-state sync is stopping the crashed guest: the flow
    waits for it, then only starts."""
    nova = nova_with("active", task_state="powering-off")
    nova.pending[VM] = [3, "stopped"]
    restart(nova, store, clock)
    assert mutations(nova) == ["lock", "start", "unlock"]


def test_a_stop_refused_because_nova_is_stopping_it_is_waited_for(
        store, clock):
    class SyncingNova(LaggingNova):
        def stop(self, uuid):
            self._record("stop", uuid)
            # Nova's sync got there first.
            self._begin(uuid, "powering-off", "stopped")
            raise exception.NovaConflict("task_state powering-off",
                                         status=409)

    nova = SyncingNova()
    nova.add_service(HOST, state="up")
    nova.add_server(VM, host=HOST, metadata=dict(HA))
    restart(nova, store, clock)
    assert mutations(nova) == ["lock", "stop", "start", "unlock"]
    assert nova.servers[VM].vm_state == "active"


def test_a_stop_refused_for_another_reason_fails_and_unlocks(store, clock):
    nova = nova_with("active")
    nova.fail("stop", VM, exception.NovaConflict("Instance is busy",
                                                 status=409))
    env = make_env(nova, clock)
    with pytest.raises(exception.NovaConflict, match="busy"):
        restart_instance(env, store, vm_notification(store, clock))
    assert mutations(nova) == ["lock", "stop", "unlock"]
    assert not nova.servers[VM].locked
    assert ("stop", "FAILURE") in steps(env)
    assert ("unlock", "SUCCESS") in steps(env)


def test_a_lost_lease_stops_the_restart_and_leaves_the_lock(store, clock):
    """Another engine owns the run now: this one asks Nova nothing more,
    not even the unlock (the new owner finishes and unlocks)."""
    nova = nova_with("active")
    nova.fail("stop", VM, exception.LeaseLost("another engine owns it"))
    env = make_env(nova, clock)
    with pytest.raises(exception.LeaseLost):
        restart_instance(env, store, vm_notification(store, clock))
    assert mutations(nova) == ["lock", "stop"]
    assert nova.servers[VM].locked


def test_an_instance_that_never_comes_up_times_out_and_is_unlocked(
        store, clock):
    nova = nova_with("stopped", lag=None)
    env = make_env(nova, clock, instance_recovery_timeout=30.0)
    with pytest.raises(exception.WaitTimeout,
                       match=f"gave up after 30s waiting for instance "
                             f"{VM} to be ACTIVE"):
        restart_instance(env, store, vm_notification(store, clock))
    assert mutations(nova) == ["lock", "start", "unlock"]
    assert not nova.servers[VM].locked
    assert ("confirm-active", "FAILURE") in steps(env)
    assert clock.t == pytest.approx(30.0)


def test_an_instance_that_goes_to_error_fails_at_once(store, clock):
    nova = nova_with("stopped")
    nova.start_ends = "error"
    nova.servers[VM].fault = "Disk full"
    env = make_env(nova, clock)
    with pytest.raises(exception.InstanceRecoveryError,
                       match="went to error while starting: Disk full"):
        restart_instance(env, store, vm_notification(store, clock))
    assert mutations(nova)[-1] == "unlock"
    assert clock.t < 10


def test_a_start_that_does_not_take_fails_at_once(store, clock):
    nova = nova_with("stopped")
    nova.start_ends = "stopped"
    with pytest.raises(exception.InstanceRecoveryError,
                       match="did not start"):
        restart(nova, store, clock)


# -- left alone ---------------------------------------------------------------
@pytest.mark.parametrize("vm_state, why", [
    ("paused", "paused"), ("rescued", "rescue"), ("suspended", "suspended"),
    ("shelved", "shelved"), ("shelved_offloaded", "offloaded"),
    ("resized", "confirm or revert"), ("building", "'building'"),
    # Nova's vm_state is "soft-delete" (the table once said "soft-deleted").
    ("soft-delete", "soft-deleted; only a restore"),
])
def test_a_state_someone_chose_is_ignored(store, clock, vm_state, why):
    nova = nova_with(vm_state)
    with pytest.raises(exception.Ignored, match=why):
        restart(nova, store, clock)
    assert mutations(nova) == []


def test_an_instance_that_is_not_ha_enabled_is_ignored(store, clock):
    nova = nova_with("stopped", metadata={})
    with pytest.raises(exception.Ignored,
                       match="not HA-enabled .* process_all_instances is "
                             "false"):
        restart(nova, store, clock)
    assert mutations(nova) == []


def test_process_all_instances_restarts_it_anyway(store, clock):
    nova = nova_with("stopped", metadata={"HA_Enabled": "no"})
    restart(nova, store, clock, process_all_instances=True)
    assert mutations(nova) == ["lock", "start", "unlock"]


def test_a_deleted_instance_is_ignored(store, clock):
    nova = nova_with("active")
    del nova.servers[VM]
    with pytest.raises(exception.Ignored, match="no longer exists"):
        restart(nova, store, clock)
    assert mutations(nova) == []


def test_an_instance_that_moved_is_ignored(store, clock):
    nova = nova_with("active", host="compute-2")
    with pytest.raises(exception.Ignored,
                       match="no longer on compute-1 .* on compute-2"):
        restart(nova, store, clock)
    assert mutations(nova) == []


def test_an_instance_that_moves_while_a_task_ends_is_ignored_and_unlocked(
        store, clock):
    nova = nova_with("active", task_state="migrating")
    nova.pending[VM] = [2, "active"]

    def moved(uuid, original=nova.get_server):
        server = original(uuid)
        if server.task_state is None:
            nova.servers[VM].host = "compute-2"
            server = original(uuid)
        return server

    nova.get_server = moved
    with pytest.raises(exception.Ignored, match="no longer on"):
        restart(nova, store, clock)
    assert mutations(nova) == ["lock", "unlock"]


def test_a_host_whose_compute_is_down_is_an_error_and_nothing_changes(
        store, clock):
    nova = nova_with("stopped")
    nova.add_service(HOST, state="down", forced_down=True)
    with pytest.raises(exception.RecoveryError,
                       match="nova-compute on compute-1 is down "
                             r"\(forced down\)"):
        restart(nova, store, clock)
    assert mutations(nova) == []


# -- locks --------------------------------------------------------------------
def test_someone_elses_lock_is_kept_and_never_lifted(store, clock):
    nova = nova_with("active", locked=True, locked_reason="owner's lock")
    env, message = restart(nova, store, clock)
    assert mutations(nova) == ["stop", "start"]
    server = nova.servers[VM]
    assert server.locked and server.locked_reason == "owner's lock"
    assert server.vm_state == "active"
    assert message.endswith("its lock (\"owner's lock\") is kept")
    assert "unlock" not in [step for step, _ in steps(env)]


def test_a_lock_left_by_an_earlier_run_is_lifted(store, clock):
    nova = nova_with("stopped", locked=True, locked_reason=LOCK_REASON)
    restart(nova, store, clock)
    assert mutations(nova) == ["start", "unlock"]
    assert not nova.servers[VM].locked


def test_a_lock_left_by_an_earlier_run_is_lifted_when_ignored(store, clock):
    nova = nova_with("paused", locked=True, locked_reason=LOCK_REASON)
    with pytest.raises(exception.Ignored):
        restart(nova, store, clock)
    assert mutations(nova) == ["unlock"]


def test_an_unlock_that_fails_after_a_restart_is_an_error(store, clock):
    nova = nova_with("stopped")
    nova.fail("unlock", VM, exception.NovaError("Nova is down", status=503))
    env = make_env(nova, clock)
    with pytest.raises(exception.InstanceRecoveryError,
                       match=f"left locked, unlock failed: Nova is down; "
                             f"it is ACTIVE again on {HOST}"):
        restart_instance(env, store, vm_notification(store, clock))
    assert ("unlock", "FAILURE") in steps(env)
    assert nova.servers[VM].locked_reason == LOCK_REASON


def test_an_unlock_that_fails_after_a_failure_reports_both(store, clock):
    nova = nova_with("stopped", lag=None)
    nova.fail("unlock", VM, exception.NovaError("Nova is down", status=503))
    env = make_env(nova, clock, instance_recovery_timeout=5.0)
    with pytest.raises(exception.InstanceRecoveryError,
                       match="unlock failed: Nova is down; the restart "
                             "failed: gave up after 5s") as caught:
        restart_instance(env, store, vm_notification(store, clock))
    # The unlock's error, raised while the timeout was propagating.
    assert isinstance(caught.value.__cause__.__context__,
                      exception.WaitTimeout)
    assert nova.servers[VM].locked_reason == LOCK_REASON


# -- retries ------------------------------------------------------------------
def test_a_retry_after_the_start_only_confirms_and_unlocks(store, clock):
    """The first attempt started the instance, then its unlock failed:
    the retry finds it ACTIVE and does not stop and start it again."""
    nova = nova_with("stopped")
    nova.fail("unlock", VM, exception.NovaError("Nova is down", status=503))
    notification = vm_notification(store, clock)
    recorder_env = make_env(nova, clock)
    # The attempts journal their steps, as the engine's recorder does.
    recorder_env = journaling(recorder_env, store, notification)
    with pytest.raises(exception.InstanceRecoveryError):
        restart_instance(recorder_env, store, notification)
    nova.calls.clear()
    retry = journaling(make_env(nova, clock), store, notification)
    message = restart_instance(retry, store, notification)
    assert mutations(nova) == ["unlock"]
    assert "restarted: ACTIVE" in message
    assert not nova.servers[VM].locked


def test_a_retry_of_an_instance_that_died_again_restarts_it(store, clock):
    nova = nova_with("stopped", lag=None)
    notification = vm_notification(store, clock)
    env = journaling(make_env(nova, clock, instance_recovery_timeout=5.0),
                     store, notification)
    with pytest.raises(exception.WaitTimeout):
        restart_instance(env, store, notification)
    # The start never took; Nova ended the task with the guest stopped.
    nova.pending.clear()
    nova.servers[VM].task_state = None
    nova.lag = 1
    nova.calls.clear()
    retry = journaling(make_env(nova, clock), store, notification)
    restart_instance(retry, store, notification)
    assert mutations(nova) == ["lock", "start", "unlock"]


def journaling(env, store, notification):
    """``env`` with a recorder that journals step events to the store, as
    the holder of ``notification``'s run."""
    lease = Lease(notification, OWNER, LEASE, env.clock,
                  env.clock.monotonic())
    return dataclasses.replace(env, recorder=StoreRecorder(
        store, lease, env.clock, env.recorder, notification=notification))


# -- the crash-loop brake --------------------------------------------------
def ago(clock, seconds):
    return clock.now() - datetime.timedelta(seconds=seconds)


def test_a_crash_loop_gives_up_without_asking_nova(store, clock):
    clock.t = 10_000
    nova = nova_with("stopped")
    for seconds in (3000, 2000, 100):
        vm_notification(store, clock, status=Status.FINISHED,
                        at=ago(clock, seconds))
    with pytest.raises(exception.GaveUp,
                       match=r"restarted 3 times in the last 3600 s .*"
                             r"not restarting again: investigate the guest"):
        restart(nova, store, clock)
    assert nova.calls == []


def test_restarts_outside_the_window_or_of_others_do_not_count(
        store, clock):
    clock.t = 10_000
    nova = nova_with("stopped")
    vm_notification(store, clock, status=Status.FINISHED,
                    at=ago(clock, 4000))
    vm_notification(store, clock, status=Status.FINISHED,
                    at=ago(clock, 100))
    vm_notification(store, clock, OTHER_VM, status=Status.FINISHED,
                    at=ago(clock, 100))
    vm_notification(store, clock, status=Status.IGNORED, at=ago(clock, 50))
    vm_notification(store, clock, status=Status.FAILED, at=ago(clock, 40))
    restart(nova, store, clock, max_restarts_per_window=2)
    assert mutations(nova) == ["lock", "start", "unlock"]


def test_the_brake_follows_its_options(store, clock):
    clock.t = 10_000
    nova = nova_with("stopped")
    for seconds in (300, 200):
        vm_notification(store, clock, status=Status.FINISHED,
                        at=ago(clock, seconds))
    first = vm_notification(store, clock)
    with pytest.raises(exception.GaveUp, match="restarted 2 times in the "
                                               "last 600 s"):
        restart(nova, store, clock, first, max_restarts_per_window=2,
                restart_window=600.0)
    # As the engine records it: the host's next run may start.
    finish_at(store, first, OWNER, Status.FAILED, "crash loop", clock.now())
    # A window of 0 turns the brake off.
    restart(nova, store, clock, max_restarts_per_window=1,
            restart_window=0.0)
    assert mutations(nova) == ["lock", "start", "unlock"]


def test_its_own_earlier_attempts_are_not_counted(store, clock):
    nova = nova_with("stopped")
    notification = vm_notification(store, clock)
    finish_at(store, notification, OWNER, Status.FINISHED, "x", clock.now())
    restart(nova, store, clock, notification, max_restarts_per_window=1)
    assert mutations(nova) == ["lock", "start", "unlock"]


# -- options ------------------------------------------------------------------
def test_the_options_reach_the_flows_with_their_defaults():
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf(args=[])
    settings = Settings.from_conf(conf)
    group = conf.instance_failure
    assert (settings.process_all_instances, settings.instance_recovery_timeout,
            settings.max_restarts_per_window, settings.restart_window) == (
        group.process_all_instances, group.recovery_timeout,
        group.max_restarts_per_window, group.restart_window)
    assert settings.instance_lock_reason == LOCK_REASON
    assert settings.instance_lock_reason != settings.lock_reason
    assert settings.process_disable_reason != settings.disable_reason
    conf.set_override("max_restarts_per_window", 5, "instance_failure")
    conf.set_override("disable_reason", "pf", "process_failure")
    settings = Settings.from_conf(conf)
    assert (settings.max_restarts_per_window,
            settings.process_disable_reason) == (5, "pf")


def test_a_late_lock_is_lifted_once_it_can_no_longer_arrive(store, clock):
    """The lock times out and is retried; the first one reaches Nova
    after the unlock. The flow looks again once it cannot arrive."""
    nova = nova_with(vm_state="stopped")
    nova.clock = clock
    nova.fail("lock", VM, exception.NovaUnreachable("timed out"))
    nova.arrives(20, "lock", VM, reason=LOCK_REASON)
    env, _ = restart(nova, store, clock)
    assert not nova.servers[VM].locked
    assert mutations(nova)[-1] == "unlock"
    assert [c[0] for c in nova.calls].count("unlock") == 2
    assert clock.t >= env.settings.late_request_window


def test_a_late_lock_of_someone_else_is_kept(store, clock):
    nova = nova_with(vm_state="stopped")
    nova.clock = clock
    nova.fail("lock", VM, exception.NovaUnreachable("timed out"))
    nova.arrives(20, "lock", VM, reason="operator")
    restart(nova, store, clock)
    assert nova.servers[VM].locked_reason == "operator"
    assert [c[0] for c in nova.calls].count("unlock") == 1
