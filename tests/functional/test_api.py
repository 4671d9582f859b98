"""The notification API over real HTTP: intake, validation, reads, auth,
and Masakari's own client (openstacksdk) against it."""

import contextlib
import dataclasses
import datetime
import http.client
import json
import logging
import socketserver
import threading
from collections.abc import Iterator
from typing import Any
from wsgiref import simple_server

import pytest
from keystoneauth1 import loading
from oslo_config import cfg

from recovery import conf as recovery_conf
from recovery import exception
from recovery import hostnames
from recovery.api import app
from recovery.api import auth
from recovery.concurrency import Clock
from recovery.db.events import Decision
from recovery.db.events import EventKind
from recovery.db.store import Store
from recovery.db.store import open_store
from recovery.notification import Kind
from recovery.notification import Status
from recovery.nova import load_nova
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import Phase

UTC = datetime.timezone.utc
START = datetime.datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
MAX_BODY = 4096
VERSION_HEADER = "OpenStack-API-Version"
V1_1 = {VERSION_HEADER: "instance-ha 1.1"}
WINDOW = 180
TOKEN = "s3cret-static-token-0123456789abcdef"
STOPPED = {"event": "STOPPED", "host_status": "NORMAL",
           "cluster_status": "OFFLINE"}
VM_UUID = "6f1d7a3e-9a9c-4a55-8f0e-0a1c2b3d4e5f"
# Project ids as Keystone issues them: 32 hex digits.
PROJECT = "8c1a3e5b7d9f4a6c2e0b1d3f5a7c9e1b"
OTHER_PROJECT = "0d2f4b6a8c0e4f1a9b3d5c7e9f1a3b5d"


# -- serving -----------------------------------------------------------------
class _Server(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that went away are not the test's business."""


class _QuietHandler(simple_server.WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """No access log on stderr."""


@contextlib.contextmanager
def serving(app: Any) -> Iterator[int]:
    """Serve ``app`` on 127.0.0.1 in a thread; yield the port."""
    httpd = simple_server.make_server("127.0.0.1", 0, app,
                                      server_class=_Server,
                                      handler_class=_QuietHandler)
    thread = threading.Thread(target=httpd.serve_forever,
                              kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@dataclasses.dataclass
class Reply:
    status: int
    headers: http.client.HTTPMessage
    text: str

    @property
    def json(self) -> Any:
        return json.loads(self.text)

    @property
    def message(self) -> str:
        (error,) = self.json.values()
        return error["message"]


def request(port: int, method: str, path: str, body: Any = None, *,
            content_type: str | None = "application/json",
            headers: dict[str, str] | None = None) -> Reply:
    headers = dict(headers or {})
    if body is not None and not isinstance(body, bytes):
        body = json.dumps(body).encode()
    if body is not None and content_type is not None:
        headers["Content-Type"] = content_type
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return Reply(response.status, response.headers,
                     response.read().decode())
    finally:
        conn.close()


def notification(type: str = "COMPUTE_HOST", hostname: str = "compute-1",
                 payload: dict[str, Any] | None = None,
                 generated_time: str = "2026-11-22T09:59:00",
                 **extra: Any) -> dict[str, Any]:
    return {"notification": {
        "type": type, "hostname": hostname, "generated_time": generated_time,
        "payload": STOPPED if payload is None else payload, **extra}}


# -- the application under test ----------------------------------------------
class StepClock(Clock):
    """A wall clock that moves one second each time it is read."""

    def __init__(self) -> None:
        self.reads = 0

    def now(self) -> datetime.datetime:
        self.reads += 1
        return START + datetime.timedelta(seconds=self.reads)


class Hosts:
    """The host check: known hosts, unknown ones, and a Nova that is
    down."""

    def __init__(self) -> None:
        self.services = {"compute-1", "compute-2"}
        self.nova_down = False
        self.checked: list[str] = []

    def __call__(self, hostname: str) -> hostnames.HostMatch:
        self.checked.append(hostname)
        if self.nova_down:
            raise exception.NovaUnreachable(
                "could not reach Nova: connection refused")
        return hostnames.match(hostname, self.services)


@dataclasses.dataclass
class Served:
    store: Store
    hosts: Hosts
    woken: list[None]
    port: int
    # (method, path, query, token sent) of each request, when recorded.
    seen: list[tuple[str, str, str, bool]] = dataclasses.field(
        default_factory=list)

    def post(self, body: Any, **kwargs: Any) -> Reply:
        return request(self.port, "POST", "/v1/notifications", body,
                       **kwargs)

    def get(self, path: str, **kwargs: Any) -> Reply:
        return request(self.port, "GET", path, **kwargs)

    def stored(self) -> list[Any]:
        return self.store.list_notifications(sort_dir="asc")


@pytest.fixture
def store(tmp_path) -> Iterator[Store]:
    store = open_store(f"sqlite:///{tmp_path}/api.sqlite")
    yield store
    store.close()


class Silent:
    """The check before an operator's confirmation: every host is
    silent (tests/functional/test_fencing_confirm.py asks Nova and the
    probe)."""

    def silent(self, host: str) -> str:
        return f"{host} is silent"


def make_api(store: Store, hosts: Any, woken: list[None]) -> app.API:
    return app.build(store, hosts, StepClock(), max_body=MAX_BODY,
                     duplicate_window=WINDOW, liveness=Silent(),
                     on_stored=lambda: woken.append(None))


@pytest.fixture
def api(store) -> Iterator[Served]:
    hosts, woken = Hosts(), []
    with serving(make_api(store, hosts, woken)) as port:
        yield Served(store, hosts, woken, port)


# -- create ------------------------------------------------------------------
def test_create_is_stored_before_the_answer(api):
    reply = api.post(notification())
    assert reply.status == 202, reply.text
    assert reply.headers.get_content_type() == "application/json"
    body = reply.json["notification"]
    assert body["status"] == "new"
    assert body["type"] == "COMPUTE_HOST"
    assert body["hostname"] == "compute-1"
    assert body["payload"] == STOPPED
    assert body["generated_time"] == "2026-11-22T09:59:00.000000"
    assert body["created_at"] == "2026-11-22T10:00:01.000000"
    # A host in no segment: Masakari's fields for its segment entry.
    assert body["source_host_uuid"] is None
    assert body["failover_segment_uuid"] is None
    assert body["message"] is None
    stored = api.store.get(body["notification_uuid"])
    assert stored.status is Status.NEW
    assert stored.origin == "api"
    assert stored.payload == STOPPED
    assert stored.id == body["id"]
    assert api.woken == [None]


def test_generated_time_with_an_offset_is_stored_in_utc(api):
    reply = api.post(notification(
        generated_time="2026-11-22T11:59:00+02:00"))
    assert reply.status == 202, reply.text
    assert reply.json["notification"]["generated_time"] == (
        "2026-11-22T09:59:00.000000")


@pytest.mark.parametrize("payload", [
    {"event": "STOPPED"},
    {"event": "STOPPED", "host_status": "UNKNOWN",
     "cluster_status": "OFFLINE"},
])
def test_stopped_without_a_normal_host_status_is_ignored(api, payload):
    reply = api.post(notification(payload=payload))
    assert reply.status == 202, reply.text
    body = reply.json["notification"]
    assert body["status"] == "ignored"
    assert "host_status" in body["message"]
    assert api.store.get(body["notification_uuid"]).status is (
        Status.IGNORED)
    assert api.woken == []


def test_started_is_queued_for_the_host_return(api):
    reply = api.post(notification(payload={**STOPPED, "event": "STARTED"}))
    assert reply.status == 202, reply.text
    body = reply.json["notification"]
    assert body["status"] == "new"
    assert api.woken == [None]


@pytest.mark.parametrize("payload", [
    {"event": "STARTED"},
    {"event": "STARTED", "host_status": "UNKNOWN",
     "cluster_status": "ONLINE"},
])
def test_started_without_a_normal_host_status_is_ignored(api, payload):
    """As in Masakari: the monitor does not vouch for the host."""
    reply = api.post(notification(payload=payload))
    assert reply.status == 202, reply.text
    body = reply.json["notification"]
    assert body["status"] == "ignored"
    assert "did not confirm the host is back" in body["message"]
    assert "recovery host-return" in body["message"]
    assert api.store.get(body["notification_uuid"]).kind is (
        Kind.HOST_RETURN)
    assert api.woken == []


@pytest.mark.parametrize("type,payload", [
    ("VM", {"instance_uuid": VM_UUID, "vir_domain_event": "STOPPED_FAILED",
            "event": "LIFECYCLE"}),
    ("VM", {"instance_uuid": VM_UUID, "vir_domain_event": "IO_ERROR_REPORT",
            "event": "IO_ERROR"}),
    # The introspective instance monitor's: the guest agent is gone.
    ("VM", {"instance_uuid": VM_UUID, "vir_domain_event": "STOPPED_FAILED",
            "event": "QEMU_GUEST_AGENT_ERROR"}),
    ("PROCESS", {"process_name": "nova-compute", "event": "STOPPED"}),
    ("PROCESS", {"process_name": "nova-compute", "event": "STARTED"}),
])
def test_instance_and_process_failures_are_queued(api, type, payload):
    reply = api.post(notification(type=type, payload=payload))
    assert reply.status == 202, reply.text
    assert reply.json["notification"]["status"] == "new"
    assert [n.type for n in api.stored()] == [type]
    assert api.woken == [None]


@pytest.mark.parametrize("type,payload,why", [
    ("VM", {"instance_uuid": VM_UUID, "vir_domain_event": "STOPPED_SHUTDOWN",
            "event": "LIFECYCLE"}, "LIFECYCLE/STOPPED_SHUTDOWN"),
    # Masakari matches the pair exactly, and so does this.
    ("VM", {"instance_uuid": VM_UUID, "vir_domain_event": "STOPPED_FAILED",
            "event": "lifecycle"}, "lifecycle/STOPPED_FAILED"),
    ("VM", {"instance_uuid": VM_UUID, "vir_domain_event": "STOPPED_FAILED",
            "event": "QEMU_GUEST_AGENT"}, "QEMU_GUEST_AGENT/STOPPED_FAILED"),
    ("PROCESS", {"process_name": "libvirtd", "event": "STOPPED"},
     "libvirtd is not nova-compute"),
])
def test_what_no_flow_acts_on_is_recorded_as_ignored(api, type, payload,
                                                     why):
    reply = api.post(notification(type=type, payload=payload))
    assert reply.status == 202, reply.text
    body = reply.json["notification"]
    assert body["status"] == "ignored"
    assert why in body["message"]
    assert [n.type for n in api.stored()] == [type]
    assert api.woken == []


@pytest.mark.parametrize("type,payload,kind", [
    ("COMPUTE_HOST", STOPPED, Kind.HOST_FAILURE),
    ("COMPUTE_HOST", {**STOPPED, "event": "STARTED"}, Kind.HOST_RETURN),
    # Ignored ones have their kind too.
    ("COMPUTE_HOST", {"event": "STOPPED"}, Kind.HOST_FAILURE),
    ("VM", {"instance_uuid": VM_UUID, "vir_domain_event": "STOPPED_FAILED",
            "event": "LIFECYCLE"}, Kind.INSTANCE),
    ("PROCESS", {"process_name": "libvirtd", "event": "STOPPED"},
     Kind.PROCESS),
])
def test_the_kind_is_decided_at_intake_and_stored(api, type, payload,
                                                  kind):
    reply = api.post(notification(type=type, payload=payload))
    assert reply.status == 202, reply.text
    body = reply.json["notification"]
    assert api.store.get(body["notification_uuid"]).kind is kind
    # Masakari's shape: the kind is recovery's own, never shown.
    assert "kind" not in body


def _without(key: str) -> dict[str, Any]:
    body = notification()
    del body["notification"][key]
    return body


@pytest.mark.parametrize("body,field", [
    (_without("payload"), "payload"),
    (_without("hostname"), "hostname"),
    (_without("generated_time"), "generated_time"),
    (_without("type"), "type"),
    ({}, "notification"),
    ([notification()], "body"),
    ({**notification(), "extra": 1}, "extra"),
    (notification(priority=1), "priority"),
    (notification(payload={**STOPPED, "reason": "x"}), "payload"),
    (notification(payload={**STOPPED, "reason": "x"}), "reason"),
    (notification(payload={"host_status": "NORMAL"}), "payload"),
    (notification(type="HOST"), "type"),
    (notification(payload={**STOPPED, "event": "CRASHED"}), "event"),
    (notification(payload={**STOPPED, "host_status": "DOWN"}),
     "host_status"),
    (notification(payload="STOPPED"), "payload"),
    (notification(hostname="compute 1"), "hostname"),
    (notification(hostname="compute/1"), "hostname"),
    (notification(hostname=""), "hostname"),
    (notification(hostname="x" * 256), "hostname"),
    (notification(hostname="compute-1\n"), "hostname"),
    (notification(generated_time="yesterday"), "generated_time"),
    (notification(generated_time=12), "generated_time"),
    (notification(generated_time="0001-01-01T00:00:00+01:00"),
     "generated_time"),
    (notification(type="VM", payload={"instance_uuid": "not-a-uuid",
                                      "vir_domain_event": "STOPPED_FAILED",
                                      "event": "LIFECYCLE"}),
     "instance_uuid"),
    (notification(type="PROCESS", payload={"event": "STOPPED"}),
     "process_name"),
    # Masakari's limit on every payload value, its process name's too.
    (notification(type="PROCESS", payload={"process_name": "p" * 256,
                                           "event": "STOPPED"}),
     "process_name"),
    (notification(type="VM", payload={"instance_uuid": VM_UUID,
                                      "vir_domain_event": "",
                                      "event": "LIFECYCLE"}),
     "vir_domain_event"),
    (notification(type="VM", payload={"instance_uuid": VM_UUID,
                                      "vir_domain_event": "STOPPED_FAILED",
                                      "event": ""}),
     "event"),
])
def test_schema_errors_name_the_field_and_store_nothing(api, body, field):
    reply = api.post(body)
    assert reply.status == 400, reply.text
    assert "badRequest" in reply.json
    assert field in reply.message
    assert api.stored() == []
    assert api.woken == []
    assert api.hosts.checked == []


@pytest.mark.parametrize("raw", [b"{not json", b"", b"\xff\xfe",
                                 b"[" * 3000,
                                 b'{"a":' * 400 + b"[" * 1000])
def test_invalid_json_is_400(api, raw):
    reply = api.post(raw)
    assert reply.status == 400, reply.text
    assert "JSON" in reply.message
    assert api.stored() == []


def test_unknown_host_is_400(api):
    reply = api.post(notification(hostname="compute-9"))
    assert reply.status == 400, reply.text
    assert "hostname" in reply.message
    assert "compute-9" in reply.message
    assert api.stored() == []
    assert api.woken == []


@pytest.mark.parametrize("content_type", ["text/plain", None])
def test_wrong_or_missing_content_type_is_415(api, content_type):
    reply = api.post(notification(), content_type=content_type)
    assert reply.status == 415, reply.text
    assert "Content-Type" in reply.message
    assert api.stored() == []


def test_json_content_type_with_charset_is_accepted(api):
    reply = api.post(notification(),
                     content_type="application/json; charset=utf-8")
    assert reply.status == 202, reply.text


def test_body_larger_than_max_body_is_413(api):
    body = notification()
    body["notification"]["payload"] = {**STOPPED, "pad": "x" * MAX_BODY}
    reply = api.post(body)
    assert reply.status == 413, reply.text
    assert str(MAX_BODY) in reply.message
    assert api.stored() == []
    assert api.hosts.checked == []


def test_duplicate_is_409(api):
    first = api.post(notification())
    assert first.status == 202
    again = api.post(notification(generated_time="2026-11-22T10:00:00"))
    assert again.status == 409, again.text
    assert "conflictingRequest" in again.json
    assert first.json["notification"]["notification_uuid"] in again.message
    assert len(api.stored()) == 1
    assert api.woken == [None]
    # Another host, or outside the window, is accepted.
    assert api.post(notification(hostname="compute-2")).status == 202
    assert api.post(notification(
        generated_time="2026-11-22T10:09:00")).status == 202
    # An event older than one stored is stale, however much older, as in
    # Masakari.
    stale = api.post(notification(generated_time="2026-11-22T09:40:00"))
    assert stale.status == 409, stale.text


def test_generated_time_at_the_end_of_the_range(api):
    body = notification(generated_time="9999-12-31T23:59:00")
    assert api.post(body).status == 202
    assert api.post(body).status == 409


def test_nova_unreachable_stores_unchecked(api):
    api.hosts.nova_down = True
    reply = api.post(notification())
    assert reply.status == 202, reply.text
    body = reply.json["notification"]
    assert body["status"] == "new"
    assert body["source_host_uuid"] is None
    assert "not checked" in body["message"]
    stored = api.store.get(body["notification_uuid"])
    assert stored.status is Status.NEW
    assert "not checked" in stored.message
    assert api.woken == [None]


def test_nova_unreachable_does_not_hide_a_schema_error(api):
    api.hosts.nova_down = True
    assert api.post(notification(hostname="a b")).status == 400
    assert api.hosts.checked == []


# -- list --------------------------------------------------------------------
@pytest.fixture
def four(api) -> list[dict[str, Any]]:
    """Four notifications, oldest first: new, ignored, ignored, new."""
    bodies = [
        notification(hostname="compute-1"),
        notification(hostname="compute-1",
                     payload={"event": "STOPPED"}),
        notification(type="PROCESS", hostname="compute-2",
                     payload={"process_name": "libvirtd",
                              "event": "STOPPED"}),
        notification(hostname="compute-2"),
    ]
    created = []
    for body in bodies:
        reply = api.post(body)
        assert reply.status == 202, reply.text
        created.append(reply.json["notification"])
    return created


def listed(api: Served, query: str = "") -> list[str]:
    reply = api.get(f"/v1/notifications{query}")
    assert reply.status == 200, reply.text
    return [n["notification_uuid"] for n in reply.json["notifications"]]


def ids(items: list[dict[str, Any]]) -> list[str]:
    return [n["notification_uuid"] for n in items]


def test_list_newest_first(api, four):
    assert listed(api) == ids(reversed(four))
    assert listed(api, "?sort_dir=asc") == ids(four)


def test_list_filters(api, four):
    assert listed(api, "?status=ignored") == ids([four[2], four[1]])
    assert listed(api, "?status=new") == ids([four[3], four[0]])
    assert listed(api, "?type=PROCESS") == ids([four[2]])
    assert listed(api, "?hostname=compute-1") == ids([four[1], four[0]])
    assert listed(api, "?hostname=compute-2&status=new") == ids([four[3]])
    assert listed(api, "?source_host_uuid=no-such-host") == []
    assert listed(api, "?status=finished") == []


def test_list_with_a_huge_limit(api, four):
    assert listed(api, "?limit=" + "9" * 30) == ids(reversed(four))


def test_list_with_limit_0_is_an_empty_page(api, four):
    """As Masakari answers it."""
    assert listed(api, "?limit=0") == []
    assert listed(api, f"?limit=0&marker={four[3]['id']}") == []


@pytest.mark.parametrize("key", ["notification_uuid", "uuid"])
def test_list_sorted_by_the_uuid(api, four, key):
    """Masakari's code sorts by notification_uuid, its api-ref names it
    uuid: both are the notification's uuid."""
    by_uuid = sorted(ids(four))
    assert listed(api, f"?sort_key={key}&sort_dir=asc") == by_uuid
    assert listed(api, f"?sort_key={key}") == by_uuid[::-1]
    first = listed(api, f"?sort_key={key}&sort_dir=asc&limit=2")
    assert first == by_uuid[:2]
    assert listed(api, f"?sort_key={key}&sort_dir=asc&limit=2"
                       f"&marker={first[-1]}") == by_uuid[2:]


def test_list_generated_since(api, four):
    late = notification(hostname="compute-2",
                        generated_time="2026-11-22T10:30:00")
    newest = api.post(late).json["notification"]
    assert listed(api, "?generated-since=2026-11-22T10:00:00") == (
        ids([newest]))


@pytest.mark.parametrize("by", ["id", "notification_uuid"])
def test_list_limit_and_marker(api, four, by):
    pages, marker = [], None
    for _ in range(5):
        query = "?limit=3" + (f"&marker={marker}" if marker else "")
        reply = api.get(f"/v1/notifications{query}")
        assert reply.status == 200, reply.text
        page = reply.json["notifications"]
        if not page:
            break
        pages.append(ids(page))
        marker = page[-1][by]
    assert pages == [ids(reversed(four))[:3], ids(reversed(four))[3:]]


@pytest.mark.parametrize("query,field", [
    ("?sort_key=payload", "sort_key"),
    ("?sort_key=id%3B%20drop%20table%20notifications", "sort_key"),
        ("?sort_key=payload", "sort_key"),
    ("?sort_dir=up", "sort_dir"),
    ("?status=done", "status"),
    ("?limit=-1", "limit"),
    ("?limit=ten", "limit"),
    ("?marker=no-such-notification", "marker"),
    ("?marker=12345", "marker"),
    ("?marker=" + "9" * 30, "marker"),
    ("?marker=%C2%B2", "marker"),
    ("?limit=%C2%B2", "limit"),
    ("?hostname=%FF", "UTF-8"),
    ("?generated-since=yesterday", "generated-since"),
])
def test_list_bad_query_is_400(api, four, query, field):
    reply = api.get(f"/v1/notifications{query}")
    assert reply.status == 400, reply.text
    assert field in reply.message


# -- show and vmoves ---------------------------------------------------------
def test_show_includes_the_workflow_details(api, four):
    uuid = four[0]["notification_uuid"]
    at = START + datetime.timedelta(minutes=1)
    for step, state, progress, message in [
            ("disable_host", "RUNNING", 0.0, "disabling compute-1"),
            ("evacuate", "RUNNING", 0.0, "evacuating 2 instances"),
            ("disable_host", "SUCCESS", 1.0, "compute-1 disabled"),
            ("evacuate", "FAILURE", 1.0, "1 of 2 failed")]:
        api.store.add_step_event(uuid, step, state, progress, message, at)
    reply = api.get(f"/v1/notifications/{uuid}", headers=V1_1)
    assert reply.status == 200, reply.text
    body = reply.json["notification"]
    assert body["notification_uuid"] == uuid
    assert body["status"] == "new"
    details = body["recovery_workflow_details"]
    assert [(d["name"], d["state"], d["progress"]) for d in details] == [
        ("disable_host", "SUCCESS", 1.0), ("evacuate", "FAILURE", 1.0)]
    assert [p["message"] for p in details[0]["progress_details"]] == [
        "disabling compute-1", "compute-1 disabled"]
    assert details[1]["progress_details"][0]["timestamp"] == (
        "2026-11-22T10:01:00.000000")


def test_show_without_events_has_empty_details(api, four):
    reply = api.get(f"/v1/notifications/{four[1]['notification_uuid']}",
                    headers=V1_1)
    assert reply.status == 200
    assert reply.json["notification"]["recovery_workflow_details"] == []


def test_workflow_details_come_with_microversion_1_1(api, four):
    """As in Masakari: 1.0, the version of a request that names none,
    has no recovery_workflow_details."""
    path = f"/v1/notifications/{four[0]['notification_uuid']}"
    api.store.add_step_event(four[0]["notification_uuid"], "evacuate",
                             "RUNNING", 0.0, "evacuating", START)
    for headers in ({}, {VERSION_HEADER: "instance-ha 1.0"}):
        reply = api.get(path, headers=headers)
        assert reply.status == 200, reply.text
        assert "recovery_workflow_details" not in reply.json["notification"]
    for version in ("1.1", "1.3", "latest"):
        reply = api.get(path, headers={VERSION_HEADER:
                                       f"instance-ha {version}"})
        assert [d["name"] for d in reply.json["notification"][
            "recovery_workflow_details"]] == ["evacuate"]


def test_vmoves_map_the_journal(api, four):
    uuid = four[0]["notification_uuid"]
    at = START + datetime.timedelta(minutes=1)
    results = [
        InstanceResult(uuid="i-ok", name="vm-ok", source_host="compute-1",
                       original_state="active", dest_host="compute-2",
                       final_state="active", phase=Phase.DONE,
                       outcome=Outcome.RECOVERED, started_at=at,
                       finished_at=at + datetime.timedelta(seconds=30),
                       priority=10, priority_phase=1,
                       capacity_warning="compute-2 may be full"),
        InstanceResult(uuid="i-bad", name="vm-bad", source_host="compute-1",
                       original_state="active", phase=Phase.DONE,
                       outcome=Outcome.FAILED, reason="no valid host"),
        InstanceResult(uuid="i-skip", name="vm-skip",
                       source_host="compute-1", original_state="error",
                       phase=Phase.PENDING, outcome=Outcome.SKIPPED,
                       reason="in error"),
        InstanceResult(uuid="i-fly", name="vm-fly", source_host="compute-1",
                       original_state="stopped", phase=Phase.EVACUATING,
                       migration_floor=7, started_at=at),
        InstanceResult(uuid="i-wait", name="vm-wait",
                       source_host="compute-1", original_state="active"),
    ]
    for n, result in enumerate(results):
        api.store.save_instance(
            uuid, result, at + datetime.timedelta(seconds=n))
    reply = api.get(f"/v1/notifications/{uuid}/vmoves?sort_dir=asc")
    assert reply.status == 200, reply.text
    moves = reply.json["vmoves"]
    assert [(m["instance_uuid"], m["status"]) for m in moves] == [
        ("i-ok", "succeeded"), ("i-bad", "failed"), ("i-skip", "ignored"),
        ("i-fly", "ongoing"), ("i-wait", "pending")]
    ok = moves[0]
    assert ok["notification_uuid"] == uuid
    assert ok["instance_name"] == "vm-ok"
    assert ok["source_host"] == "compute-1"
    assert ok["dest_host"] == "compute-2"
    assert ok["type"] == "evacuation"
    assert ok["start_time"] == "2026-11-22T10:01:00.000000"
    assert ok["end_time"] == "2026-11-22T10:01:30.000000"
    assert ok["created_at"] == ok["updated_at"] == (
        "2026-11-22T10:01:00.000000")
    assert moves[1]["message"] == "no valid host"
    assert (ok["priority"], ok["priority_phase"], ok["capacity_warning"]) \
        == (10, 1, "compute-2 may be full")
    assert (moves[1]["priority"], moves[1]["priority_phase"],
            moves[1]["capacity_warning"]) == (None, None, None)
    assert moves[3]["phase"] == "evacuating"
    # Masakari's order: the newest first.
    newest = api.get(f"/v1/notifications/{uuid}/vmoves").json["vmoves"]
    assert [m["instance_uuid"] for m in newest] == [
        "i-wait", "i-fly", "i-skip", "i-bad", "i-ok"]
    # Another notification has none.
    other = four[3]["notification_uuid"]
    assert api.get(f"/v1/notifications/{other}/vmoves").json == {
        "vmoves": []}


@pytest.fixture
def moved(api, four) -> tuple[str, list[dict[str, Any]]]:
    """A host failure with three vmoves (one each: succeeded, failed,
    ongoing); its uuid and the vmoves, oldest first."""
    uuid = four[0]["notification_uuid"]
    for n, (name, outcome, phase) in enumerate([
            ("a", Outcome.RECOVERED, Phase.DONE),
            ("b", Outcome.FAILED, Phase.DONE),
            ("c", None, Phase.CONFIRMING)]):
        api.store.save_instance(uuid, InstanceResult(
            uuid=f"i-{name}", name=f"vm-{name}", source_host="compute-1",
            original_state="active", outcome=outcome, phase=phase),
            START + datetime.timedelta(seconds=n))
    reply = api.get(f"/v1/notifications/{uuid}/vmoves?sort_dir=asc")
    return uuid, reply.json["vmoves"]


def test_a_vmove_has_an_identity_and_its_own_page(api, moved):
    uuid, moves = moved
    assert len({m["uuid"] for m in moves}) == 3
    assert len({m["id"] for m in moves}) == 3
    for move in moves:
        for ident in (move["uuid"], str(move["id"])):
            reply = api.get(f"/v1/notifications/{uuid}/vmoves/{ident}")
            assert reply.status == 200, reply.text
            assert reply.json == {"vmove": move}
    # The same uuid on a second read: it is not made up per request.
    again = api.get(f"/v1/notifications/{uuid}/vmoves?sort_dir=asc")
    assert [m["uuid"] for m in again.json["vmoves"]] == [
        m["uuid"] for m in moves]
    missing = api.get(f"/v1/notifications/{uuid}/vmoves/"
                      f"6f1d7a3e-0000-4a55-8f0e-0a1c2b3d4e5f")
    assert missing.status == 404


def test_vmoves_filter_sort_and_page(api, moved):
    uuid, moves = moved
    base = f"/v1/notifications/{uuid}/vmoves"

    def names(query: str) -> list[str]:
        reply = api.get(f"{base}?{query}")
        assert reply.status == 200, reply.text
        return [m["instance_name"] for m in reply.json["vmoves"]]

    assert names("status=failed") == ["vm-b"]
    assert names("status=ongoing&type=evacuation") == ["vm-c"]
    assert names("type=migration") == []
    assert names("sort_key=status&sort_dir=desc") == ["vm-a", "vm-c",
                                                      "vm-b"]
    assert names("sort_key=instance_name&sort_dir=asc&limit=2") == [
        "vm-a", "vm-b"]
    assert names(f"sort_dir=asc&limit=2&marker={moves[1]['uuid']}") == [
        "vm-c"]
    assert names(f"sort_dir=desc&marker={moves[2]['id']}") == [
        "vm-b", "vm-a"]
    # An empty page, as Masakari answers it.
    assert names("limit=0") == []


@pytest.mark.parametrize("query, field", [
    ("status=done", "status"), ("type=teleport", "type"),
    ("sort_key=message", "sort_key"), ("sort_dir=up", "sort_dir"),
    ("sort_key=id&sort_key=uuid", "sort_key"), ("limit=-1", "limit"),
    ("marker=nope", "marker")])
def test_vmoves_bad_query_is_400(api, moved, query, field):
    reply = api.get(f"/v1/notifications/{moved[0]}/vmoves?{query}")
    assert reply.status == 400, reply.text
    assert field in reply.message


def test_only_host_failures_have_vmoves(api, four):
    """Masakari answers 400 for a VM or PROCESS notification's vmoves."""
    process = four[2]["notification_uuid"]
    for path in (f"/v1/notifications/{process}/vmoves",
                 f"/v1/notifications/{process}/vmoves/1"):
        reply = api.get(path)
        assert reply.status == 400, reply.text
        assert "COMPUTE_HOST" in reply.message
    assert api.get("/v1/notifications/no-such/vmoves").status == 404


def test_events_are_the_notification_s_decision_log(api):
    reply = api.post(notification())
    uuid = reply.json["notification"]["notification_uuid"]
    other = api.post(notification(hostname="compute-2")).json[
        "notification"]["notification_uuid"]
    item = api.store.get(uuid)
    api.store.hold(item, "held: why; looking again at 10:01:00", 30,
                   event=Decision("engine-a:1", "compute-1",
                                  EventKind.HELD, "held: why"))
    api.store.add_event(Decision("detector", "compute-1",
                                 EventKind.SUSPECT, "seen down"), START)
    for path in (f"/v1/notifications/{uuid}/events",
                 f"/v1/{PROJECT}/notifications/{uuid}/events"):
        reply = api.get(path)
        assert reply.status == 200, reply.text
        events = reply.json["events"]
        assert [(e["actor"], e["subject"], e["kind"], e["message"])
                for e in events] == [
            ("api", "compute-1", "received",
             "COMPUTE_HOST STOPPED, host_status NORMAL"),
            ("engine-a:1", "compute-1", "held", "held: why")]
        assert all(e["notification_uuid"] == uuid for e in events)
        assert events[0]["id"] < events[1]["id"]
        assert events[0]["created_at"] == "2026-11-22T10:00:01.000000"
    assert [e["notification_uuid"] for e in api.get(
        f"/v1/notifications/{other}/events").json["events"]] == [other]
    reply = api.get("/v1/notifications/no-such/events")
    assert reply.status == 404, reply.text
    assert "no notification no-such" in reply.message
    assert request(api.port, "POST", f"/v1/notifications/{uuid}/events",
                   {}).status == 405


@pytest.mark.parametrize("path", [
    "/v1/notifications/6f1d7a3e-0000-0000-0000-000000000000",
    "/v1/notifications/6f1d7a3e-0000-0000-0000-000000000000/vmoves",
    "/v1/notifications/x/y",
    "/v2/notifications",
    "/v1/segments/x/hosts/y/z",
    # A word that is no project id (lower-case hex digits and dashes, as
    # Masakari takes one) is an unknown path.
    "/v1/segmentz",
    "/v1/notification",
    "/v1/segmentz/x",
    "/v1/project-1/notifications",
    "/v1/admin/segments",
    f"/v1/{PROJECT.upper()}/segments",
])
def test_unknown_resources_are_404(api, path):
    reply = api.get(path)
    assert reply.status == 404, reply.text
    assert "itemNotFound" in reply.json


def test_a_path_that_is_not_utf8_is_400(api):
    reply = api.get("/v1/notifications/%FF%FE")
    assert reply.status == 400, reply.text
    assert "UTF-8" in reply.message


@pytest.mark.parametrize("method,path", [
    ("DELETE", "/v1/notifications"),
    ("PUT", "/v1/notifications"),
    ("POST", "/v1/notifications/6f1d7a3e-0000-0000-0000-000000000000"),
    ("DELETE", "/v1/notifications/6f1d7a3e-0000-0000-0000-000000000000"),
    ("PUT", "/v1/notifications/x/vmoves"),
    ("POST", "/"),
    ("POST", "/v1"),
])
def test_wrong_method_is_405(api, method, path):
    reply = request(api.port, method, path, {})
    assert reply.status == 405, reply.text
    assert method in reply.message
    assert api.stored() == []


def test_version_documents(api):
    root = api.get("/")
    # Masakari's answer, and its api-ref's.
    assert root.status == 200, root.text
    (version,) = root.json["versions"]
    assert version["id"] == "v1.0"
    assert version["status"] == "CURRENT"
    v1 = api.get("/v1")
    assert v1.status == 200, v1.text
    assert v1.json["version"]["id"] == "v1.0"
    assert api.get("/v1/").status == 200
    # Absolute, as clients follow it.
    assert version["links"] == v1.json["version"]["links"] == [
        {"rel": "self", "href": f"http://127.0.0.1:{api.port}/v1/"}]
    # Masakari 22's microversions.
    assert (version["min_version"], version["version"]) == ("1.0", "1.3")


@pytest.mark.parametrize("sent, answered", [
    (None, "1.0"), ("instance-ha 1.2", "1.2"),
    ("instance-ha latest", "1.3"),
    ("compute 2.94, instance-ha 1.1", "1.1"), ("compute 2.94", "1.0")])
def test_every_answer_names_its_microversion(api, sent, answered):
    headers = {} if sent is None else {VERSION_HEADER: sent}
    for path in ("/v1", "/v1/notifications", "/v1/segments",
                 "/v1/notifications/no-such", "/v1/nothing"):
        reply = api.get(path, headers=headers)
        assert reply.headers[VERSION_HEADER] == f"instance-ha {answered}"
        assert VERSION_HEADER in reply.headers.get_all("Vary")


@pytest.mark.parametrize("sent, status", [
    ("instance-ha 1.4", 406), ("instance-ha 1.99", 406),
    ("instance-ha 2.0", 406), ("instance-ha 10.0", 406),
    # Not versions in Masakari's form (X.Y, no sign, no leading zero).
    ("instance-ha 0.9", 400), ("instance-ha 1.03", 400),
    ("instance-ha 01.2", 400), ("instance-ha +1.1", 400),
    ("instance-ha 1.-1", 400), ("instance-ha 1.1.0", 400),
    ("instance-ha 1.1 beta", 400),
    ("instance-ha garbage", 400), ("instance-ha 1", 400),
    ("instance-ha 1.x", 400), ("instance-ha LATEST", 400)])
def test_a_version_out_of_range_is_406_and_a_malformed_one_400(
        api, sent, status):
    reply = request(api.port, "POST", "/v1/notifications", notification(),
                    headers={VERSION_HEADER: sent})
    assert reply.status == status, reply.text
    assert VERSION_HEADER in reply.message
    assert api.stored() == []
    # No version was agreed on; a 406 says that another may be.
    assert VERSION_HEADER not in reply.headers
    assert reply.headers.get_all("Vary") == (
        [VERSION_HEADER] if status == 406 else None)
    # The version documents answer whatever is asked: clients read them
    # to learn what to ask.
    assert api.get("/", headers={VERSION_HEADER: sent}).status == 200



def test_paths_with_a_project_id_are_the_same_resources(api):
    """Clouds that register the endpoint as .../v1/$(project_id)s: every
    client puts its project in the path."""
    created = request(api.port, "POST", f"/v1/{PROJECT}/notifications",
                      notification())
    assert created.status == 202, created.text
    uuid = created.json["notification"]["notification_uuid"]
    shown = api.get(f"/v1/{PROJECT}/notifications/{uuid}")
    assert shown.status == 200, shown.text
    listed = api.get(f"/v1/{PROJECT}/notifications")
    assert [n["notification_uuid"] for n in listed.json["notifications"]] \
        == [uuid]
    assert api.get(f"/v1/{PROJECT}/notifications/{uuid}/vmoves"
                   ).status == 200
    assert api.get(f"/v1/{PROJECT}/segments").status == 200
    assert api.get(f"/v1/{PROJECT}").json["version"]["id"] == "v1.0"
    assert api.get(f"/v1/{PROJECT}/{PROJECT}/notifications").status == 404
    # Ids of other forms, as Masakari's router takes them: a dashed UUID
    # (an identity backend's), or hex digits of another length.
    for other in ("6f1d7a3e-9a9c-4a55-8f0e-0a1c2b3d4e5f", PROJECT[:-1],
                  f"{PROJECT}0"):
        assert api.get(f"/v1/{other}/segments").status == 200, other


# -- the host check against the fake Nova ------------------------------------
def nova_conf(endpoint: str) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf([])
    conf.set_override("auth_type", "admin_token", "nova")
    plugin = loading.get_plugin_loader("admin_token")
    conf.register_opts(loading.get_auth_plugin_conf_options(plugin),
                       group="nova")
    conf.set_override("endpoint", endpoint, "nova")
    conf.set_override("token", "admin:admin:admin", "nova")
    return conf


def test_host_check_with_the_fake_nova(store, fake_nova):
    fake_nova.add_compute("compute-1")
    nova = load_nova(nova_conf(fake_nova.endpoint), Clock(), timeout=2,
                     retries=0)
    woken: list[None] = []
    app = make_api(store, nova.match_compute_host, woken)
    with serving(app) as port:
        known = request(port, "POST", "/v1/notifications", notification())
        unknown = request(port, "POST", "/v1/notifications",
                          notification(hostname="compute-9"))
    assert known.status == 202, known.text
    body = known.json["notification"]
    assert body["hostname"] == "compute-1"
    assert body["status"] == "new"
    assert unknown.status == 400, unknown.text
    assert "compute-9" in unknown.message
    assert [n.hostname for n in store.list_notifications()] == ["compute-1"]


def test_host_names_as_monitors_send_them(store, fake_nova):
    """An FQDN where Nova has the short name, or the reverse, is the one
    host with that short name; several, or none, are refused by name."""
    for host in ("compute-1", "compute-2.example.com",
                 "compute-3.rack-a.example.com", "compute-3.rack-b"):
        fake_nova.add_compute(host)
    nova = load_nova(nova_conf(fake_nova.endpoint), Clock(), timeout=2,
                     retries=0)
    app = make_api(store, nova.match_compute_host, [])

    def post(hostname, n):
        return request(port, "POST", "/v1/notifications", notification(
            hostname=hostname, generated_time=f"2026-11-22T0{n}:00:00"))

    with serving(app) as port:
        fqdn = post("compute-1.example.com", 1)
        short = post("compute-2", 2)
        several = post("compute-3", 3)
        none = post("compute-4.example.com", 4)
    assert fqdn.status == 202, fqdn.text
    body = fqdn.json["notification"]
    assert body["hostname"] == "compute-1"
    stored = store.get(body["notification_uuid"])
    assert stored.message == ("sent for 'compute-1.example.com': Nova's "
                              "compute host 'compute-1', matched by its "
                              "short name")
    assert short.status == 202, short.text
    assert short.json["notification"]["hostname"] == "compute-2.example.com"
    assert several.status == 400
    assert ("'compute-3' matches 2 nova-compute hosts by its short name "
            "(compute-3.rack-a.example.com, compute-3.rack-b)") in (
        several.message)
    assert none.status == 400 and "compute-4.example.com" in none.message
    assert len(store.list_notifications()) == 2


# -- auth --------------------------------------------------------------------
def api_conf(**api_opts: Any) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf([])
    for name, value in api_opts.items():
        conf.set_override(name, value, "api")
    return conf


@pytest.fixture
def token_file(tmp_path) -> str:
    path = tmp_path / "token"
    path.write_text(f"  {TOKEN}\n")
    path.chmod(0o600)
    return str(path)


@pytest.fixture
def token_api(store, token_file) -> Iterator[Served]:
    hosts, woken = Hosts(), []
    conf = api_conf(auth_strategy="token", token_file=token_file)
    app = auth.protect(make_api(store, hosts, woken), conf)
    seen: list[tuple[str, str, str, bool]] = []

    def recorded(environ: dict, start_response: Any) -> Any:
        seen.append((environ["REQUEST_METHOD"], environ["PATH_INFO"],
                     environ.get("QUERY_STRING", ""),
                     "HTTP_X_AUTH_TOKEN" in environ))
        return app(environ, start_response)

    with serving(recorded) as port:
        yield Served(store, hosts, woken, port, seen)


def test_token_required(token_api):
    reply = token_api.post(notification())
    assert reply.status == 401, reply.text
    assert "WWW-Authenticate" in reply.headers
    assert token_api.get("/v1/notifications").status == 401
    assert token_api.stored() == []


def test_wrong_token_is_401(token_api):
    for wrong in ["nope", TOKEN[:-1], TOKEN + "x", TOKEN.upper()]:
        reply = token_api.post(notification(),
                               headers={"X-Auth-Token": wrong})
        assert reply.status == 401, reply.text
    assert token_api.stored() == []


def test_right_token_is_accepted(token_api):
    headers = {"X-Auth-Token": TOKEN}
    reply = token_api.post(notification(), headers=headers)
    assert reply.status == 202, reply.text
    uuid = reply.json["notification"]["notification_uuid"]
    assert token_api.get(f"/v1/notifications/{uuid}",
                         headers=headers).status == 200
    assert token_api.get(f"/v1/notifications/{uuid}/events",
                         headers=headers).status == 200
    assert token_api.get(f"/v1/notifications/{uuid}/events").status == 401
    assert token_api.get("/v1/notifications", headers=headers).status == 200


def test_version_documents_are_public(token_api):
    assert token_api.get("/").status == 200
    assert token_api.get("/v1").status == 200
    assert token_api.get("/v1/").status == 200


def test_the_token_is_never_logged(token_api, caplog):
    caplog.set_level(logging.DEBUG)
    wrong = "wrong-token-value-" + TOKEN[::-1]
    reply = token_api.post(notification(), headers={"X-Auth-Token": wrong})
    assert reply.status == 401
    reply = token_api.post(notification(), headers={"X-Auth-Token": TOKEN})
    assert reply.status == 202
    assert "wrong token" in caplog.text
    assert wrong not in caplog.text
    assert TOKEN not in caplog.text


@pytest.mark.parametrize("content", ["short\n", "   \n", ""])
def test_short_token_file_is_a_config_error(tmp_path, store, content):
    path = tmp_path / "token"
    path.write_text(content)
    conf = api_conf(auth_strategy="token", token_file=str(path))
    with pytest.raises(exception.ConfigError, match="shorter than 16"):
        auth.protect(make_api(store, Hosts(), []), conf)


def test_unreadable_token_file_is_a_config_error(tmp_path, store):
    conf = api_conf(auth_strategy="token",
                    token_file=str(tmp_path / "missing"))
    with pytest.raises(exception.ConfigError, match="cannot be read"):
        auth.protect(make_api(store, Hosts(), []), conf)


def test_token_strategy_without_a_file_is_a_config_error(store):
    conf = api_conf(auth_strategy="token")
    with pytest.raises(exception.ConfigError, match="token_file"):
        auth.protect(make_api(store, Hosts(), []), conf)


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_noauth_on_loopback(store, host):
    woken: list[None] = []
    conf = api_conf(auth_strategy="noauth", host=host)
    app = auth.protect(make_api(store, Hosts(), woken), conf)
    with serving(app) as port:
        reply = request(port, "POST", "/v1/notifications", notification())
    assert reply.status == 202, reply.text
    assert woken == [None]


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.1", "::"])
def test_noauth_beyond_loopback_is_a_config_error(store, host):
    conf = api_conf(auth_strategy="noauth", host=host)
    with pytest.raises(exception.ConfigError, match="loopback"):
        auth.protect(make_api(store, Hosts(), []), conf)


@pytest.fixture
def keystone_api(store) -> Iterator[Served]:
    from keystonemiddleware import auth_token
    from keystonemiddleware import fixture as ks_fixture

    fx = ks_fixture.AuthTokenFixture()
    fx.setUp()
    try:
        fx.add_token_data(token_id="adm", project_id=PROJECT,
                          role_list=["admin"])
        fx.add_token_data(token_id="mem", project_id=PROJECT,
                          role_list=["member"])
        conf = api_conf(auth_strategy="keystone")
        for group, opts in auth_token.list_opts():
            conf.register_opts(opts, group=group)
        conf.set_override("www_authenticate_uri",
                          "http://keystone.invalid/identity",
                          "keystone_authtoken")
        hosts, woken = Hosts(), []
        app = auth.protect(make_api(store, hosts, woken), conf)
        with serving(app) as port:
            yield Served(store, hosts, woken, port)
    finally:
        fx.cleanUp()


def test_keystone(keystone_api):
    def post(token: str | None) -> Reply:
        headers = {"X-Auth-Token": token} if token else {}
        return keystone_api.post(notification(), headers=headers)

    assert post(None).status == 401
    assert post("forged").status == 401
    member = post("mem")
    assert member.status == 403, member.text
    assert ("os_masakari_api:notifications:create"
            in member.json["forbidden"]["message"])
    assert keystone_api.stored() == []
    admin = post("adm")
    assert admin.status == 202, admin.text
    assert len(keystone_api.stored()) == 1
    assert keystone_api.get("/v1").status == 200
    assert keystone_api.get("/").status == 200


def test_keystone_project_in_the_path_must_be_the_token_s(keystone_api):
    token = {"X-Auth-Token": "adm"}
    own = request(keystone_api.port, "POST", f"/v1/{PROJECT}/notifications",
                  notification(), headers=token)
    assert own.status == 202, own.text
    # A malformed URL, as Masakari answers it.
    other = request(keystone_api.port, "POST",
                    f"/v1/{OTHER_PROJECT}/notifications",
                    notification(generated_time="2026-11-22T11:00:00"),
                    headers=token)
    assert other.status == 400, other.text
    assert (f"({OTHER_PROJECT}) is not the token's project ({PROJECT})"
            in other.json["badRequest"]["message"])
    assert len(keystone_api.stored()) == 1


def test_keystone_headers_from_the_caller_are_not_trusted(keystone_api):
    reply = keystone_api.post(notification(), headers={
        "X-Identity-Status": "Confirmed", "X-Roles": "admin"})
    assert reply.status == 401, reply.text
    assert keystone_api.stored() == []


# -- openstacksdk, unmodified ------------------------------------------------
def openstack_client(port: int, monkeypatch: Any, path: str = "/v1",
                     **settings: Any) -> Any:
    """An unmodified openstacksdk connection to the API on ``port`` (at
    ``path``), with the token, ``settings`` and no ``OS_*`` settings of
    the environment."""
    import os

    from openstack import connection

    for name in list(os.environ):
        if name.startswith("OS_"):
            monkeypatch.delenv(name)
    endpoint = f"http://127.0.0.1:{port}{path}"
    return connection.Connection(
        auth_type="admin_token",
        auth={"endpoint": endpoint, "token": TOKEN},
        instance_ha_endpoint_override=endpoint, **settings)


@pytest.fixture
def sdk(token_api, monkeypatch):
    conn = openstack_client(token_api.port, monkeypatch)
    yield conn
    conn.close()


def test_openstacksdk_create_get_list(sdk, token_api):
    created = sdk.instance_ha.create_notification(
        type="COMPUTE_HOST", hostname="compute-1",
        generated_time="2026-11-22T10:00:00",
        payload={"event": "STOPPED", "host_status": "NORMAL",
                 "cluster_status": "OFFLINE"})
    assert created.notification_uuid
    assert created.status == "new"
    # Version discovery is unauthenticated; the create carries the token.
    assert token_api.seen[0][:2] == ("GET", "/v1")
    assert ("POST", "/v1/notifications", "", True) in token_api.seen
    assert token_api.store.get(created.notification_uuid).status is (
        Status.NEW)

    fetched = sdk.instance_ha.get_notification(created.notification_uuid)
    assert fetched.notification_uuid == created.notification_uuid
    assert fetched.hostname == "compute-1"
    # Microversion 1.0 unless the client asks for more, as in Masakari.
    assert fetched.recovery_workflow_details is None

    listed = list(sdk.instance_ha.notifications())
    assert created.notification_uuid in [n.notification_uuid
                                         for n in listed]


def test_openstacksdk_asks_for_a_microversion(token_api, monkeypatch):
    conn = openstack_client(token_api.port, monkeypatch,
                            ha_api_version="1.1")
    try:
        created = conn.instance_ha.create_notification(
            type="COMPUTE_HOST", hostname="compute-1",
            generated_time="2026-11-22T10:00:00", payload=STOPPED)
        fetched = conn.instance_ha.get_notification(
            created.notification_uuid)
        assert fetched.recovery_workflow_details == []
    finally:
        conn.close()


def test_openstacksdk_pages_with_limit(sdk, token_api):
    uuids = []
    for minute in range(5):
        created = sdk.instance_ha.create_notification(
            type="COMPUTE_HOST", hostname="compute-1",
            generated_time=f"2026-11-22T10:{minute * 10:02d}:00",
            payload=STOPPED)
        uuids.append(created.notification_uuid)
    del token_api.seen[:]
    paged = list(sdk.instance_ha.notifications(limit=2))
    assert [n.notification_uuid for n in paged] == uuids[::-1]
    queries = [q for _, _, q, _ in token_api.seen]
    assert queries[0] == "limit=2"
    assert len(queries) >= 3
    assert all("marker=" in q for q in queries[1:])
    filtered = list(sdk.instance_ha.notifications(status="new",
                                                  sort_dir="asc"))
    assert [n.notification_uuid for n in filtered] == uuids


def test_openstacksdk_with_a_project_id_in_the_endpoint(token_api,
                                                        monkeypatch):
    conn = openstack_client(token_api.port, monkeypatch,
                            path=f"/v1/{PROJECT}")
    try:
        created = conn.instance_ha.create_notification(
            type="COMPUTE_HOST", hostname="compute-1",
            generated_time="2026-11-22T10:00:00",
            payload={"event": "STOPPED", "host_status": "NORMAL",
                     "cluster_status": "OFFLINE"})
        assert created.status == "new"
        assert ("POST", f"/v1/{PROJECT}/notifications", "", True) in (
            token_api.seen)
        assert [n.notification_uuid
                for n in conn.instance_ha.notifications()] == [
            created.notification_uuid]
    finally:
        conn.close()
