"""The store's count of an instance's restarts (the crash-loop brake of
the instance-failure flow)."""

import datetime

import pytest

from recovery.db.store import open_store
from recovery.notification import Kind
from recovery.notification import Status
from recovery.notification import classify
from tests.unit.runs import finish_at
from tests.unit.runs import take_at

UTC = datetime.timezone.utc
NOW = datetime.datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)
VM = "6f1d7a3e-9a9c-4a55-8f0e-0a1c2b3d4e5f"
OTHER_VM = "0b8c2d4e-1111-4a55-8f0e-0a1c2b3d4e5f"
OWNER = "engine-a:1"


def at(seconds):
    return NOW + datetime.timedelta(seconds=seconds)


@pytest.fixture
def store(tmp_path):
    store = open_store(f"sqlite:///{tmp_path}/s.sqlite")
    yield store
    store.close()


def vm(store, started, status=Status.FINISHED, instance=VM, *,
       type="VM", hostname="compute-1"):
    """A VM notification whose first attempt started at ``started`` and
    that ended ``status`` (None: still running)."""
    payload = ({"instance_uuid": instance, "event": "LIFECYCLE",
                "vir_domain_event": "STOPPED_FAILED"} if type == "VM"
               else {"event": "STOPPED"})
    item = store.add(type=type, kind=classify(type, payload),
                     hostname=hostname, generated_time=started,
                     payload=payload, origin="api", status=Status.NEW,
                     now=started)
    taken = take_at(store, item, OWNER, started)
    if status is not None:
        finish_at(store, taken, OWNER, status, "done", at(5000))
    return taken


def test_finished_restarts_in_the_window_oldest_first(store):
    vm(store, at(-50))
    vm(store, at(-3000))
    vm(store, at(-100))
    assert store.restarts_since(VM, at(-3600)) == [at(-3000), at(-100),
                                                   at(-50)]


def test_the_window_starts_at_since_inclusive(store):
    vm(store, at(-3601))
    vm(store, at(-3600))
    assert store.restarts_since(VM, at(-3600)) == [at(-3600)]


@pytest.mark.parametrize("status", [Status.IGNORED, Status.FAILED,
                                    Status.ERROR, None])
def test_only_finished_notifications_are_restarts(store, status):
    vm(store, at(-10), status)
    assert store.restarts_since(VM, at(-3600)) == []


def test_other_instances_and_other_types_do_not_count(store):
    vm(store, at(-10), instance=OTHER_VM)
    vm(store, at(-10), type="COMPUTE_HOST")
    vm(store, at(-10), type="PROCESS")
    assert store.restarts_since(VM, at(-3600)) == []
    assert store.restarts_since(OTHER_VM, at(-3600)) == [at(-10)]


def test_the_notification_asking_is_left_out(store):
    mine = vm(store, at(-10))
    other = vm(store, at(-20))
    assert store.restarts_since(VM, at(-3600),
                                excluding_uuid=mine.uuid) == [at(-20)]
    assert store.restarts_since(VM, at(-3600),
                                excluding_uuid=other.uuid) == [at(-10)]


def test_the_instance_uuid_matches_whatever_its_case(store):
    vm(store, at(-10), instance=VM.upper())
    assert store.restarts_since(VM, at(-3600)) == [at(-10)]
    assert store.restarts_since(VM.upper(), at(-3600)) == [at(-10)]


def test_a_notification_never_started_is_not_counted(store):
    store.add(type="VM", kind=Kind.INSTANCE, hostname="compute-1",
              generated_time=at(-10),
              payload={"instance_uuid": VM, "event": "LIFECYCLE",
                       "vir_domain_event": "STOPPED_FAILED"},
              origin="api", status=Status.FINISHED, now=at(-10))
    assert store.restarts_since(VM, at(-3600)) == []
