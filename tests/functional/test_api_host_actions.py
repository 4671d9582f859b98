"""Drains and bring-backs over the API: stored as notifications the
engine runs, with who asked and why; refused with nothing stored for a
bad body, an unknown host, or a host with a failure or a drain under
way."""

import pytest

from recovery.db.store import open_store
from recovery.notification import Kind
from recovery.notification import Status
from tests.functional.test_api import Hosts
from tests.functional.test_api import Served
from tests.functional.test_api import make_api
from tests.functional.test_api import notification
from tests.functional.test_api import request
from tests.functional.test_api import serving


@pytest.fixture
def api(tmp_path):
    store = open_store(f"sqlite:///{tmp_path}/api.sqlite")
    hosts, woken = Hosts(), []
    try:
        with serving(make_api(store, hosts, woken)) as port:
            yield Served(store, hosts, woken, port)
    finally:
        store.close()


def act(api, host, action, body):
    return request(api.port, "POST", f"/v1/host-actions/{host}/{action}",
                   body)


def test_a_drain_is_stored_with_who_asked_and_why(api):
    reply = act(api, "compute-1", "drain",
                {"reason": "PSU 2 lost", "allow_partial": True})
    assert reply.status == 202, reply.text
    body = reply.json["notification"]
    assert (body["hostname"], body["status"]) == ("compute-1", "new")
    assert body["payload"] == {"event": "DRAIN", "allow_partial": True}
    [stored] = api.stored()
    assert stored.kind is Kind.HOST_DRAIN
    [received] = [e for e in api.store.events(stored.uuid)
                  if e.kind == "received"]
    assert received.message.endswith(
        "drain asked by operator (noauth API): PSU 2 lost")
    assert api.woken


def test_a_bring_back_is_a_host_return_that_brings_them_home(api):
    reply = act(api, "compute-1", "bring-back", {"reason": "PSU replaced"})
    assert reply.status == 202, reply.text
    [stored] = api.stored()
    assert (stored.kind, stored.status) == (Kind.HOST_RETURN, Status.NEW)
    assert stored.payload == {"event": "STARTED", "host_status": "NORMAL",
                              "bring_back": True}


def test_nothing_is_stored_for_a_bad_request(api):
    for action, body, status, said in [
            ("drain", {}, 400, "reason"),
            ("drain", {"reason": "x", "allow_partial": "yes"}, 400,
             "allow_partial"),
            ("bring-back", {"reason": "x", "allow_partial": True}, 400,
             "a bring-back takes none"),
            ("drain", {"reason": "x"}, 400, "compute-9")]:
        host = "compute-9" if said == "compute-9" else "compute-1"
        reply = act(api, host, action, body)
        assert (reply.status, said in reply.message) == (status, True), (
            reply.text)
    assert api.stored() == []


def test_a_host_with_a_failure_under_way_is_refused(api):
    assert api.post(notification()).status == 202
    reply = act(api, "compute-1", "drain", {"reason": "PSU"})
    assert reply.status == 409
    assert "compute-1 has a host_failure under way" in reply.message
    assert len(api.stored()) == 1
