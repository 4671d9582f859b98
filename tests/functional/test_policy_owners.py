"""Owners' reads over real HTTP (the ``recovery_api:owner:read`` rule),
on real keystonemiddleware with the fake Keystone, as in test_policy: a
table of what each caller sees of three host failures whose journals
hold instances of two projects, and of one written before 0017.
"""

import datetime
from collections.abc import Iterator
from typing import Any

import pytest

from recovery.db.store import Store
from recovery.db.store import open_store
from recovery.notification import Kind
from recovery.notification import Status
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import Phase
from tests.fakekeystone import FakeKeystone
from tests.functional.test_api import START as NOW
from tests.functional.test_api import V1_1
from tests.functional.test_api import Reply
from tests.functional.test_api import request
from tests.functional.test_policy import ADMIN
from tests.functional.test_policy import CALLERS
from tests.functional.test_policy import MEMBER
from tests.functional.test_policy import MONITOR
from tests.functional.test_policy import NOTE
from tests.functional.test_policy import OTHER
from tests.functional.test_policy import READER
from tests.functional.test_policy import ROUTES
from tests.functional.test_policy import SERVICE
from tests.functional.test_policy import call
from tests.functional.test_policy import keystone_conf
from tests.functional.test_policy import served

HOST = "hv-secret-7"
OWNER_POLICY = '"recovery_api:owner:read": "role:reader or role:member"\n'
#: Each seeded instance: its notification (by its key below) and owner.
SEEDED = {"i-a1": ("shared", MEMBER.project_id),
          "i-b1": ("shared", OTHER.project_id),
          "i-b2": ("b-only", OTHER.project_id),
          # Journaled before 0017: no project, no owner sees it.
          "i-old": ("legacy", None)}
#: What each caller sees with the owner rule on: per notification, the
#: instances whose vmoves they get (no key: 404 to them).
OWNER_SEES = {
    "member": {"shared": {"i-a1"}},
    "reader": {"shared": {"i-a1"}},
    "other-project": {"shared": {"i-b1"}, "b-only": {"i-b2"}},
    "monitor": {},
}
OWNER_CALLERS = {**CALLERS, "monitor": MONITOR}
#: The routes the owner rule opens; every other stays the admins'.
OWNER_RULES = {"os_masakari_api:notifications:index",
               "os_masakari_api:notifications:detail",
               "os_masakari_api:vmoves:index", "os_masakari_api:vmoves:detail"}


@pytest.fixture(scope="module")
def keystone() -> Iterator[FakeKeystone]:
    with FakeKeystone("http://127.0.0.1:9/compute",
                      users=(ADMIN, MEMBER, READER, OTHER, MONITOR,
                             SERVICE)) as fake:
        yield fake


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Iterator[tuple[Store, dict[str, str]]]:
    """A store with three host failures of HOST and their journals: the
    store and each notification's uuid by key."""
    path = tmp_path_factory.mktemp("owners")
    opened = open_store(f"sqlite:///{path}/api.sqlite")
    uuids = {}
    for n, key in enumerate(("shared", "b-only", "legacy")):
        uuids[key] = opened.add(
            type="COMPUTE_HOST", kind=Kind.HOST_FAILURE, hostname=HOST,
            generated_time=NOW + datetime.timedelta(minutes=n),
            payload={"event": "STOPPED", "host_status": "NORMAL"},
            origin="api", status=Status.FINISHED, message=f"{HOST} done",
            now=NOW).uuid
        opened.add_step_event(uuids[key], "evacuate", "SUCCESS", 1.0,
                              f"evacuated from {HOST}", NOW)
    for instance, (key, project) in SEEDED.items():
        opened.save_instance(uuids[key], InstanceResult(
            uuid=instance, name=f"vm-{instance}", source_host=HOST,
            dest_host="hv-other-9", original_state="active",
            phase=Phase.DONE, outcome=Outcome.RECOVERED, project_id=project,
            reason=f"moved off {HOST}"), NOW)
    yield opened, uuids
    opened.close()


@pytest.fixture(scope="module")
def owner_port(tmp_path_factory, keystone, seeded) -> Iterator[int]:
    etc = tmp_path_factory.mktemp("owner-etc")
    (etc / "policy.yaml").write_text(OWNER_POLICY)
    with served(keystone_conf(etc, keystone), seeded[0]) as port:
        yield port


def _vmoves(port: int, uuid: str, user: Any) -> Reply:
    return call(port, "GET", f"/v1/notifications/{uuid}/vmoves", None, user)


@pytest.mark.parametrize("caller", OWNER_SEES)
def test_owners_read_their_own_instances_only(owner_port, seeded, caller):
    opened, uuids = seeded
    user, sees = OWNER_CALLERS[caller], OWNER_SEES[caller]
    listed = call(owner_port, "GET", "/v1/notifications", None, user)
    assert listed.status == 200, listed.text
    assert {n["notification_uuid"] for n in listed.json[
        "notifications"]} == {uuids[key] for key in sees}
    for key, uuid in uuids.items():
        shown = request(owner_port, "GET", f"/v1/notifications/{uuid}",
                        headers={"X-Auth-Token": user.token, **V1_1})
        moves = _vmoves(owner_port, uuid, user)
        if key not in sees:
            # Not theirs: as if it did not exist, not 403.
            assert (shown.status, moves.status) == (404, 404), moves.text
            assert moves.message == f"no notification {uuid}"
            continue
        assert shown.status == 200, shown.text
        body = shown.json["notification"]
        assert (body["status"], body["type"]) == ("finished",
                                                  "COMPUTE_HOST")
        assert body["recovery_workflow_details"] == []
        assert {v["instance_uuid"] for v in moves.json["vmoves"]} == (
            sees[key])
        for move in moves.json["vmoves"]:
            assert call(owner_port, "GET", f"/v1/notifications/{uuid}/"
                        f"vmoves/{move['uuid']}", None, user).json == {
                "vmove": move}
        for reply in (listed, shown, moves):
            # Never the host, its payload, or another project's instance.
            assert HOST not in reply.text and "hv-other" not in reply.text
            assert "host_status" not in reply.text
            assert not {i for i in SEEDED if i not in sees[key]} & {
                i for i in SEEDED if i in reply.text}
    # Another project's vmove, asked for by its own uuid: not found.
    theirs = opened.journal_entries(uuids["shared"])
    for entry in theirs:
        if entry.result.uuid not in sees.get("shared", ()):
            assert call(owner_port, "GET", f"/v1/notifications/"
                        f"{uuids['shared']}/vmoves/{entry.id}", None,
                        user).status == 404


@pytest.mark.parametrize("path", [
    "/v1/notifications?hostname=" + HOST,
    "/v1/notifications?sort_key=hostname",
    "/v1/notifications?source_host_uuid=x"])
def test_owners_cannot_filter_or_sort_by_host(owner_port, path):
    reply = call(owner_port, "GET", path, None, MEMBER)
    assert reply.status == 403, reply.text
    assert call(owner_port, "GET", path, None, ADMIN).status == 200


def test_an_owner_s_marker_is_one_of_theirs(owner_port, seeded):
    """Another project's notification as a marker is not found: the
    answer does not tell that it exists."""
    uuids = seeded[1]
    mine = call(owner_port, "GET", "/v1/notifications?marker="
                + uuids["shared"], None, MEMBER)
    assert (mine.status, mine.json) == (200, {"notifications": []})
    theirs = call(owner_port, "GET", "/v1/notifications?marker="
                  + uuids["b-only"], None, MEMBER)
    assert theirs.status == 400, theirs.text
    assert theirs.message == f"marker: marker {uuids['b-only']} not found"


def test_owners_get_nothing_else(owner_port, seeded):
    """The events, the writes and the segments stay the admins'; the
    admin still sees everything."""
    uuid = seeded[1]["shared"]
    for method, path, body, rule in ROUTES:
        if rule in OWNER_RULES:
            continue
        reply = call(owner_port, method, path.replace(NOTE, uuid), body,
                     MEMBER)
        assert reply.status == 403, (path, reply.text)
    admin = _vmoves(owner_port, uuid, ADMIN)
    assert {v["instance_uuid"] for v in admin.json["vmoves"]} == {
        "i-a1", "i-b1"}
    assert admin.json["vmoves"][0]["source_host"] == HOST


def test_owners_read_nothing_by_default(tmp_path, seeded, keystone):
    """The rule is off by default: an owner's read is refused, as any
    other caller's."""
    uuid = seeded[1]["shared"]
    with served(keystone_conf(tmp_path, keystone), seeded[0]) as port:
        for user in (MEMBER, READER, OTHER):
            for path in ("/v1/notifications", f"/v1/notifications/{uuid}",
                         f"/v1/notifications/{uuid}/vmoves"):
                assert call(port, "GET", path, None, user).status == 403
