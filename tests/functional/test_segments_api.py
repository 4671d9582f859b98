"""Failover segments and hosts over real HTTP (Masakari's API): CRUD,
validation, the Nova check of host names, edits refused during a
recovery, the intake rules they drive, and openstacksdk against it."""

import dataclasses
import datetime
from collections.abc import Iterator
from typing import Any

import pytest

from recovery.api import auth
from recovery.db.claims import Holder
from recovery.db.store import Store
from recovery.db.store import open_store
from recovery.notification import Status
from tests.functional.test_api import TOKEN
from tests.functional.test_api import Hosts
from tests.functional.test_api import Reply
from tests.functional.test_api import api_conf
from tests.functional.test_api import make_api
from tests.functional.test_api import notification
from tests.functional.test_api import openstack_client
from tests.functional.test_api import request
from tests.functional.test_api import serving

UTC = datetime.timezone.utc
OWNER = "engine-test:1"


@dataclasses.dataclass
class Client:
    store: Store
    hosts: Hosts
    port: int

    def call(self, method: str, path: str, body: Any = None,
             version: str = "1.3", **kwargs: Any) -> Reply:
        """At ``version``: the latest, as python-masakariclient asks."""
        return request(self.port, method, path, body, headers={
            "OpenStack-API-Version": f"instance-ha {version}"}, **kwargs)

    def get(self, path: str) -> Reply:
        return self.call("GET", path)

    def segment(self, name: str = "rack-1", **fields: Any) -> dict[str, Any]:
        """A new segment's view."""
        reply = self.call("POST", "/v1/segments", {"segment": {
            "name": name, "recovery_method": "auto", **fields}})
        assert reply.status == 201, reply.text
        return reply.json["segment"]

    def host(self, segment: dict[str, Any], name: str = "compute-1",
             **fields: Any) -> dict[str, Any]:
        """A new host's view, in ``segment``."""
        reply = self.call("POST", f"/v1/segments/{segment['uuid']}/hosts",
                          {"host": {"name": name, **fields}})
        assert reply.status == 201, reply.text
        return reply.json["host"]

    def notify(self, hostname: str = "compute-1") -> dict[str, Any]:
        reply = self.call("POST", "/v1/notifications",
                          notification(hostname=hostname))
        assert reply.status == 202, reply.text
        return reply.json["notification"]


@pytest.fixture
def store(tmp_path) -> Iterator[Store]:
    store = open_store(f"sqlite:///{tmp_path}/segments.sqlite")
    yield store
    store.close()


@pytest.fixture
def api(store) -> Iterator[Client]:
    hosts = Hosts()
    with serving(make_api(store, hosts, [])) as port:
        yield Client(store, hosts, port)


# -- segments ----------------------------------------------------------------
def test_segment_create_show_list_update_delete(api):
    reply = api.call("POST", "/v1/segments", {"segment": {
        "name": "rack-1", "recovery_method": "reserved_host",
        "description": "first rack", "service_type": "COMPUTE"}})
    assert reply.status == 201, reply.text
    created = reply.json["segment"]
    assert created == {
        "id": created["id"], "uuid": created["uuid"], "name": "rack-1",
        "description": "first rack", "recovery_method": "reserved_host",
        "service_type": "COMPUTE", "enabled": True,
        "created_at": "2026-11-22T10:00:01.000000",
        "updated_at": "2026-11-22T10:00:01.000000",
        "deleted": False, "deleted_at": None}
    path = f"/v1/segments/{created['uuid']}"
    assert api.get(path).json == {"segment": created}
    assert api.get("/v1/segments").json == {"segments": [created]}

    updated = api.call("PUT", path, {"segment": {
        "name": "rack-one", "description": None, "enabled": False,
        "recovery_method": "auto"}})
    assert updated.status == 200, updated.text
    body = updated.json["segment"]
    assert (body["name"], body["description"], body["enabled"],
            body["recovery_method"]) == ("rack-one", None, False, "auto")
    assert body["updated_at"] == "2026-11-22T10:00:02.000000"
    assert api.get(path).json["segment"] == body

    deleted = api.call("DELETE", path)
    assert deleted.status == 204, deleted.text
    assert deleted.text == ""
    assert api.get(path).status == 404
    assert api.store.list_segments() == []


def test_segment_defaults(api):
    segment = api.segment()
    assert segment["service_type"] == "compute"
    assert segment["enabled"] is True
    assert segment["description"] is None


def test_free_text_has_masakari_s_length_none(api):
    """A description and control attributes are TEXT, as in Masakari;
    a host's type may be empty, as there."""
    long = "line one\n" + "x" * 1000
    segment = api.segment(description=long)
    assert api.get(f"/v1/segments/{segment['uuid']}").json["segment"][
        "description"] == long
    host = api.host(segment, control_attributes=long, type="")
    shown = api.get(f"/v1/segments/{segment['uuid']}/hosts/{host['uuid']}")
    assert (shown.json["host"]["control_attributes"],
            shown.json["host"]["type"]) == (long, "")
    updated = api.call("PUT", f"/v1/segments/{segment['uuid']}", {
        "segment": {"description": long[::-1]}})
    assert updated.json["segment"]["description"] == long[::-1]


def test_a_segment_is_found_by_name_too(api):
    segment = api.segment("rack-1")
    assert api.get("/v1/segments/rack-1").json["segment"] == segment


def _segment(**fields: Any) -> dict[str, Any]:
    body = {"name": "rack-1", "recovery_method": "auto", **fields}
    return {"segment": {k: v for k, v in body.items() if v is not None}}


@pytest.mark.parametrize("body,field", [
    (_segment(name=None), "'name' is a required property"),
    (_segment(recovery_method=None),
     "'recovery_method' is a required property"),
    (_segment(recovery_method="manual"), "segment.recovery_method"),
    (_segment(color="red"), "'color' was unexpected"),
    (_segment(id=7), "'id' was unexpected"),
    (_segment(name=""), "segment.name"),
    (_segment(name="x" * 256), "segment.name"),
    (_segment(name=" rack"), "segment.name"),
    (_segment(name=5), "segment.name"),
    (_segment(description=5), "segment.description"),
    (_segment(service_type=""), "segment.service_type"),
    (_segment(enabled=3), "segment.enabled"),
    (_segment(enabled="maybe"), "segment.enabled"),
    (_segment(enabled=None) | {"extra": 1}, "'extra' was unexpected"),
    ({"name": "rack-1", "recovery_method": "auto"}, "'segment'"),
    ({"segment": "rack-1"}, "body.segment"),
    ([], "body"),
])
def test_segment_schema_errors_name_the_field(api, body, field):
    reply = api.call("POST", "/v1/segments", body)
    assert reply.status == 400, reply.text
    assert "badRequest" in reply.json
    assert field in reply.message
    assert api.store.list_segments() == []


@pytest.mark.parametrize("body,field", [
    ({"segment": {}}, "body.segment"),
    ({"segment": {"recovery_method": "manual"}}, "recovery_method"),
    ({"segment": {"uuid": "x"}}, "'uuid' was unexpected"),
    ({"segment": {"enabled": []}}, "segment.enabled"),
    ({}, "'segment' is a required property"),
])
def test_segment_update_schema_errors_change_nothing(api, body, field):
    segment = api.segment()
    reply = api.call("PUT", f"/v1/segments/{segment['uuid']}", body)
    assert reply.status == 400, reply.text
    assert field in reply.message
    assert api.get(f"/v1/segments/{segment['uuid']}").json == {
        "segment": segment}


def test_segment_create_needs_json(api):
    reply = api.call("POST", "/v1/segments", b"name=rack-1",
                     content_type="application/x-www-form-urlencoded")
    assert reply.status == 415, reply.text
    assert api.store.list_segments() == []


def test_booleans_as_masakari_clients_send_them(api):
    """python-masakariclient sends its booleans as strings."""
    segment = api.segment(enabled="False")
    assert segment["enabled"] is False
    host = api.host(segment, reserved="True", on_maintenance="no")
    assert (host["reserved"], host["on_maintenance"]) == (True, False)


def test_duplicate_segment_names_are_409(api):
    api.segment("rack-1")
    other = api.segment("rack-2")
    reply = api.call("POST", "/v1/segments", _segment(name="rack-1"))
    assert reply.status == 409, reply.text
    assert "conflictingRequest" in reply.json
    assert "rack-1" in reply.message
    renamed = api.call("PUT", f"/v1/segments/{other['uuid']}",
                       {"segment": {"name": "rack-1"}})
    assert renamed.status == 409, renamed.text
    assert sorted(s.name for s in api.store.list_segments()) == [
        "rack-1", "rack-2"]


def listed(api: Client, query: str = "") -> list[str]:
    reply = api.get(f"/v1/segments{query}")
    assert reply.status == 200, reply.text
    return [s["name"] for s in reply.json["segments"]]


def test_segment_list_filters_and_pages(api):
    api.segment("a", recovery_method="auto")
    api.segment("b", recovery_method="reserved_host", enabled=False)
    api.segment("c", recovery_method="auto", service_type="other")
    newest = listed(api)
    assert newest == ["c", "b", "a"]
    assert listed(api, "?recovery_method=auto") == ["c", "a"]
    assert listed(api, "?service_type=compute") == ["b", "a"]
    assert listed(api, "?enabled=false") == ["b"]
    assert listed(api, "?is_enabled=True") == ["c", "a"]
    first = api.get("/v1/segments?limit=2").json["segments"]
    assert [s["name"] for s in first] == ["c", "b"]
    assert listed(api, f"?limit=2&marker={first[-1]['uuid']}") == ["a"]
    # openstacksdk pages with the integer id.
    assert listed(api, f"?limit=2&marker={first[-1]['id']}") == ["a"]
    # An empty page, as Masakari answers it.
    assert listed(api, "?limit=0") == []
    assert api.get(f"/v1/segments/{first[0]['uuid']}/hosts?limit=0"
                   ).json == {"hosts": []}


def test_segment_list_sorts(api):
    api.segment("b", recovery_method="reserved_host")
    api.segment("c", recovery_method="auto")
    api.segment("a", recovery_method="rh_priority")
    assert listed(api, "?sort_key=name&sort_dir=asc") == ["a", "b", "c"]
    assert listed(api, "?sort_key=name") == ["c", "b", "a"]
    assert listed(api, "?sort_key=created_at&sort_dir=asc") == [
        "b", "c", "a"]
    assert listed(api, "?sort_key=recovery_method&sort_dir=asc") == [
        "c", "b", "a"]
    first = api.get("/v1/segments?sort_key=name&sort_dir=asc&limit=2")
    after = first.json["segments"][-1]["id"]
    assert listed(api, f"?sort_key=name&sort_dir=asc&marker={after}") == [
        "c"]


def test_enabled_came_with_microversion_1_2(api):
    """As Masakari's schema: before 1.2, a segment has no enabled flag to
    send, and one that sends it is refused with nothing stored."""
    body = {"segment": {"name": "rack-1", "recovery_method": "auto",
                        "enabled": False}}
    for version in ("1.0", "1.1"):
        reply = api.call("POST", "/v1/segments", body, version=version)
        assert reply.status == 400, reply.text
        assert "'enabled' was unexpected" in reply.message
    assert listed(api) == []
    reply = api.call("POST", "/v1/segments", body, version="1.2")
    assert reply.status == 201, reply.text
    segment = reply.json["segment"]
    path = f"/v1/segments/{segment['uuid']}"
    refused = api.call("PUT", path, {"segment": {"enabled": True}},
                       version="1.1")
    assert refused.status == 400, refused.text
    assert api.get(path).json["segment"]["enabled"] is False
    # Everything else a 1.0 client sends is as before.
    renamed = api.call("PUT", path, {"segment": {"name": "rack-2"}},
                       version="1.0")
    assert renamed.status == 200, renamed.text


@pytest.mark.parametrize("query,field", [
    ("recovery_method=manual", "recovery_method"),
    ("enabled=maybe", "enabled"),
    ("is_enabled=", "is_enabled"),
    ("limit=-2", "limit"),
    ("limit=two", "limit"),
    ("marker=6f1d7a3e-0000-0000-0000-000000000000", "marker"),
    ("sort_key=description", "sort_key"),
    ("sort_key=nope", "sort_key"),
    ("sort_dir=sideways", "sort_dir"),
    ("sort_key=name&sort_key=id", "sort_key"),
])
def test_segment_list_bad_query_is_400(api, query, field):
    api.segment()
    reply = api.get(f"/v1/segments?{query}")
    assert reply.status == 400, reply.text
    assert reply.message.startswith(f"{field}:")


# -- hosts -------------------------------------------------------------------
def test_host_create_show_list_update_delete(api):
    segment = api.segment()
    base = f"/v1/segments/{segment['uuid']}/hosts"
    reply = api.call("POST", base, {"host": {
        "name": "compute-1", "type": "COMPUTE", "control_attributes": "SSH",
        "reserved": True, "on_maintenance": False}})
    assert reply.status == 201, reply.text
    host = reply.json["host"]
    assert host == {
        "id": host["id"], "uuid": host["uuid"], "name": "compute-1",
        "type": "COMPUTE", "control_attributes": "SSH", "reserved": True,
        "on_maintenance": False, "failover_segment_id": segment["uuid"],
        "failover_segment": segment,
        "created_at": "2026-11-22T10:00:02.000000",
        "updated_at": "2026-11-22T10:00:02.000000",
        "deleted": False, "deleted_at": None}
    assert api.hosts.checked == ["compute-1"]
    path = f"{base}/{host['uuid']}"
    assert api.get(path).json == {"host": host}
    assert api.get(f"{base}/compute-1").json == {"host": host}
    assert api.get(base).json == {"hosts": [host]}

    updated = api.call("PUT", path, {"host": {
        "reserved": False, "on_maintenance": True, "type": "BAREMETAL",
        "control_attributes": ""}})
    assert updated.status == 200, updated.text
    body = updated.json["host"]
    assert (body["reserved"], body["on_maintenance"], body["type"],
            body["control_attributes"]) == (False, True, "BAREMETAL", "")
    # No rename: Nova was not asked again.
    assert api.hosts.checked == ["compute-1"]

    deleted = api.call("DELETE", path)
    assert deleted.status == 204, deleted.text
    assert api.get(path).status == 404
    assert api.get(base).json == {"hosts": []}


def test_host_defaults(api):
    host = api.host(api.segment())
    assert (host["type"], host["control_attributes"], host["reserved"],
            host["on_maintenance"]) == ("COMPUTE", "", False, False)


def test_host_list_filters(api):
    segment = api.segment()
    api.hosts.services.add("compute-3")
    api.host(segment, "compute-1", reserved=True)
    api.host(segment, "compute-2", on_maintenance=True)
    api.host(segment, "compute-3", type="OTHER")
    base = f"/v1/segments/{segment['uuid']}/hosts"

    def names(query: str) -> list[str]:
        reply = api.get(f"{base}?{query}")
        assert reply.status == 200, reply.text
        return [h["name"] for h in reply.json["hosts"]]

    assert names("") == ["compute-3", "compute-2", "compute-1"]
    assert names("reserved=true") == ["compute-1"]
    assert names("on_maintenance=1") == ["compute-2"]
    assert names("type=OTHER") == ["compute-3"]
    assert names("name=compute-2") == ["compute-2"]
    assert names("limit=1&marker=compute-2") == ["compute-1"]
    assert names("sort_key=name&sort_dir=asc") == [
        "compute-1", "compute-2", "compute-3"]
    assert names("sort_key=type&sort_dir=desc&limit=1") == ["compute-3"]
    assert names("sort_key=reserved&sort_dir=desc&limit=1") == [
        "compute-1"]
    assert names("sort_key=name&sort_dir=asc&marker=compute-2") == [
        "compute-3"]
    for query in ("reserved=perhaps", "marker=compute-9", "sort_key=nope",
                  "sort_key=claimed_by", "sort_dir=random"):
        assert api.get(f"{base}?{query}").status == 400, query


def _host(**fields: Any) -> dict[str, Any]:
    body = {"name": "compute-1", **fields}
    return {"host": {k: v for k, v in body.items() if v is not None}}


@pytest.mark.parametrize("body,field", [
    (_host(name=None), "'name' is a required property"),
    (_host(name="compute 1"), "host.name"),
    (_host(name="compute-1\n"), "host.name"),
    (_host(name=""), "host.name"),
    (_host(name=["compute-1"]), "host.name"),
    (_host(reserved=3), "host.reserved"),
    (_host(on_maintenance="later"), "host.on_maintenance"),
    (_host(control_attributes=5), "host.control_attributes"),
    (_host(type=" COMPUTE"), "host.type"),
    (_host(type=5), "host.type"),
    (_host(failover_segment_id="x"), "'failover_segment_id' was unexpected"),
    ({"name": "compute-1"}, "'host'"),
])
def test_host_schema_errors_name_the_field(api, body, field):
    segment = api.segment()
    reply = api.call("POST", f"/v1/segments/{segment['uuid']}/hosts", body)
    assert reply.status == 400, reply.text
    assert field in reply.message
    assert api.hosts.checked == []
    assert api.store.list_hosts(segment["uuid"]) == []


def test_unknown_host_is_400(api):
    segment = api.segment()
    reply = api.call("POST", f"/v1/segments/{segment['uuid']}/hosts",
                     _host(name="compute-9"))
    assert reply.status == 400, reply.text
    assert reply.message.startswith("host.name:")
    assert "compute-9" in reply.message
    assert api.store.list_hosts(segment["uuid"]) == []


def test_nova_down_is_503_and_stores_nothing(api):
    segment = api.segment()
    api.hosts.nova_down = True
    reply = api.call("POST", f"/v1/segments/{segment['uuid']}/hosts",
                     _host())
    assert reply.status == 503, reply.text
    assert "could not check host compute-1 with Nova" in reply.message
    assert "nothing was stored" in reply.message
    assert api.store.list_hosts(segment["uuid"]) == []


def test_a_rename_is_checked_with_nova(api):
    segment = api.segment()
    host = api.host(segment)
    path = f"/v1/segments/{segment['uuid']}/hosts/{host['uuid']}"
    unknown = api.call("PUT", path, {"host": {"name": "compute-9"}})
    assert unknown.status == 400, unknown.text
    assert "compute-9" in unknown.message
    api.hosts.nova_down = True
    down = api.call("PUT", path, {"host": {"name": "compute-2"}})
    assert down.status == 503, down.text
    assert api.get(path).json["host"]["name"] == "compute-1"
    api.hosts.nova_down = False
    renamed = api.call("PUT", path, {"host": {"name": "compute-2"}})
    assert renamed.status == 200, renamed.text
    assert renamed.json["host"]["name"] == "compute-2"


def test_a_segment_host_takes_nova_s_own_name(api):
    """Segments name hosts as Nova does (the detector and the recovery
    methods look them up by it): an FQDN for Nova's short name is refused
    with the name to use."""
    segment = api.segment()
    reply = api.call("POST", f"/v1/segments/{segment['uuid']}/hosts",
                     _host(name="compute-1.example.com"))
    assert reply.status == 400, reply.text
    assert "use 'compute-1'" in reply.message
    assert api.get(f"/v1/segments/{segment['uuid']}/hosts").json == {
        "hosts": []}


def test_a_host_is_in_one_segment_only(api):
    first, second = api.segment("rack-1"), api.segment("rack-2")
    api.host(first, "compute-1")
    again = api.call("POST", f"/v1/segments/{second['uuid']}/hosts",
                     _host())
    assert again.status == 409, again.text
    assert "already in segment rack-1" in again.message
    twice = api.call("POST", f"/v1/segments/{first['uuid']}/hosts", _host())
    assert twice.status == 409, twice.text
    other = api.host(second, "compute-2")
    renamed = api.call(
        "PUT", f"/v1/segments/{second['uuid']}/hosts/{other['uuid']}",
        {"host": {"name": "compute-1"}})
    assert renamed.status == 409, renamed.text
    assert api.store.list_hosts(second["uuid"])[0].name == "compute-2"


def test_deleting_a_segment_deletes_its_hosts(api):
    segment = api.segment()
    api.host(segment)
    assert api.call("DELETE", f"/v1/segments/{segment['uuid']}").status == (
        204)
    assert api.store.host_record("compute-1") is None
    # The name is free again.
    api.host(api.segment("rack-2"))


# -- edits during a recovery -------------------------------------------------
@pytest.fixture
def in_recovery(api) -> dict[str, Any]:
    """rack-1 (compute-1, compute-2) with a new notification for
    compute-1."""
    segment = api.segment()
    hosts = {h: api.host(segment, h) for h in ("compute-1", "compute-2")}
    return {"segment": segment, "hosts": hosts, "notification": api.notify()}


def _run(store: Store, uuid: str) -> None:
    assert store.take(store.get(uuid), OWNER, 60) is not None


def _finish(store: Store, uuid: str, status: Status) -> None:
    store.finish(uuid, status, "done",
                 holder=Holder(OWNER, store.get(uuid).version, 60))


EDITS = [
    ("PUT", "", {"segment": {"recovery_method": "reserved_host"}}),
    ("DELETE", "", None),
    ("PUT", "/hosts/compute-1", {"host": {"on_maintenance": True}}),
    ("DELETE", "/hosts/compute-1", None),
    ("PUT", "/hosts/compute-2", {"host": {"reserved": True}}),
]


@pytest.mark.parametrize("status", ["new", "running", "error"])
@pytest.mark.parametrize("method,path,body", EDITS)
def test_edits_are_refused_during_a_recovery(api, in_recovery, status,
                                             method, path, body):
    uuid = in_recovery["notification"]["notification_uuid"]
    if status != "new":
        _run(api.store, uuid)
    if status == "error":
        _finish(api.store, uuid, Status.ERROR)
    assert api.store.get(uuid).status.value == status
    segment = in_recovery["segment"]
    reply = api.call(method, f"/v1/segments/{segment['uuid']}{path}", body)
    assert reply.status == 409, reply.text
    assert "recovery in flight" in reply.message
    assert uuid in reply.message
    assert f"is {status}" in reply.message
    assert f"recovery notifications show {uuid}" in reply.message
    assert api.get(f"/v1/segments/{segment['uuid']}").json == {
        "segment": segment}
    stored = {h.name: h for h in api.store.list_hosts(segment["uuid"])}
    assert sorted(stored) == ["compute-1", "compute-2"]
    assert not any(h.on_maintenance or h.reserved for h in stored.values())


@pytest.mark.parametrize("status", [Status.FINISHED, Status.FAILED])
def test_edits_are_allowed_once_the_recovery_ended(api, in_recovery,
                                                   status):
    uuid = in_recovery["notification"]["notification_uuid"]
    _run(api.store, uuid)
    _finish(api.store, uuid, status)
    base = f"/v1/segments/{in_recovery['segment']['uuid']}"
    for method, path, body in EDITS[2:] + EDITS[:2]:
        reply = api.call(method, base + path, body)
        assert reply.status in (200, 204), (method, path, reply.text)
    assert api.store.list_segments() == []


def test_a_host_can_be_added_during_a_recovery(api, in_recovery):
    """A reserved host added then is spare capacity for the recovery."""
    api.hosts.services.add("compute-3")
    host = api.host(in_recovery["segment"], "compute-3", reserved=True)
    assert host["reserved"] is True


# -- what segments do to intake ----------------------------------------------
def test_a_notification_names_the_segment_entry_of_its_host(api):
    """As in Masakari: source_host_uuid is the host's entry in its
    segment, and the listing filters by it."""
    segment = api.segment("rack-1")
    host = api.host(segment, "compute-2")
    api.notify("compute-1")
    stored = api.notify("compute-2")
    assert stored["source_host_uuid"] == host["uuid"]
    assert stored["failover_segment_uuid"] == segment["uuid"]
    reply = api.get(f"/v1/notifications?source_host_uuid={host['uuid']}")
    assert [n["notification_uuid"] for n in reply.json["notifications"]] \
        == [stored["notification_uuid"]]


def test_a_notification_for_a_host_in_a_disabled_segment_is_ignored(api):
    api.host(api.segment("rack-1", enabled=False))
    woken = api.notify()
    assert woken["status"] == "ignored"
    assert "segment rack-1 of host compute-1 is disabled" in woken["message"]
    assert api.store.get(woken["notification_uuid"]).status is (
        Status.IGNORED)


def test_a_notification_for_a_host_on_maintenance_is_ignored(api):
    api.host(api.segment("rack-1"), on_maintenance=True)
    stored = api.notify()
    assert stored["status"] == "ignored"
    assert "host compute-1 is on maintenance" in stored["message"]
    assert ("'recovery host update rack-1 compute-1 --no-maintenance'"
            in stored["message"])


def test_a_host_off_maintenance_is_recovered_again(api):
    segment = api.segment()
    host = api.host(segment, on_maintenance=True)
    api.call("PUT", f"/v1/segments/{segment['uuid']}/hosts/{host['uuid']}",
             {"host": {"on_maintenance": False}})
    assert api.notify()["status"] == "new"


# -- routing -----------------------------------------------------------------
@pytest.mark.parametrize("method,path", [
    ("PUT", "/v1/segments"),
    ("DELETE", "/v1/segments"),
    ("POST", "/v1/segments/{segment}"),
    ("PATCH", "/v1/segments/{segment}"),
    ("PUT", "/v1/segments/{segment}/hosts"),
    ("DELETE", "/v1/segments/{segment}/hosts"),
    ("POST", "/v1/segments/{segment}/hosts/{host}"),
])
def test_wrong_method_is_405(api, method, path):
    segment = api.segment()
    host = api.host(segment)
    reply = api.call(method, path.format(segment=segment["uuid"],
                                         host=host["uuid"]), {})
    assert reply.status == 405, reply.text
    assert "notAllowed" in reply.json
    assert method in reply.message
    assert "GET" in reply.headers["Allow"]
    assert [s.uuid for s in api.store.list_segments()] == [segment["uuid"]]
    assert [h.uuid for h in api.store.list_hosts(segment["uuid"])] == [
        host["uuid"]]


MISSING = "6f1d7a3e-0000-0000-0000-000000000000"


@pytest.mark.parametrize("method,path,body", [
    ("GET", f"/v1/segments/{MISSING}", None),
    ("PUT", f"/v1/segments/{MISSING}", {"segment": {"name": "x"}}),
    ("DELETE", f"/v1/segments/{MISSING}", None),
    ("GET", f"/v1/segments/{MISSING}/hosts", None),
    ("POST", f"/v1/segments/{MISSING}/hosts", {"host": {"name": "compute-2"}}),
    ("GET", f"/v1/segments/{MISSING}/hosts/compute-1", None),
    ("GET", f"/v1/segments/{{segment}}/hosts/{MISSING}", None),
    ("PUT", f"/v1/segments/{{segment}}/hosts/{MISSING}",
     {"host": {"reserved": True}}),
    ("DELETE", f"/v1/segments/{{segment}}/hosts/{MISSING}", None),
    # A host is reached through its own segment only.
    ("GET", "/v1/segments/{other}/hosts/compute-1", None),
    ("DELETE", "/v1/segments/{other}/hosts/compute-1", None),
    ("GET", "/v1/segments/{segment}/hosts/compute-1/x", None),
    ("GET", "/v1/segments/{segment}/nodes", None),
])
def test_unknown_segments_and_hosts_are_404(api, method, path, body):
    segment = api.segment("rack-1")
    other = api.segment("rack-2")
    api.host(segment)
    reply = api.call(method, path.format(segment=segment["uuid"],
                                         other=other["uuid"]), body)
    assert reply.status == 404, reply.text
    assert "itemNotFound" in reply.json
    assert len(api.store.list_segments()) == 2
    assert [h.name for h in api.store.list_hosts(segment["uuid"])] == [
        "compute-1"]


def test_segments_need_the_token(store, tmp_path):
    path = tmp_path / "token"
    path.write_text(TOKEN)
    conf = api_conf(auth_strategy="token", token_file=str(path))
    app = auth.protect(make_api(store, Hosts(), []), conf)
    with serving(app) as port:
        refused = request(port, "POST", "/v1/segments", _segment())
        listed = request(port, "GET", "/v1/segments")
        allowed = request(port, "POST", "/v1/segments", _segment(),
                          headers={"X-Auth-Token": TOKEN})
    assert (refused.status, listed.status) == (401, 401)
    assert allowed.status == 201, allowed.text
    assert [s.name for s in store.list_segments()] == ["rack-1"]


# -- openstacksdk, unmodified ------------------------------------------------
@pytest.fixture
def sdk(store, tmp_path, monkeypatch):
    path = tmp_path / "token"
    path.write_text(TOKEN)
    conf = api_conf(auth_strategy="token", token_file=str(path))
    with serving(auth.protect(make_api(store, Hosts(), []), conf)) as port:
        conn = openstack_client(port, monkeypatch)
        yield conn
        conn.close()


def test_openstacksdk_segments_and_hosts(sdk, store):
    ha = sdk.instance_ha
    segment = ha.create_segment(name="rack-1", recovery_method="auto",
                                service_type="COMPUTE", is_enabled=False)
    assert segment.uuid and segment.is_enabled is False
    host = ha.create_host(segment.uuid, name="compute-1", type="COMPUTE",
                          control_attributes="SSH", reserved=True)
    assert host.failover_segment_id == segment.uuid
    assert host.reserved is True

    assert [s.uuid for s in ha.segments()] == [segment.uuid]
    assert [s.uuid for s in ha.segments(is_enabled=False)] == [segment.uuid]
    assert list(ha.segments(recovery_method="reserved_host")) == []
    assert [h.name for h in ha.hosts(segment.uuid)] == ["compute-1"]
    fetched = ha.get_host(host.uuid, segment.uuid)
    assert fetched.control_attributes == "SSH"

    updated = ha.update_segment(segment.uuid, description="rack one")
    assert updated.description == "rack one"
    ha.update_host(host.uuid, segment.uuid, on_maintenance=True)
    assert ha.get_host(host.uuid, segment.uuid).on_maintenance is True
    stored_host, stored_segment = store.host_record("compute-1")
    assert stored_host.on_maintenance and not stored_segment.enabled

    ha.delete_host(host.uuid, segment.uuid, ignore_missing=False)
    ha.delete_segment(segment.uuid, ignore_missing=False)
    assert store.list_segments() == []
