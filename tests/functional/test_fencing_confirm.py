"""An operator's confirmation that a host is off, over the API (``POST
/v1/fencing/{hostname}/confirm``) and the command line (``recovery
fencing confirm``), against the fake Nova over HTTP and the liveness
probe on real sockets: refused while Nova hears from the host or it
answers the probe, recorded (who, when, why) and the held run re-opened
otherwise; and its policy rule on real keystonemiddleware."""

import dataclasses
import getpass
import re
from collections.abc import Iterator

import pytest

from recovery.api import app
from recovery.concurrency import Clock
from recovery.confirming import Liveness
from recovery.db.claims import Holder
from recovery.db.store import Store
from recovery.db.store import open_store
from recovery.notification import Kind
from recovery.notification import Notification
from recovery.notification import Status
from recovery.nova import load_nova
from recovery.probe import Probe
from tests.bmc import free_port
from tests.bmc import write_sections
from tests.fakekeystone import FakeKeystone
from tests.fakenova import FakeNova
from tests.functional.cli_process import run_cli
from tests.functional.cli_process import write_config
from tests.functional.test_api import MAX_BODY
from tests.functional.test_api import START
from tests.functional.test_api import STOPPED
from tests.functional.test_api import WINDOW
from tests.functional.test_api import Reply
from tests.functional.test_api import nova_conf
from tests.functional.test_api import request
from tests.functional.test_api import serving
from tests.functional.test_policy import ADMIN
from tests.functional.test_policy import MEMBER
from tests.functional.test_policy import READER
from tests.functional.test_policy import SERVICE
from tests.functional.test_policy import call
from tests.functional.test_policy import keystone_conf
from tests.functional.test_policy import served

HOST = "compute-1"
# Probed where nothing listens: it answers with a refusal.
ANSWERING = "compute-2"
WHY = "PDU B7 dead, the host is dark; ticket 4711"
ENGINE = "engine-a:1"


def waiting_failure(store: Store, host: str = HOST,
                    status: Status = Status.FAILED) -> Notification:
    """A host failure whose attempt ended ``status``: held by fencing."""
    item = store.add(type="COMPUTE_HOST", kind=Kind.HOST_FAILURE,
                     hostname=host, generated_time=START, payload=STOPPED,
                     origin="detector", status=Status.NEW, now=START)
    taken = store.take(item, ENGINE, 60)
    store.finish(taken.uuid, status, f"{host} could not be proved off",
                 holder=Holder(ENGINE, taken.version, 60),
                 retry_in=3600 if status is Status.ERROR else None)
    return store.get(item.uuid)


def untouched(store: Store, item: Notification) -> bool:
    """Nothing recorded for ``item`` since it was read."""
    return (store.get(item.uuid) == item
            and store.confirmation(item.uuid) is None)


@pytest.fixture
def nova(fake_nova) -> FakeNova:
    for host in (HOST, ANSWERING, "compute-3"):
        fake_nova.add_compute(host)
    return fake_nova


# -- the API ----------------------------------------------------------------
@dataclasses.dataclass
class Served:
    store: Store
    port: int
    # One for each wake-up of the engine.
    woken: list[None]

    def confirm(self, host: str = HOST, body: object = None) -> Reply:
        return request(self.port, "POST", f"/v1/fencing/{host}/confirm",
                       {"reason": WHY} if body is None else body)


@pytest.fixture
def api(tmp_path, nova, silent_port) -> Iterator[Served]:
    store = open_store(f"sqlite:///{tmp_path}/api.sqlite")
    checker = load_nova(nova_conf(nova.endpoint), Clock(), timeout=2,
                        retries=0)
    probe = Probe((silent_port,), 0.3, {HOST: "127.0.0.1",
                                        ANSWERING: "127.0.0.2"})
    woken: list[None] = []
    built = app.build(store, checker.match_compute_host, Clock(),
                      max_body=MAX_BODY, duplicate_window=WINDOW,
                      liveness=Liveness(checker, 60, probe),
                      on_stored=lambda: woken.append(None))
    with serving(built) as port:
        yield Served(store, port, woken)
    store.close()


def test_a_confirmation_is_recorded_and_the_run_reopened(api, nova,
                                                         silent_port):
    item = waiting_failure(api.store)
    nova.fail_host(HOST)
    reply = api.confirm()
    assert reply.status == 200, reply.text
    body = reply.json["confirmation"]
    # The caller, as the API knows it (noauth here: the operator).
    assert {k: body[k] for k in ("host", "notification_uuid", "user",
                                 "reason")} == {
        "host": HOST, "notification_uuid": item.uuid,
        "user": "operator (noauth API)", "reason": WHY}
    assert re.fullmatch(
        rf"Nova hears nothing from {HOST}: its last heartbeat is \d+ s "
        rf"old by Nova's clock, and no answer on TCP port\(s\) "
        rf"{silent_port} of {HOST} \(127\.0\.0\.1\)", body["checked"])
    (event,) = [e for e in api.store.events(item.uuid)
                if e.kind == "confirmed"]
    assert (event.actor, event.subject, event.message) == (
        "operator (noauth API)", HOST, WHY)
    reopened = api.store.get(item.uuid)
    assert (reopened.status, reopened.next_attempt_at) == (Status.ERROR,
                                                           None)
    assert api.store.next_runnable().uuid == item.uuid
    # The engine is woken: it takes the run up now.
    assert api.woken == [None]


def test_refused_while_nova_hears_from_the_host(api):
    item = waiting_failure(api.store)
    reply = api.confirm()
    assert reply.status == 409, reply.text
    assert reply.message.startswith(
        f"refused: Nova still hears from the compute service of {HOST} "
        f"(Nova reports it up): a host that heartbeats is not off")
    assert reply.message.endswith("Nothing was recorded")
    assert untouched(api.store, item)
    assert api.woken == []


def test_refused_while_the_host_answers_the_probe(api, nova):
    item = waiting_failure(api.store, ANSWERING)
    nova.fail_host(ANSWERING)
    reply = api.confirm(ANSWERING)
    assert reply.status == 409, reply.text
    assert reply.message.startswith(
        f"refused: {ANSWERING} (127.0.0.2) answers on TCP port ")
    assert "a host that answers is not off" in reply.message
    assert untouched(api.store, item)


def test_refused_when_the_host_cannot_be_probed(api, nova):
    """Its name does not resolve, and it has no probe address: nothing
    was asked, so its silence is not shown."""
    item = waiting_failure(api.store, "compute-3")
    nova.fail_host("compute-3")
    reply = api.confirm("compute-3")
    assert reply.status == 409, reply.text
    assert reply.message.startswith(
        "refused: cannot probe compute-3: its address 'compute-3' does not "
        "resolve")
    assert "its silence cannot be shown" in reply.message
    assert untouched(api.store, item)


def test_no_recovery_waiting_is_not_found(api, nova):
    nova.fail_host(HOST)
    reply = api.confirm()
    assert reply.status == 404, reply.text
    assert reply.message.startswith(f"nothing to confirm: no recovery of "
                                    f"{HOST} is waiting for a proof")
    unknown = api.confirm("compute-9")
    assert unknown.status == 404, unknown.text
    assert "compute-9" in unknown.message
    assert api.store.events() == []


@pytest.mark.parametrize("body, says", [
    ({}, "body: 'reason' is a required property"),
    ({"reason": "  "}, "reason: say why, for the record"),
    ({"reason": "x" * 1001}, "reason: 1001 characters, more than 1000"),
    ({"reason": "dark\nrm -rf"}, "reason: must be one line of printable"),
    ({"reason": 7}, "body.reason: 7 is not of type 'string'"),
    ({"reason": WHY, "user": "someone else"},
     "Additional properties are not allowed"),
])
def test_a_bad_reason_is_refused_before_anything(api, nova, body, says):
    item = waiting_failure(api.store)
    nova.fail_host(HOST)
    reply = api.confirm(body=body)
    assert reply.status == 400, reply.text
    assert says in reply.message
    assert untouched(api.store, item)


def test_nova_that_cannot_answer_is_503(api, nova):
    item = waiting_failure(api.store)
    nova.fail_host(HOST)
    nova.inject("GET", r"/os-services", status=503, times=3)
    reply = api.confirm()
    assert reply.status == 503, reply.text
    assert reply.message.startswith(f"cannot ask Nova whether {HOST} is "
                                    f"down, so nothing was recorded")
    assert untouched(api.store, item)


# -- the policy -------------------------------------------------------------
@pytest.fixture(scope="module")
def keystone() -> Iterator[FakeKeystone]:
    with FakeKeystone("http://127.0.0.1:9/compute",
                      users=(ADMIN, MEMBER, READER, SERVICE)) as fake:
        yield fake


def test_only_an_admin_may_confirm_and_is_its_author(tmp_path, keystone):
    store = open_store(f"sqlite:///{tmp_path}/api.sqlite")
    item = waiting_failure(store)
    path = f"/v1/fencing/{HOST}/confirm"
    with served(keystone_conf(tmp_path, keystone), store) as port:
        for user in (MEMBER, READER):
            denied = call(port, "POST", path, {"reason": WHY}, user)
            assert denied.status == 403, denied.text
            assert denied.message == ("Policy doesn't allow recovery_api:"
                                      "fencing:confirm to be performed.")
        assert untouched(store, item)
        reply = call(port, "POST", path, {"reason": WHY}, ADMIN)
    assert reply.status == 200, reply.text
    assert reply.json["confirmation"]["user"] == ADMIN.name
    assert store.confirmation(item.uuid).user == ADMIN.name
    assert store.get(item.uuid).status is Status.ERROR
    store.close()


# -- the command line -------------------------------------------------------
@pytest.fixture
def config(tmp_path, nova, silent_port) -> str:
    return write_config(tmp_path, nova, extra=(
        f"\n[detector]\nliveness_probe = {silent_port}\n"
        f"probe_timeout = 0.3\n"
        f"probe_addresses = {HOST}:127.0.0.1,{ANSWERING}:127.0.0.2\n"))


@pytest.fixture
def fenced_config(tmp_path, config) -> str:
    """``config``, the host's BMC out of reach: its fencing fails."""
    credentials = write_sections(tmp_path / "bmc.conf", {HOST: {
        "driver": "redfish", "address": f"http://127.0.0.1:{free_port()}",
        "username": "admin", "password": "secret"}})
    with open(config, "a", encoding="utf-8") as handle:
        handle.write(f"\n[fencing]\ncredentials_file = {credentials}\n"
                     f"timeout = 1\npoll_interval = 0.2\n")
    return config


@pytest.fixture
def store(tmp_path, config) -> Iterator[Store]:
    opened = open_store(f"sqlite:///{tmp_path}/recovery.sqlite")
    yield opened
    opened.close()


def test_the_cli_records_the_local_user_s_confirmation(config, store, nova):
    item = waiting_failure(store, status=Status.ERROR)
    nova.fail_host(HOST)
    proc = run_cli(config, "fencing", "confirm", HOST, "--reason", WHY)
    assert proc.returncode == 0, proc.stderr
    user = getpass.getuser()
    lines = proc.stdout.splitlines()
    assert lines[0] == f"Confirmed {HOST} off, for notification {item.uuid}"
    assert lines[1] == f"  by:      local user {user}"
    assert lines[3] == f"  reason:  {WHY}"
    assert lines[4].startswith(f"  checked: Nova hears nothing from {HOST}")
    assert lines[5] == (f"The held run goes on at once: recovery-engine "
                        f"takes it up at its next poll ('recovery "
                        f"notifications watch {item.uuid}'), or run it "
                        f"now: 'recovery host-failure {HOST}'.")
    assert store.confirmation(item.uuid).user == user
    assert store.get(item.uuid).next_attempt_at is None
    # In the decision log, and in the notification's own view.
    events = run_cli(config, "events", "--host", HOST)
    assert events.returncode == 0, events.stderr
    (line,) = [line for line in events.stdout.splitlines()
               if "confirmed" in line]
    assert user in line and WHY in line
    shown = run_cli(config, "notifications", "show", item.uuid)
    assert "confirmed" in shown.stdout and WHY in shown.stdout


@pytest.mark.parametrize("host, failed, says", [
    (HOST, False, "refused: Nova still hears from the compute service"),
    (ANSWERING, True, f"refused: {ANSWERING} (127.0.0.2) answers on TCP"),
])
def test_the_cli_refuses_a_host_that_may_run(config, store, nova, host,
                                             failed, says):
    item = waiting_failure(store, host)
    if failed:
        nova.fail_host(host)
    proc = run_cli(config, "fencing", "confirm", host, "--reason", WHY)
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.startswith(f"recovery: error: {says}")
    assert untouched(store, item)


def test_the_cli_has_nothing_to_confirm_without_a_held_run(config, store,
                                                           nova):
    nova.fail_host(HOST)
    proc = run_cli(config, "fencing", "confirm", HOST, "--reason", WHY)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        f"recovery: error: nothing to confirm: no recovery of {HOST} is "
        f"waiting for a proof (no host failure of it is recorded); run "
        f"'recovery host-failure {HOST}' first\n")


def test_the_cli_wants_a_reason(config, store, nova):
    item = waiting_failure(store)
    nova.fail_host(HOST)
    empty = run_cli(config, "fencing", "confirm", HOST, "--reason", " ")
    assert empty.returncode == 2, empty.stderr
    assert "--reason: say why" in empty.stderr
    missing = run_cli(config, "fencing", "confirm", HOST)
    assert missing.returncode == 2
    assert "--reason" in missing.stderr
    assert untouched(store, item)


def test_a_run_by_hand_after_a_confirmation_is_proved_off_by_it(
        fenced_config, store, nova):
    """host-failure held by its fencing; confirmed; host-failure again:
    the same failure goes on, proved off by the confirmation."""
    server = nova.add_server("vm", HOST)
    nova.fail_host(HOST)
    held = run_cli(fenced_config, "host-failure", HOST)
    assert held.returncode == 1, held.stderr
    (item,) = store.list_notifications()
    proc = run_cli(fenced_config, "fencing", "confirm", HOST, "--reason",
                   WHY)
    assert proc.returncode == 0, proc.stderr
    again = run_cli(fenced_config, "host-failure", HOST)
    assert again.returncode == 0, again.stderr
    assert f"Resuming the interrupted run {item.uuid}" in again.stderr
    assert [n.uuid for n in store.list_notifications()] == [item.uuid]
    assert store.get(item.uuid).status is Status.FINISHED
    assert nova.server(server)["host"] != HOST
