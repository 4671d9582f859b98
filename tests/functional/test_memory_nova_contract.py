"""The unit tests' ``MemoryNova`` held to the Nova facade.

Each fact below is asserted through the facade on the fake Nova over HTTP
(whose own facts tests/behaviour/test_nova_contract.py holds to the real
Nova) and on ``MemoryNova``: a unit test cannot pass against a Nova that
does not exist.

``MemoryNova`` advances an evacuation one status per listing, where the
HTTP fake takes time: ``settle`` polls both the same way.
"""

import pytest

from recovery import exception
from recovery.concurrency import Clock
from recovery.nova import load_nova
from tests.fakenova import FakeNova
from tests.fakenova.server import wait_until
from tests.functional.test_nova_facade import admin_token_conf
from tests.unit.fakes import MemoryNova

SOURCE, DEST = "compute-1", "compute-2"
LOCK_REASON = "contract lock"


class HttpWorld:
    """The facade over HTTP, on the fake Nova."""

    def __init__(self, fake: FakeNova) -> None:
        self.fake = fake
        self.nova = load_nova(admin_token_conf(fake), Clock())

    def add_compute(self, host: str) -> None:
        self.fake.add_compute(host)

    def fill(self, host: str) -> None:
        self.fake.set_capacity(host, 0)

    def add_server(self, host: str, vm_state: str = "active") -> str:
        return self.fake.add_server(f"vm-{vm_state}", host,
                                    vm_state=vm_state)

    def fail_host(self, host: str) -> None:
        self.fake.fail_host(host)

    def settle(self, probe, what: str):
        return wait_until(probe, 30, interval=0.02, what=what)


class MemoryWorld:
    """``MemoryNova``, set up as the unit tests set it up."""

    def __init__(self) -> None:
        self.nova = MemoryNova(dest=DEST)
        self._ids = 0

    def add_compute(self, host: str) -> None:
        self.nova.add_service(host, state="up")

    def fill(self, host: str) -> None:
        self.nova.capacity[host] = 0

    def add_server(self, host: str, vm_state: str = "active") -> str:
        self._ids += 1
        uuid = f"uuid-{self._ids}"
        self.nova.add_server(uuid, host=host, vm_state=vm_state)
        return uuid

    def fail_host(self, host: str) -> None:
        self.nova.add_service(host, state="down")

    def settle(self, probe, what: str):
        for _ in range(10):
            found = probe()
            if found:
                return found
        raise AssertionError(f"MemoryNova never showed {what}")


@pytest.fixture(params=["http", "memory"])
def world(request):
    if request.param == "memory":
        world = MemoryWorld()
        world.add_compute(SOURCE)
        world.add_compute(DEST)
        yield world
        return
    with FakeNova(evacuation_latency=0.05) as fake:
        world = HttpWorld(fake)
        world.add_compute(SOURCE)
        world.add_compute(DEST)
        yield world


def evacuated(world, uuid):
    """Poll the source's evacuations until ``uuid``'s is final; every
    status seen, and the final migration."""
    seen = set()

    def probe():
        [migration] = [m for m in world.nova.list_evacuations(SOURCE)
                       if m.instance_uuid == uuid]
        seen.add(migration.status)
        return migration.status in ("done", "error") and migration

    return seen, world.settle(probe, f"the evacuation of {uuid} to end")


def test_services(world):
    nova = world.nova
    service = nova.get_compute_service(SOURCE)
    assert (service.host, service.state, service.status,
            service.forced_down) == (SOURCE, "up", "enabled", False)
    nova.disable(service, "a reason")
    service = nova.get_compute_service(SOURCE)
    assert (service.status, service.disabled_reason) == (
        "disabled", "a reason")
    nova.enable(service)
    service = nova.get_compute_service(SOURCE)
    assert (service.status, service.disabled_reason) == ("enabled", None)
    nova.force_down(service, True)
    service = nova.get_compute_service(SOURCE)
    assert (service.forced_down, service.state) == (True, "down")
    nova.force_down(service, False)
    assert nova.get_compute_service(SOURCE).forced_down is False
    with pytest.raises(exception.UnknownHost):
        nova.get_compute_service("nowhere")


def test_servers_and_their_statuses(world):
    expected = {"active": "ACTIVE", "stopped": "SHUTOFF", "error": "ERROR",
                "paused": "PAUSED", "suspended": "SUSPENDED"}
    ids = {world.add_server(SOURCE, state): state for state in expected}
    other = world.add_server(DEST)
    listed = world.nova.list_servers(SOURCE)
    assert {s.id for s in listed} == set(ids)
    assert other not in {s.id for s in listed}
    for server in listed:
        state = ids[server.id]
        assert (server.host, server.vm_state, server.task_state,
                server.status) == (SOURCE, state, None, expected[state])


def test_lock_and_unlock(world):
    uuid = world.add_server(SOURCE)
    world.nova.lock(uuid, LOCK_REASON)
    server = world.nova.get_server(uuid)
    assert (server.locked, server.locked_reason) == (True, LOCK_REASON)
    world.nova.unlock(uuid)
    server = world.nova.get_server(uuid)
    assert (server.locked, server.locked_reason) == (False, None)


def test_stop_and_start(world):
    uuid = world.add_server(SOURCE)
    world.nova.stop(uuid)
    world.settle(lambda: world.nova.get_server(uuid).status == "SHUTOFF",
                 "the instance stopped")
    world.nova.start(uuid)
    world.settle(lambda: world.nova.get_server(uuid).status == "ACTIVE",
                 "the instance active again")


def test_an_evacuation_of_a_live_host_is_refused(world):
    uuid = world.add_server(SOURCE)
    with pytest.raises(exception.NovaConflict, match="still in use"):
        world.nova.evacuate(uuid)
    assert world.nova.list_evacuations(SOURCE) == []


def test_a_paused_instance_is_not_evacuated(world):
    uuid = world.add_server(SOURCE, "paused")
    world.fail_host(SOURCE)
    with pytest.raises(exception.NovaConflict, match="vm_state paused"):
        world.nova.evacuate(uuid)


def test_pause_and_suspend_need_an_active_instance(world):
    for action, vm_state in (("pause", "paused"),
                             ("suspend", "suspended")):
        uuid = world.add_server(SOURCE)
        getattr(world.nova, action)(uuid)
        world.settle(
            lambda uuid=uuid, vm_state=vm_state: (
                s := world.nova.get_server(uuid)).vm_state == vm_state
            and s.task_state is None, f"the instance {vm_state}")
        with pytest.raises(exception.NovaConflict, match="vm_state"):
            getattr(world.nova, action)(uuid)


def test_a_confirmed_resize_is_evacuated(world):
    """VERIFY_RESIZE on a dead host: the confirm is the source host's,
    and leaves the instance active, evacuable."""
    uuid = world.add_server(SOURCE, "resized")
    world.fail_host(SOURCE)
    with pytest.raises(exception.NovaConflict, match="vm_state resized"):
        world.nova.evacuate(uuid)
    world.nova.confirm_resize(uuid)
    world.settle(
        lambda: (s := world.nova.get_server(uuid)).vm_state == "active"
        and s.task_state is None, "the resize confirmed")
    with pytest.raises(exception.NovaConflict, match="vm_state"):
        world.nova.confirm_resize(uuid)
    world.nova.evacuate(uuid)
    _, migration = evacuated(world, uuid)
    assert migration.status == "done"


def test_a_paused_instance_reset_to_active_is_evacuated(world):
    """What recovery relies on for paused, suspended and rescued."""
    uuid = world.add_server(SOURCE, "paused")
    world.fail_host(SOURCE)
    world.nova.reset_state(uuid, "active")
    server = world.nova.get_server(uuid)
    assert (server.vm_state, server.task_state) == ("active", None)
    world.nova.evacuate(uuid)
    _, migration = evacuated(world, uuid)
    assert migration.status == "done"


@pytest.mark.parametrize("vm_state, status", [
    ("active", "ACTIVE"), ("stopped", "SHUTOFF"), ("error", "ACTIVE")])
def test_an_evacuation_lands_on_another_host(world, vm_state, status):
    uuid = world.add_server(SOURCE, vm_state)
    world.fail_host(SOURCE)
    world.nova.evacuate(uuid)
    seen, migration = evacuated(world, uuid)
    assert seen <= {"accepted", "pre-migrating", "done"}
    assert migration.status == "done"
    assert (migration.source_compute, migration.dest_compute) == (
        SOURCE, DEST)
    server = world.settle(
        lambda: (s := world.nova.get_server(uuid)).task_state is None and s,
        "the rebuild to end")
    assert (server.host, server.status) == (DEST, status)


def test_an_evacuation_to_a_full_host_fails_with_no_valid_host(world):
    uuid = world.add_server(SOURCE)
    world.fail_host(SOURCE)
    world.fill(DEST)
    world.nova.evacuate(uuid)
    _, migration = evacuated(world, uuid)
    assert migration.status == "error"
    server = world.nova.get_server(uuid)
    assert (server.vm_state, server.task_state) == ("error", None)
    assert "No valid host was found" in server.fault
