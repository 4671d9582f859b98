"""The fake Nova driven by the real novaclient + keystoneauth1 over HTTP."""

from __future__ import annotations

import concurrent.futures
import datetime
import time
from collections.abc import Callable
from collections.abc import Iterator
from typing import Any

import pytest
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading
from keystoneauth1 import session as ks_session
from novaclient import client as nova_client
from novaclient import exceptions as nova_exc

from tests.fakenova import FakeNova
from tests.fakenova.state import utcnow

ADMIN = "admin:admin:admin"
OWNER = "demo-user:demo:member"
LATENCY = 0.02


@pytest.fixture
def fake() -> Iterator[FakeNova]:
    with FakeNova(evacuation_latency=LATENCY) as nova:
        for host in ("c1", "c2", "c3"):
            nova.add_compute(host)
        yield nova


def make_client(fake: FakeNova, token: str | None = ADMIN,
                version: str = "2.94", timeout: float | None = None) -> Any:
    if token is None:
        auth = loading.get_plugin_loader("none").load_from_options()
    else:
        auth = loading.get_plugin_loader("admin_token").load_from_options(
            endpoint=fake.endpoint, token=token)
    sess = ks_session.Session(auth=auth, timeout=timeout)
    return nova_client.Client(version, session=sess,
                              endpoint_override=fake.endpoint)


@pytest.fixture
def nova(fake: FakeNova) -> Any:
    return make_client(fake)


def wait_for(predicate: Callable[[], Any], timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)


def fence(fake: FakeNova, nova: Any, host: str) -> None:
    """The host dies and is forced down, as a fencing agent would."""
    fake.fail_host(host)
    nova.services.force_down(fake.service(host)["id"], True)


def evacuated(fake: FakeNova, uuid: str, dest: str | None = None) -> dict:
    def moved() -> dict | None:
        server = fake.server(uuid)
        source = fake.evacuate_calls[-1]["source"]
        done = server["host"] != source and server["task_state"] is None
        return server if done else None
    server = wait_for(moved)
    if dest is not None:
        assert server["host"] == dest
    return server


# -- basics ----------------------------------------------------------------
def test_version_documents_and_headers(fake: FakeNova) -> None:
    sess = ks_session.Session()
    root = fake.endpoint.rsplit("/", 1)[0]
    versions = sess.get(root + "/").json()["versions"]
    current = [v for v in versions if v["id"] == "v2.1"][0]
    assert (current["min_version"], current["version"]) == ("2.1", "2.96")
    resp = sess.get(fake.endpoint,
                    headers={"OpenStack-API-Version": "compute 2.90"})
    assert resp.json()["version"]["version"] == "2.96"
    assert resp.headers["OpenStack-API-Version"] == "compute 2.90"
    assert resp.headers["X-OpenStack-Nova-API-Version"] == "2.90"
    assert resp.headers["x-compute-request-id"].startswith("req-")
    assert (resp.headers["x-openstack-request-id"]
            == resp.headers["x-compute-request-id"])


def test_microversion_above_max_is_not_acceptable(fake: FakeNova) -> None:
    fake.microversion_max = "2.90"
    with pytest.raises(nova_exc.ClientException) as err:
        make_client(fake, version="2.94").servers.list()
    assert err.value.code == 406
    assert make_client(fake, version="2.90").servers.list() == []


def test_unknown_route_and_server(fake: FakeNova, nova: Any) -> None:
    with pytest.raises(nova_exc.NotFound):
        nova.servers.get("00000000-0000-0000-0000-000000000000")
    resp = ks_session.Session().get(fake.endpoint + "/os-nothing",
                                    raise_exc=False)
    assert resp.status_code == 404
    assert "itemNotFound" in resp.json()


def test_none_auth_plugin_is_admin(fake: FakeNova) -> None:
    fake.add_server("vm", "c1", project_id="other")
    anonymous = make_client(fake, token=None)
    found = anonymous.servers.list(search_opts={"all_tenants": 1})
    assert [s.name for s in found] == ["vm"]


# -- listing ---------------------------------------------------------------
def test_list_paginates_over_pages(fake: FakeNova, nova: Any) -> None:
    fake.max_limit = 2
    names = [f"vm{i}" for i in range(5)]
    for i, name in enumerate(names):
        fake.add_server(name, "c1" if i < 4 else "c2",
                        project_id=f"p{i % 2}")
    first = nova.servers.list(search_opts={"all_tenants": 1})
    assert len(first) == 2
    everything = nova.servers.list(search_opts={"all_tenants": 1},
                                   limit=-1)
    assert sorted(s.name for s in everything) == names
    assert len({s.id for s in everything}) == 5
    listing = [r for r in fake.requests if r["path"].endswith("/detail")]
    # pages of 2, 2, 1, then the empty page that ends novaclient's loop
    assert [bool(r["query"].get("marker")) for r in listing[1:]] == [
        False, True, True, True]
    on_c1 = nova.servers.list(search_opts={"all_tenants": 1, "host": "c1"},
                              limit=-1)
    assert len(on_c1) == 4
    with pytest.raises(nova_exc.BadRequest):
        nova.servers.list(marker="no-such-marker")


def test_server_fields_follow_microversion_and_role(fake: FakeNova,
                                                    nova: Any) -> None:
    uuid = fake.add_server("vm", "c1", locked_by="admin",
                           locked_reason="maintenance",
                           metadata={"ha": "true"})
    server = nova.servers.get(uuid)
    assert getattr(server, "OS-EXT-SRV-ATTR:host") == "c1"
    assert getattr(server, "OS-EXT-STS:vm_state") == "active"
    assert getattr(server, "OS-EXT-STS:power_state") == 1
    assert (server.locked, server.locked_reason) == (True, "maintenance")
    assert server.metadata == {"ha": "true"}
    old = make_client(fake, version="2.8").servers.get(uuid)
    assert not hasattr(old, "locked")
    owner = make_client(fake, token=OWNER).servers.get(uuid)
    assert not hasattr(owner, "OS-EXT-SRV-ATTR:host")
    assert owner.status == "ACTIVE"


def test_non_admin_sees_own_project_only(fake: FakeNova) -> None:
    fake.add_server("mine", "c1", project_id="demo")
    theirs = fake.add_server("theirs", "c1", project_id="other")
    owner = make_client(fake, token=OWNER)
    assert [s.name for s in owner.servers.list()] == ["mine"]
    with pytest.raises(nova_exc.Forbidden):
        owner.servers.list(search_opts={"all_tenants": 1})
    with pytest.raises(nova_exc.NotFound):
        owner.servers.get(theirs)


# -- locks -----------------------------------------------------------------
def test_lock_owner_and_admin(fake: FakeNova, nova: Any) -> None:
    uuid = fake.add_server("vm", "c1", project_id="demo")
    owner = make_client(fake, token=OWNER)
    owner.servers.lock(uuid, reason="mine")
    assert fake.server(uuid)["locked_by"] == "owner"
    owner.servers.lock(uuid, reason="again")  # no-op for the owner
    assert fake.server(uuid)["locked_reason"] == "mine"
    nova.servers.lock(uuid, reason="recovery")  # admin of another project
    snap = fake.server(uuid)
    assert (snap["locked_by"], snap["locked_reason"]) == ("admin",
                                                          "recovery")
    with pytest.raises(nova_exc.Forbidden):
        owner.servers.unlock(uuid)
    nova.servers.unlock(uuid)
    snap = fake.server(uuid)
    assert (snap["locked"], snap["locked_reason"]) == (False, None)
    events = [(e["event"], e["by"]) for e in fake.lock_events]
    assert events == [("lock", "owner"), ("lock", "admin"),
                      ("unlock", "admin")]


def test_owner_may_lift_own_lock(fake: FakeNova) -> None:
    uuid = fake.add_server("vm", "c1", locked_by="owner")
    make_client(fake, token=OWNER).servers.unlock(uuid)
    assert not fake.server(uuid)["locked"]


def test_stop_start_and_lock_conflict(fake: FakeNova, nova: Any) -> None:
    uuid = fake.add_server("vm", "c1", locked_by="admin")
    owner = make_client(fake, token=OWNER)
    with pytest.raises(nova_exc.Conflict):
        owner.servers.stop(uuid)
    nova.servers.stop(uuid)  # admins act on locked servers
    assert fake.server(uuid)["task_state"] == "powering-off"
    wait_for(lambda: fake.server(uuid)["status"] == "SHUTOFF")
    assert fake.server(uuid)["power_state"] == 4
    with pytest.raises(nova_exc.Conflict):
        nova.servers.stop(uuid)
    nova.servers.start(uuid)
    wait_for(lambda: fake.server(uuid)["status"] == "ACTIVE")


def test_reset_state_is_admin_only(fake: FakeNova, nova: Any) -> None:
    uuid = fake.add_server("vm", "c1", task_state="powering-off")
    with pytest.raises(nova_exc.Forbidden):
        make_client(fake, token=OWNER).servers.reset_state(uuid, "active")
    nova.servers.reset_state(uuid, "error")
    snap = fake.server(uuid)
    assert (snap["vm_state"], snap["task_state"]) == ("error", None)


# -- evacuation refusals ---------------------------------------------------
def test_evacuate_refused_while_source_up(fake: FakeNova,
                                          nova: Any) -> None:
    uuid = fake.add_server("vm", "c1")
    with pytest.raises(nova_exc.BadRequest, match="still in use"):
        nova.servers.evacuate(uuid)
    fake.fail_host("c1")  # down by heartbeat alone is enough
    nova.servers.evacuate(uuid)
    assert len(fake.evacuate_calls) == 1


def test_evacuate_accepted_whatever_the_task_state(fake: FakeNova,
                                                   nova: Any) -> None:
    """nova 34 checks evacuate's vm_state only (task_state=None)."""
    uuid = fake.add_server("vm", "c1", task_state="powering-off")
    fence(fake, nova, "c1")
    nova.servers.evacuate(uuid)
    assert evacuated(fake, uuid)["status"] == "ACTIVE"


def test_evacuate_target_validation(fake: FakeNova, nova: Any) -> None:
    uuid = fake.add_server("vm", "c1")
    fence(fake, nova, "c1")
    with pytest.raises(nova_exc.NotFound):
        nova.servers.evacuate(uuid, host="nowhere")
    with pytest.raises(nova_exc.BadRequest, match="same one"):
        nova.servers.evacuate(uuid, host="c1")
    with pytest.raises(nova_exc.Forbidden):
        make_client(fake, token=OWNER).servers.evacuate(uuid)
    sess = nova.client.session
    resp = sess.post(f"{fake.endpoint}/servers/{uuid}/action",
                     json={"evacuate": {"force": True}},
                     headers={"OpenStack-API-Version": "compute 2.94"},
                     raise_exc=False)
    assert resp.status_code == 400  # force was removed in 2.68


# -- evacuation outcomes ---------------------------------------------------
def test_successful_evacuation(fake: FakeNova, nova: Any) -> None:
    fake.add_server("busy", "c2")
    uuid = fake.add_server("vm", "c1", locked_by="admin")
    fence(fake, nova, "c1")
    resp, body = nova.servers.evacuate(uuid)
    assert (resp.status_code, body) == (200, None)
    assert fake.server(uuid)["status"] == "REBUILD"
    server = evacuated(fake, uuid, dest="c3")  # fewest servers
    assert server["status"] == "ACTIVE"
    migrations = nova.migrations.list(source_compute="c1",
                                      migration_type="evacuation")
    assert [(m.status, m.dest_compute, m.instance_uuid)
            for m in migrations] == [("done", "c3", uuid)]
    call = fake.evacuate_calls[0]
    assert (call["source"], call["target"], call["dest"]) == ("c1", None,
                                                              "c3")


def test_evacuation_to_requested_host(fake: FakeNova, nova: Any) -> None:
    uuid = fake.add_server("vm", "c1")
    fence(fake, nova, "c1")
    nova.servers.evacuate(uuid, host="c2")
    evacuated(fake, uuid, dest="c2")
    assert fake.evacuate_calls[0]["target"] == "c2"


def test_host_moves_after_state_is_final() -> None:
    with FakeNova(evacuation_latency=LATENCY, host_move_lag=0.3) as lagged:
        lagged.add_compute("c1")
        lagged.add_compute("c2")
        uuid = lagged.add_server("vm", "c1")
        client = make_client(lagged)
        fence(lagged, client, "c1")
        client.servers.evacuate(uuid)
        wait_for(lambda: lagged.server(uuid)["task_state"] is None)
        snap = lagged.server(uuid)
        assert (snap["status"], snap["host"]) == ("ACTIVE", "c1")
        assert lagged.migrations()[0]["status"] == "pre-migrating"
        wait_for(lambda: lagged.server(uuid)["host"] == "c2")
        assert lagged.migrations()[0]["status"] == "done"


@pytest.mark.parametrize("version, vm_state, expected", [
    ("2.94", "active", "ACTIVE"),
    ("2.95", "active", "SHUTOFF"),
    ("2.94", "stopped", "SHUTOFF"),
    ("2.95", "stopped", "SHUTOFF"),
    ("2.94", "error", "ACTIVE"),
])
def test_end_state_by_microversion(fake: FakeNova, version: str,
                                   vm_state: str, expected: str) -> None:
    uuid = fake.add_server("vm", "c1", vm_state=vm_state)
    client = make_client(fake, version=version)
    fence(fake, client, "c1")
    client.servers.evacuate(uuid)
    assert evacuated(fake, uuid)["status"] == expected


def test_evacuation_outcome_error(fake: FakeNova, nova: Any) -> None:
    uuid = fake.add_server("vm", "c1")
    fake.set_evacuation_outcome(uuid, "error")
    fence(fake, nova, "c1")
    nova.servers.evacuate(uuid)
    wait_for(lambda: fake.server(uuid)["vm_state"] == "error")
    snap = fake.server(uuid)
    assert (snap["host"], snap["task_state"]) == ("c1", None)
    [migration] = nova.migrations.list(instance_uuid=uuid)
    assert migration.status == "failed"
    assert nova.servers.get(uuid).fault["code"] == 500


def test_evacuation_outcome_hang(fake: FakeNova, nova: Any) -> None:
    uuid = fake.add_server("vm", "c1")
    witness = fake.add_server("witness", "c1")
    fake.set_evacuation_outcome(uuid, "hang")
    fence(fake, nova, "c1")
    nova.servers.evacuate(uuid)
    nova.servers.evacuate(witness)
    # the witness, evacuated later, finishing shows time enough has passed
    wait_for(lambda: fake.server(witness)["host"] != "c1")
    snap = fake.server(uuid)
    assert (snap["task_state"], snap["host"]) == ("rebuilding", "c1")
    assert fake.migrations()[0]["status"] == "pre-migrating"
    fake.set_evacuation_outcome(uuid, None)
    nova.servers.reset_state(uuid, "active")  # the recovery for a hang
    nova.servers.evacuate(uuid)
    evacuated(fake, uuid)


def test_no_valid_host(fake: FakeNova, nova: Any) -> None:
    uuid = fake.add_server("vm", "c1")
    for host in ("c2", "c3"):
        nova.services.disable_log_reason(fake.service(host)["id"], "maint")
    fence(fake, nova, "c1")
    nova.servers.evacuate(uuid)
    wait_for(lambda: fake.server(uuid)["vm_state"] == "error")
    assert fake.migrations()[0]["status"] == "error"
    assert fake.evacuate_calls[0]["dest"] is None


# -- fault injection -------------------------------------------------------
def test_inject_status(fake: FakeNova, nova: Any) -> None:
    fake.inject("GET", r"/servers/detail$", status=503, times=2)
    for _ in range(2):
        with pytest.raises(nova_exc.ClientException) as err:
            nova.servers.list()
        assert err.value.code == 503
    assert nova.servers.list() == []
    statuses = [r["status"] for r in fake.requests]
    assert statuses == [503, 503, 200]


def test_inject_after_executes_then_fails(fake: FakeNova,
                                          nova: Any) -> None:
    uuid = fake.add_server("vm", "c1")
    fence(fake, nova, "c1")
    fake.inject("POST", r"/servers/.*/action$", action="evacuate",
                status=500, after=True)
    with pytest.raises(nova_exc.ClientException) as err:
        nova.servers.evacuate(uuid)
    assert err.value.code == 500
    assert len(fake.evacuate_calls) == 1
    evacuated(fake, uuid)
    assert fake.requests[-1]["action"] == "evacuate"


def test_inject_action_filter(fake: FakeNova, nova: Any) -> None:
    uuid = fake.add_server("vm", "c1")
    fake.inject("POST", r"/action$", action="unlock", status=500)
    nova.servers.lock(uuid)  # not matched: a different action
    with pytest.raises(nova_exc.ClientException):
        nova.servers.unlock(uuid)
    assert fake.server(uuid)["locked"]


def test_inject_delay_trips_client_timeout(fake: FakeNova) -> None:
    fake.inject("GET", r"/os-services$", delay=1.0)
    impatient = make_client(fake, timeout=0.2)
    started = time.monotonic()
    with pytest.raises(ks_exc.ConnectTimeout):
        impatient.services.list()
    assert time.monotonic() - started < 0.9
    assert len(impatient.services.list(binary="nova-compute")) == 3


# -- the request log --------------------------------------------------------
def test_request_log_names_the_client(fake: FakeNova) -> None:
    """Each request's User-Agent is kept: the multi-engine tests tell by it
    which engine sent what."""
    auth = loading.get_plugin_loader("admin_token").load_from_options(
        endpoint=fake.endpoint, token=ADMIN)
    for agent in ("controller-1:101", "controller-2:202"):
        nova_client.Client(
            "2.94", session=ks_session.Session(auth=auth),
            endpoint_override=fake.endpoint,
            user_agent=agent).servers.list()
    agents = [r["user_agent"] for r in fake.requests]
    assert agents == ["controller-1:101", "controller-2:202"]


# -- services --------------------------------------------------------------
def test_services_force_down_and_disable(fake: FakeNova, nova: Any) -> None:
    service_id = fake.service("c1")["id"]
    [svc] = nova.services.list(host="c1", binary="nova-compute")
    assert (svc.id, svc.state, svc.status) == (service_id, "up", "enabled")
    nova.services.force_down(service_id, True)
    nova.services.disable_log_reason(service_id, "host failed")
    [svc] = nova.services.list(host="c1", binary="nova-compute")
    assert (svc.state, svc.status, svc.forced_down,
            svc.disabled_reason) == ("down", "disabled", True,
                                     "host failed")
    nova.services.force_down(service_id, False)
    nova.services.enable(service_id)
    snap = fake.service("c1")
    assert (snap["state"], snap["status"], snap["disabled_reason"]) == (
        "up", "enabled", None)
    with pytest.raises(nova_exc.Forbidden):
        make_client(fake, token=OWNER).services.list()
    assert len(nova.services.list()) == 5  # with conductor and scheduler


def test_force_up_refused_until_compute_restarts(fake: FakeNova,
                                                 nova: Any) -> None:
    uuid = fake.add_server("vm", "c1")
    fence(fake, nova, "c1")
    nova.servers.evacuate(uuid)
    evacuated(fake, uuid)
    service_id = fake.service("c1")["id"]
    with pytest.raises(nova_exc.BadRequest, match="completed"):
        nova.services.force_down(service_id, False)
    fake.restore_host("c1")
    assert fake.migrations()[0]["status"] == "completed"
    nova.services.force_down(service_id, False)
    assert fake.service("c1")["state"] == "up"


def test_enable_while_down_keeps_placement_trait(fake: FakeNova,
                                                 nova: Any) -> None:
    service_id = fake.service("c3")["id"]
    nova.services.disable_log_reason(service_id, "maintenance")
    nova.services.force_down(service_id, True)
    nova.services.enable(service_id)  # too early: still down
    nova.services.force_down(service_id, False)
    assert fake.service("c3")["placement_disabled"]
    uuid = fake.add_server("vm", "c1")
    fence(fake, nova, "c1")
    nova.servers.evacuate(uuid, host="c3")
    wait_for(lambda: fake.server(uuid)["vm_state"] == "error")
    assert fake.migrations()[0]["status"] == "error"


def test_heartbeats_like_novas_with_a_report_interval() -> None:
    """report_interval: updated_at is each compute's last heartbeat, at
    its own phase; a failed host stays up until service_down_time."""
    interval, down_time = 0.2, 0.6

    with FakeNova(report_interval=interval,
                  service_down_time=down_time) as fake:
        for host in ("c1", "c2", "c3"):
            fake.add_compute(host)
        nova = make_client(fake)

        def computes() -> dict[str, tuple[str, datetime.datetime]]:
            return {s.host: (s.state, datetime.datetime.strptime(
                s.updated_at, "%Y-%m-%dT%H:%M:%S.%f"))
                for s in nova.services.list(binary="nova-compute")}

        beats: dict[str, set[datetime.datetime]] = {}
        deadline = time.monotonic() + 3 * interval
        while time.monotonic() < deadline:
            for host, (state, updated) in computes().items():
                age = (utcnow() - updated).total_seconds()
                assert state == "up" and 0 <= age < interval + 0.05, age
                beats.setdefault(host, set()).add(updated)
            time.sleep(interval / 8)
        for seen in beats.values():
            ordered = sorted(seen)
            steps = {round((ordered[n] - ordered[n - 1]).total_seconds(), 3)
                     for n in range(1, len(ordered))}
            assert len(seen) >= 3 and steps == {interval}, seen
        phases = {round(min(seen).timestamp() % interval, 3)
                  for seen in beats.values()}
        assert len(phases) == 3, phases

        last = computes()["c1"][1]
        fake.fail_host("c1")
        frozen = computes()["c1"][1]
        assert frozen in (last, last + datetime.timedelta(seconds=interval))
        state, updated = computes()["c1"]
        assert (state, updated) == ("up", frozen)
        wait_for(lambda: computes()["c1"][0] == "down", timeout=2)
        assert (utcnow() - frozen).total_seconds() > down_time
        assert computes()["c1"][1] == frozen
        assert computes()["c2"][0] == "up"

        nova.services.force_down(fake.service("c2")["id"], True)
        assert computes()["c2"][0] == "down"  # forced: at once

        fake.restore_host("c1")
        state, updated = computes()["c1"]
        assert state == "up" and (utcnow() - updated).total_seconds() < (
            interval)


# -- migrations and aggregates ---------------------------------------------
def test_migrations_filters_and_paging(fake: FakeNova) -> None:
    nova = make_client(fake, version="2.80")
    ids = [fake.add_server(f"vm{i}", "c1") for i in range(3)]
    fence(fake, nova, "c1")
    before = datetime.datetime.now(datetime.timezone.utc)
    for uuid in ids:
        nova.servers.evacuate(uuid)
    wait_for(lambda: all(m["status"] == "done"
                         for m in fake.migrations()))
    since = before.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    found = nova.migrations.list(changes_since=since,
                                 migration_type="evacuation")
    assert sorted(m.instance_uuid for m in found) == sorted(ids)
    assert found[0].uuid and found[0].project_id == "demo"
    [one] = nova.migrations.list(instance_uuid=ids[1])
    page = nova.migrations.list(limit=2)
    rest = nova.migrations.list(limit=2, marker=page[-1].uuid)
    assert len(page) == 2 and len(rest) == 1
    assert one.uuid in {m.uuid for m in page + rest}
    future = "2999-01-01T00:00:00Z"
    assert nova.migrations.list(changes_since=future) == []


def test_aggregates_add_remove_host(fake: FakeNova, nova: Any) -> None:
    ident = fake.add_aggregate("ha", ["c1"])
    [aggregate] = nova.aggregates.list()
    assert (aggregate.id, aggregate.hosts) == (ident, ["c1"])
    assert nova.aggregates.add_host(ident, "c2").hosts == ["c1", "c2"]
    with pytest.raises(nova_exc.Conflict):
        nova.aggregates.add_host(ident, "c2")
    with pytest.raises(nova_exc.NotFound):
        nova.aggregates.add_host(ident, "nowhere")
    assert nova.aggregates.remove_host(ident, "c1").hosts == ["c2"]
    with pytest.raises(nova_exc.NotFound):
        nova.aggregates.remove_host(ident, "c1")


def test_evacuate_before_2_14_returns_password(fake: FakeNova) -> None:
    uuid = fake.add_server("vm", "c1")
    fence(fake, make_client(fake), "c1")
    old = make_client(fake, version="2.13")
    _resp, body = old.servers.evacuate(uuid, on_shared_storage=False)
    assert body["adminPass"]
    evacuated(fake, uuid)


def test_stop_on_dead_host_never_finishes(fake: FakeNova,
                                          nova: Any) -> None:
    uuid = fake.add_server("vm", "c1")
    witness = fake.add_server("witness", "c2")
    fake.fail_host("c1")
    nova.servers.stop(uuid)  # accepted: only instance.host is checked
    nova.servers.stop(witness)
    wait_for(lambda: fake.server(witness)["status"] == "SHUTOFF")
    assert fake.server(uuid)["task_state"] == "powering-off"
    nova.servers.evacuate(uuid)  # over the stuck task, as nova 34 does
    evacuated(fake, uuid)


def test_concurrent_evacuations_spread(fake: FakeNova, nova: Any) -> None:
    ids = [fake.add_server(f"vm{i}", "c1") for i in range(30)]
    fence(fake, nova, "c1")
    with concurrent.futures.ThreadPoolExecutor(max_workers=10) as pool:
        list(pool.map(nova.servers.evacuate, ids))
    wait_for(lambda: all(m["status"] == "done"
                         for m in fake.migrations()))
    hosts = [fake.server(uuid)["host"] for uuid in ids]
    assert sorted(set(hosts)) == ["c2", "c3"]
    assert abs(hosts.count("c2") - hosts.count("c3")) <= 1


def test_legacy_services_api_before_2_53(fake: FakeNova) -> None:
    old = make_client(fake, version="2.11")
    old.services.force_down("c2", "nova-compute", True)
    old.services.disable_log_reason("c2", "nova-compute", "broken")
    [svc] = old.services.list(host="c2")
    assert isinstance(svc.id, int)
    assert (svc.state, svc.status, svc.disabled_reason) == (
        "down", "disabled", "broken")
    with pytest.raises(nova_exc.BadRequest):
        old.services.disable("c2", "nova-scheduler")
