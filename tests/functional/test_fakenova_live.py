"""The fake Nova's live migrations, driven by the real novaclient."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from typing import Any

import pytest
from novaclient import exceptions as nova_exc

from tests.fakenova import FakeNova
from tests.functional.test_fakenova import LATENCY
from tests.functional.test_fakenova import OWNER
from tests.functional.test_fakenova import make_client
from tests.functional.test_fakenova import wait_for

STEPS = ["accepted", "queued", "preparing", "running", "completed"]


@pytest.fixture
def fake() -> Iterator[FakeNova]:
    with FakeNova(evacuation_latency=LATENCY) as nova:
        for host in ("c1", "c2", "c3"):
            nova.add_compute(host)
        yield nova


@pytest.fixture
def slow() -> Iterator[FakeNova]:
    """Latency enough to watch each step."""
    with FakeNova(evacuation_latency=0.3) as nova:
        for host in ("c1", "c2", "c3"):
            nova.add_compute(host)
        yield nova


@pytest.fixture
def nova(fake: FakeNova) -> Any:
    return make_client(fake)


def migration_of(fake: FakeNova, uuid: str) -> dict:
    [migration] = [m for m in fake.migrations()
                   if m["instance_uuid"] == uuid]
    return migration


def settled(fake: FakeNova, uuid: str) -> dict:
    """The server once its live migration is over."""
    wait_for(lambda: fake.server(uuid)["task_state"] is None)
    return fake.server(uuid)


def post(fake: FakeNova, uuid: str, body: Any, version: str) -> Any:
    """os-migrateLive as is, past novaclient's checks."""
    return make_client(fake).client.session.post(
        f"{fake.endpoint}/servers/{uuid}/action",
        json={"os-migrateLive": body},
        headers={"OpenStack-API-Version": f"compute {version}"},
        raise_exc=False)


# -- success ---------------------------------------------------------------
@pytest.mark.parametrize("vm_state, status", [("active", "ACTIVE"),
                                               ("paused", "PAUSED")])
def test_live_migration_moves_the_server(slow: FakeNova, vm_state: str,
                                         status: str) -> None:
    slow.add_server("busy", "c2")
    uuid = slow.add_server("vm", "c1", vm_state=vm_state)
    nova = make_client(slow)
    assert nova.servers.live_migrate(uuid, None, "auto") == ()  # no body
    assert slow.requests[-1]["status"] == 202
    assert nova.servers.get(uuid).status == "MIGRATING"
    seen: list[str] = []

    def over() -> bool:
        status = migration_of(slow, uuid)["status"]
        if not seen or seen[-1] != status:
            seen.append(status)
        return status == "completed"
    wait_for(over)
    assert seen == [s for s in STEPS if s in seen]
    assert {"preparing", "running"} <= set(seen)
    server = slow.server(uuid)
    assert (server["host"], server["node"], server["status"],
            server["task_state"]) == ("c3", "c3.localdomain", status, None)
    assert slow.live_migrate_calls == [
        {"uuid": uuid, "source": "c1", "target": None, "force": False,
         "block_migration": "auto", "dest": "c3",
         "time": slow.live_migrate_calls[0]["time"]}]


def test_requested_host_goes_through_the_scheduler(fake: FakeNova,
                                                   nova: Any) -> None:
    uuid = fake.add_server("vm", "c1")
    nova.servers.live_migrate(uuid, "c2", "auto")
    assert settled(fake, uuid)["host"] == "c2"
    other = fake.add_server("other", "c1")
    nova.services.disable_log_reason(fake.service("c3")["id"], "maint")
    nova.servers.live_migrate(other, "c3", "auto")
    server = settled(fake, other)
    assert (server["host"], server["status"]) == ("c1", "ACTIVE")
    assert server["fault"].startswith("No valid host was found")
    assert migration_of(fake, other)["status"] == "error"


def test_forced_host_skips_the_scheduler(fake: FakeNova,
                                         nova: Any) -> None:
    uuid = fake.add_server("vm", "c1")
    fake.add_server("busy", "c3")
    nova.services.disable_log_reason(fake.service("c3")["id"], "maint")
    make_client(fake, version="2.30").servers.live_migrate(
        uuid, "c3", "auto", force=True)
    assert settled(fake, uuid)["host"] == "c3"
    assert fake.live_migrate_calls[0]["force"] is True


# -- the source's executor -------------------------------------------------
def test_source_runs_one_at_a_time_by_default(slow: FakeNova) -> None:
    nova = make_client(slow)
    first, second = (slow.add_server(f"vm{i}", "c1") for i in range(2))
    nova.servers.live_migrate(first, "c2", "auto")
    nova.servers.live_migrate(second, "c3", "auto")
    wait_for(lambda: migration_of(slow, second)["status"] == "queued")
    assert migration_of(slow, first)["status"] in ("preparing", "running")
    assert [m.id for m in nova.server_migrations.list(second)] == [
        migration_of(slow, second)["id"]]
    wait_for(lambda: migration_of(slow, second)["status"] == "completed",
             timeout=10)
    assert migration_of(slow, first)["status"] == "completed"
    assert slow.peak_live_migrations() == {
        "source": {"c1": 1}, "dest": {"c2": 1, "c3": 1}}


@pytest.mark.parametrize("limit, peak", [(2, 2), (0, 5)])
def test_max_concurrent_live_migrations(slow: FakeNova, limit: int,
                                        peak: int) -> None:
    nova = make_client(slow)
    slow.set_max_concurrent_live_migrations("c1", limit)
    ids = [slow.add_server(f"vm{i}", "c1") for i in range(7)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=7) as pool:
        list(pool.map(lambda uuid: nova.servers.live_migrate(
            uuid, None, "auto"), ids))
    wait_for(lambda: all(m["status"] == "completed"
                         for m in slow.migrations()), timeout=10)
    assert slow.peak_live_migrations()["source"] == {"c1": peak}
    assert {slow.server(uuid)["host"] for uuid in ids} == {"c2", "c3"}


def test_raising_the_limit_starts_queued_ones(fake: FakeNova,
                                              nova: Any) -> None:
    stuck, waiting = (fake.add_server(f"vm{i}", "c1") for i in range(2))
    fake.set_live_migration_outcome(stuck, "hang")
    nova.servers.live_migrate(stuck, None, "auto")
    nova.servers.live_migrate(waiting, None, "auto")
    wait_for(lambda: migration_of(fake, waiting)["status"] == "queued")
    fake.set_max_concurrent_live_migrations("c1", 2)
    assert settled(fake, waiting)["host"] != "c1"
    with pytest.raises(ValueError):
        fake.set_max_concurrent_live_migrations("c1", -1)


# -- outcomes --------------------------------------------------------------
@pytest.mark.parametrize("outcome, status, fault", [
    ("error", "error", "No valid host was found"),
    ("failed", "failed", None),
])
def test_outcome_leaves_the_server_on_its_source(
        fake: FakeNova, nova: Any, outcome: str, status: str,
        fault: str | None) -> None:
    uuid = fake.add_server("vm", "c1")
    fake.set_live_migration_outcome(uuid, outcome)
    nova.servers.live_migrate(uuid, None, "auto")
    server = settled(fake, uuid)
    assert (server["host"], server["vm_state"], server["status"]) == (
        "c1", "active", "ACTIVE")
    assert migration_of(fake, uuid)["status"] == status
    assert (server["fault"] or "").startswith(fault or "")
    assert not hasattr(nova.servers.get(uuid), "fault")  # ACTIVE: hidden
    fake.set_live_migration_outcome(uuid, "ok")
    nova.servers.live_migrate(uuid, None, "auto")
    assert settled(fake, uuid)["host"] != "c1"


def test_forced_host_pre_check_error(fake: FakeNova) -> None:
    uuid = fake.add_server("vm", "c1")
    fake.set_live_migration_outcome(uuid, "error")
    make_client(fake, version="2.67").servers.live_migrate(
        uuid, "c2", "auto", force=True)
    server = settled(fake, uuid)
    assert server["fault"].startswith("Migration pre-check error")
    assert migration_of(fake, uuid)["dest_compute"] == "c2"


def test_hang_holds_its_slot(fake: FakeNova, nova: Any) -> None:
    uuid = fake.add_server("vm", "c1")
    queued = fake.add_server("queued", "c1")
    witness = fake.add_server("witness", "c2")
    fake.set_live_migration_outcome(uuid, "hang")
    nova.servers.live_migrate(uuid, "c3", "auto")
    nova.servers.live_migrate(queued, "c3", "auto")
    nova.servers.live_migrate(witness, "c3", "auto")
    wait_for(lambda: migration_of(fake, uuid)["status"] == "running")
    # the witness, from another source, finishing shows time has passed
    assert settled(fake, witness)["host"] == "c3"
    assert migration_of(fake, uuid)["status"] == "running"
    assert migration_of(fake, queued)["status"] == "queued"
    server = fake.server(uuid)
    assert (server["status"], server["host"]) == ("MIGRATING", "c1")
    [shown] = nova.server_migrations.list(uuid)
    assert (shown.status, shown.dest_compute) == ("running", "c3")
    assert nova.server_migrations.get(uuid, shown.id).server_uuid == uuid


@pytest.mark.parametrize("dead", ["c1", "c2"])
def test_dead_compute_stops_the_migration(slow: FakeNova, dead: str) -> None:
    nova = make_client(slow)
    uuid = slow.add_server("vm", "c1")
    nova.servers.live_migrate(uuid, "c2", "auto")
    wait_for(lambda: migration_of(slow, uuid)["status"] == "preparing")
    slow.fail_host(dead)
    frozen = migration_of(slow, uuid)["status"]
    witness = slow.add_server("witness", "c3")
    nova.servers.live_migrate(witness, None, "auto")
    wait_for(lambda: slow.server(witness)["host"] != "c3")
    assert migration_of(slow, uuid)["status"] == frozen
    server = slow.server(uuid)
    assert (server["host"], server["task_state"]) == ("c1", "migrating")


# -- refusals --------------------------------------------------------------
def test_refused_states(fake: FakeNova, nova: Any) -> None:
    stopped = fake.add_server("stopped", "c1", vm_state="stopped")
    busy = fake.add_server("busy", "c1", task_state="powering-off")
    with pytest.raises(nova_exc.Conflict,
                       match=f"Cannot 'os-migrateLive' instance {stopped} "
                       "while it is in vm_state stopped"):
        nova.servers.live_migrate(stopped, None, "auto")
    with pytest.raises(nova_exc.Conflict,
                       match="while it is in task_state powering-off"):
        nova.servers.live_migrate(busy, None, "auto")
    with pytest.raises(nova_exc.Forbidden):
        make_client(fake, token=OWNER).servers.live_migrate(busy, None,
                                                            "auto")
    with pytest.raises(nova_exc.BadRequest,
                       match="Compute host nowhere could not be found"):
        nova.servers.live_migrate(fake.add_server("vm", "c1"), "nowhere",
                                  "auto")
    assert fake.live_migrate_calls == fake.migrations() == []


def test_conductor_refusals_are_400_before_2_34(fake: FakeNova) -> None:
    uuid = fake.add_server("vm", "c1")
    old = make_client(fake, version="2.25")
    with pytest.raises(nova_exc.BadRequest, match=(
            rf"Unable to migrate instance \({uuid}\) to current host "
            r"\(c1\)")):
        old.servers.live_migrate(uuid, "c1", "auto")
    assert fake.server(uuid)["task_state"] is None
    assert migration_of(fake, uuid)["status"] == "error"
    fake.fail_host("c1")
    with pytest.raises(nova_exc.BadRequest, match=(
            "Compute service of c1 is unavailable at this time")):
        make_client(fake, version="2.33").servers.live_migrate(
            uuid, None, "auto")


@pytest.mark.parametrize("host, fault", [
    ("c1", "No valid host was found"),
    (None, "Compute service of c1 is unavailable at this time."),
])
def test_conductor_refusals_are_async_from_2_34(
        fake: FakeNova, nova: Any, host: str | None, fault: str) -> None:
    uuid = fake.add_server("vm", "c1")
    if host is None:
        fake.fail_host("c1")
    nova.servers.live_migrate(uuid, host, "auto")
    assert fake.requests[-1]["status"] == 202
    server = settled(fake, uuid)
    assert (server["host"], server["status"]) == ("c1", "ACTIVE")
    assert server["fault"].startswith(fault)
    assert migration_of(fake, uuid)["status"] == "error"


@pytest.mark.parametrize("version, body, message", [
    ("2.94", {"host": None, "block_migration": "auto", "force": True},
     "'force' was unexpected"),
    ("2.25", {"host": None, "block_migration": "auto",
              "disk_over_commit": False},
     "'disk_over_commit' was unexpected"),
    ("2.24", {"host": None, "block_migration": False},
     "'disk_over_commit' is a required property"),
    ("2.24", {"host": None, "block_migration": "auto",
              "disk_over_commit": False}, "'auto' is not one of"),
    ("2.94", {"block_migration": "auto"}, "'host' is a required property"),
    ("2.94", {"host": None, "block_migration": 1}, "1 is not one of"),
    ("2.94", {"host": 7, "block_migration": True}, "field/attribute host"),
    ("2.94", {"host": "", "block_migration": True}, "'' is too short"),
    ("2.30", {"host": None, "block_migration": "auto", "force": True},
     "Can't force to a non-provided destination"),
])
def test_body_validation(fake: FakeNova, version: str, body: dict,
                         message: str) -> None:
    uuid = fake.add_server("vm", "c1")
    resp = post(fake, uuid, body, version)
    assert resp.status_code == 400
    fault = resp.json()["badRequest"]
    assert fault["code"] == 400 and message in fault["message"]
    assert fake.server(uuid)["task_state"] is None


@pytest.mark.parametrize("version, body", [
    ("2.24", {"host": None, "block_migration": "false",
              "disk_over_commit": "0"}),
    ("2.30", {"host": "c2", "block_migration": True, "force": "no"}),
    ("2.68", {"host": None, "block_migration": False}),
])
def test_body_accepted(fake: FakeNova, version: str, body: dict) -> None:
    uuid = fake.add_server("vm", "c1")
    resp = post(fake, uuid, body, version)
    assert (resp.status_code, resp.text) == (202, "")
    assert settled(fake, uuid)["host"] != "c1"


# -- reads -----------------------------------------------------------------
def test_os_migrations_filters(fake: FakeNova, nova: Any) -> None:
    moved = fake.add_server("moved", "c1")
    failed = fake.add_server("failed", "c1")
    evacuated = fake.add_server("evacuated", "c2")
    fake.set_live_migration_outcome(failed, "failed")
    nova.servers.live_migrate(moved, "c3", "auto")
    nova.servers.live_migrate(failed, "c3", "auto")
    fake.fail_host("c2")
    nova.servers.evacuate(evacuated)
    wait_for(lambda: all(m["status"] in ("completed", "failed", "done")
                         for m in fake.migrations()))

    def listed(**filters: str) -> list[tuple[str, str]]:
        return sorted((m.instance_uuid, m.status)
                      for m in nova.migrations.list(**filters))
    live = "live-migration"
    assert listed(migration_type=live) == sorted(
        [(moved, "completed"), (failed, "failed")])
    assert listed(migration_type=live, status="failed") == [
        (failed, "failed")]
    assert listed(instance_uuid=moved) == [(moved, "completed")]
    assert listed(host="c3", migration_type=live) == listed(
        migration_type=live)
    assert listed(host="c2") == [(evacuated, "done")]
    [shown] = nova.migrations.list(instance_uuid=moved)
    assert (shown.migration_type, shown.source_compute,
            shown.dest_compute) == (live, "c1", "c3")


def test_server_migrations_show_only_in_progress(fake: FakeNova,
                                                 nova: Any) -> None:
    uuid = fake.add_server("vm", "c1")
    nova.servers.live_migrate(uuid, None, "auto")
    settled(fake, uuid)
    assert nova.server_migrations.list(uuid) == []
    ident = migration_of(fake, uuid)["id"]
    with pytest.raises(nova_exc.NotFound, match="is not in progress"):
        nova.server_migrations.get(uuid, ident)
    with pytest.raises(nova_exc.NotFound, match="is not found"):
        nova.server_migrations.get(uuid, ident + 100)
    with pytest.raises(nova_exc.Forbidden):
        make_client(fake, token=OWNER).server_migrations.list(uuid)
    old = make_client(fake, version="2.22").client.session.get(
        f"{fake.endpoint}/servers/{uuid}/migrations",
        headers={"OpenStack-API-Version": "compute 2.22"}, raise_exc=False)
    assert old.status_code == 404
    evacuated = fake.add_server("evacuated", "c2")
    fake.fail_host("c2")
    nova.servers.evacuate(evacuated)
    evacuation = migration_of(fake, evacuated)["id"]
    with pytest.raises(nova_exc.NotFound, match="is not live-migration"):
        nova.server_migrations.get(evacuated, evacuation)


def test_unknown_outcome_refused(fake: FakeNova) -> None:
    uuid = fake.add_server("vm", "c1")
    with pytest.raises(ValueError):
        fake.set_live_migration_outcome(uuid, "boom")
    assert fake.peak_live_migrations() == {"source": {}, "dest": {}}
