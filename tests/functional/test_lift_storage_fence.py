"""host-return lifts a host's storage fences, against the fake Nova over
HTTP: only once every evacuation from the host is completed (its
nova-compute destroyed the evacuated guests), before force-down is
cleared, each recorded; never before, and the step says why it waits;
a host without a storage fence returns as it always did."""

import dataclasses

import pytest

from recovery import exception
from recovery.engine import runner
from recovery.events import EventKind
from recovery.events import News
from recovery.fencing import BmcSettings
from recovery.fencing import Fencer
from recovery.fencing import HostFence
from recovery.fencing import Secret
from recovery.fencing import Timing
from recovery.fencing.fencer import DeviceKind
from recovery.fencing.levels import Device
from recovery.fencing.levels import Level
from recovery.flows import base
from recovery.flows import host_return
from recovery.notification import Kind
from recovery.notification import Notification
from recovery.notification import Status
from recovery.nova import load_nova
from tests.functional.test_api import START
from tests.functional.test_nova_facade import admin_token_conf
from tests.unit.fakes import FakeClock
from tests.unit.fakes import make_env

HOST = "compute-1"
REASON = "host down"    # tests.unit.fakes.settings' disable reason


@dataclasses.dataclass
class Change:
    step: str
    state: str
    message: str
    news: News | None


class Recorder:
    """Every step change, with its message and news."""

    def __init__(self) -> None:
        self.changes: list[Change] = []

    def step_changed(self, step, state, message, *, news=None,
                     instances=None) -> None:
        self.changes.append(Change(step, state, message, news))

    def instance_changed(self, result) -> None:
        """No instance changes in a host return."""

    def succeeded(self) -> list[str]:
        return [c.step for c in self.changes if c.state == "SUCCESS"]


def _settings(host: str, driver: str) -> BmcSettings:
    return BmcSettings(host=host, driver=driver, address=f"{host}-{driver}",
                       username="recovery", password=Secret("secret"))


class StorageFence(Fencer):
    """A storage fence that records each unfence, with what Nova showed
    of the host at that moment."""

    driver = "storage-recorder"
    kind = DeviceKind.STORAGE

    def __init__(self, nova, error: exception.FencingError | None = None):
        super().__init__(_settings(HOST, self.driver),
                         Timing(timeout=1, poll_interval=1, attempts=1))
        self.nova, self.error = nova, error
        # (forced down, evacuation statuses) at each unfence.
        self.unfenced: list[tuple[bool, list[str]]] = []

    def describe(self) -> str:
        return f"storage-recorder blocklist of {HOST}"

    def unfence(self, clock) -> str:
        self.unfenced.append((
            self.nova.service(HOST)["forced_down"],
            [m["status"] for m in self.nova.migrations()]))
        if self.error is not None:
            raise self.error
        return f"removed 10.0.0.1 and 10.0.0.1:0/4242 for {HOST}"


class PowerFence(Fencer):
    """A BMC: never asked anything by a host return."""

    driver = "power-recorder"

    def __init__(self):
        super().__init__(_settings(HOST, self.driver),
                         Timing(timeout=1, poll_interval=1, attempts=1))

    def describe(self) -> str:
        return f"power-recorder power-off of {HOST}"


def fence_of(*fencers: Fencer) -> HostFence:
    """Level 1 the power device(s), level 2 the storage one(s)."""
    power = [f for f in fencers if f.kind is DeviceKind.POWER]
    storage = [f for f in fencers if f.kind is DeviceKind.STORAGE]
    levels = [Level(number, [Device(f"{f.driver}-{n}", f)
                             for n, f in enumerate(group)])
              for number, group in enumerate((power, storage), 1) if group]
    return HostFence(HOST, levels)


@pytest.fixture
def nova(fake_nova):
    """``HOST`` failed, isolated by recovery, its instance evacuated
    ("done": its nova-compute has not destroyed the old guest yet)."""
    for host in (HOST, "compute-2"):
        fake_nova.add_compute(host)
    uuid = fake_nova.add_server("vm", HOST)
    fake_nova.fail_host(HOST)
    client = load_nova(admin_token_conf(fake_nova), FakeClock())
    client.isolate(client.get_compute_service(HOST), REASON)
    client.evacuate(uuid)
    fake_nova.wait_for(lambda: [m["status"] for m in fake_nova.migrations()]
                       == ["done"])
    return fake_nova


def env_for(fake_nova, recorder: Recorder):
    return make_env(load_nova(admin_token_conf(fake_nova), FakeClock()),
                    FakeClock(), recorder, poll_interval=1.0,
                    host_return_timeout=5.0, state_change_timeout=5.0)


def test_the_storage_fence_is_lifted_once_the_evacuations_completed(nova):
    storage, recorder = StorageFence(nova), Recorder()
    nova.restore_host(HOST)
    message = host_return.return_host(env_for(nova, recorder), HOST,
                                      fence_of(PowerFence(), storage))
    assert message == f"{HOST} is back: service up, enabled"
    # Once, with the evacuation completed, the host still forced down.
    assert storage.unfenced == [(True, ["completed"])]
    assert recorder.succeeded() == [
        "check-evacuations", "await-heartbeat", "lift-storage-fence",
        "clear-force-down", "enable"]
    (lifted,) = [c for c in recorder.changes
                 if c.step == "lift-storage-fence" and c.state == "SUCCESS"]
    assert lifted.message == (f"storage-recorder-0: removed 10.0.0.1 and "
                              f"10.0.0.1:0/4242 for {HOST}")
    assert lifted.news == News(EventKind.UNFENCED)


def test_never_lifted_while_an_evacuation_is_not_completed(nova):
    """The step alone, its host's nova-compute not restarted: the old
    guest is still defined there. It waits, says why, and gives up
    without lifting anything."""
    storage, recorder = StorageFence(nova), Recorder()
    ctx = host_return.ReturnContext(env=env_for(nova, recorder), host=HOST,
                                    fence=fence_of(storage))
    with pytest.raises(exception.WaitTimeout) as caught:
        base.run_steps([host_return.LiftStorageFence()], ctx,
                       recorder.step_changed)
    assert str(caught.value) == (
        f"gave up after 5s waiting for every evacuation from {HOST} to be "
        f"completed, before its storage fence is lifted")
    assert storage.unfenced == []
    waiting = [c.message for c in recorder.changes if c.state == "RUNNING"]
    (server,) = nova.servers()
    assert waiting[1] == (
        f"waiting: 1 evacuation(s) from {HOST} not completed yet (instance "
        f"{server['id']} is done); its nova-compute destroys the evacuated "
        f"guests when it starts, and until then one could write to the "
        f"disks its evacuated copy uses")
    assert recorder.changes[-1].news == News(EventKind.UNFENCE_FAILED)


def test_a_failed_unfence_leaves_the_host_forced_down(nova):
    storage = StorageFence(nova, exception.FencingError(
        "ceph: no monitor answered within 10 s"))
    recorder = Recorder()
    nova.restore_host(HOST)
    with pytest.raises(exception.FencingError) as caught:
        host_return.return_host(env_for(nova, recorder), HOST,
                                fence_of(storage))
    assert str(caught.value) == (f"the storage fence of {HOST} could not be "
                                 f"lifted: ceph: no monitor answered "
                                 f"within 10 s")
    assert nova.service(HOST)["forced_down"]
    assert "clear-force-down" not in [c.step for c in recorder.changes]


@pytest.mark.parametrize("fence", [None, "power"])
def test_a_host_without_a_storage_fence_returns_as_before(nova, fence):
    recorder = Recorder()
    nova.restore_host(HOST)
    host_return.return_host(env_for(nova, recorder), HOST,
                            fence and fence_of(PowerFence()))
    assert recorder.succeeded() == ["check-evacuations", "await-heartbeat",
                                    "clear-force-down", "enable"]


class Fencing:
    """The engine's fencing settings, for one host."""

    def __init__(self, fence: HostFence):
        self.fence = fence

    def for_host(self, host: str) -> HostFence | None:
        return self.fence if host == HOST else None


def test_the_engine_s_host_return_lifts_the_host_s_storage_fence(nova):
    """A host-return notification, run as the engine runs it: with the
    host's own fencing."""
    storage = StorageFence(nova)
    nova.restore_host(HOST)
    notification = Notification(
        id=1, uuid="n-1", type="COMPUTE_HOST", kind=Kind.HOST_RETURN,
        hostname=HOST, generated_time=START, payload={"event": "STARTED"},
        origin="api", status=Status.RUNNING, created_at=START,
        updated_at=START)
    done = runner.attempt(env_for(nova, Recorder()), None, notification,
                          Fencing(fence_of(storage)))
    assert done.status is Status.FINISHED, done.message
    assert len(storage.unfenced) == 1
