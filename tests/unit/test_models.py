"""Nova's states, parsed once into enums that stay Nova's strings."""

import json

import pytest

from recovery.flows.selection import skip_reason
from recovery.models import ComputeService
from recovery.models import Migration
from recovery.models import MigrationStatus
from recovery.models import Server
from recovery.models import ServiceState
from recovery.models import TaskState
from recovery.models import VmState
from tests.unit.fakes import settings


def server(vm_state, task_state=None):
    return Server.from_nova({
        "id": "vm-1", "OS-EXT-SRV-ATTR:host": "compute-1",
        "OS-EXT-STS:vm_state": vm_state,
        "OS-EXT-STS:task_state": task_state})


def test_a_known_state_is_its_member_and_nova_s_string():
    found = server("active", "rebuild_spawning")
    assert found.vm_state is VmState.ACTIVE
    assert found.task_state is TaskState.REBUILD_SPAWNING
    assert found.rebuilding and not found.idle
    assert found.vm_state == "active"
    assert (str(found.vm_state), f"{found.vm_state}", repr(found.vm_state)
            ) == ("active", "active", "'active'")
    assert json.dumps([found.vm_state]) == '["active"]'


def test_a_state_recovery_does_not_know_keeps_nova_s_name():
    found = server("hibernated", "image_snapshot")
    assert isinstance(found.vm_state, VmState)
    assert not found.vm_state.known and VmState.ACTIVE.known
    assert found.vm_state == "hibernated"
    assert found.vm_state not in set(VmState)
    assert f"{found.vm_state!r}" == "'hibernated'"
    assert not found.task_state.known and not found.rebuilding
    # A text that happens to be a member's name is no member either.
    assert not VmState("ACTIVE").known
    reason = skip_reason(found, settings())
    assert reason.startswith(
        "vm_state 'hibernated' is not known to recovery")


def test_a_service_and_a_migration_are_parsed_whoever_builds_them():
    service = ComputeService(id="s", host="h", state="up",
                             status="disabled", forced_down=False,
                             disabled_reason="x")
    assert service.state is ServiceState.UP and service.is_disabled
    assert service.is_compute and not service.schedulable
    migration = Migration(id=1, uuid="m", instance_uuid="vm-1",
                          status="error", source_compute="h",
                          dest_compute=None)
    assert migration.status is MigrationStatus.ERROR
    assert migration.failed and migration.finished and not migration.done


@pytest.mark.parametrize("status, finished", [
    ("accepted", False), ("migrating", False), ("post-migrating", False),
    ("done", True), ("completed", True), ("failed", True),
    ("error", True), ("cancelled", True)])
def test_which_migrations_have_ended(status, finished):
    assert MigrationStatus(status).finished is finished
