"""The crash test: SIGKILL the engine at several points of a 30-instance
recovery, restart it, and check that the run finishes with every instance
evacuated exactly once and nothing left locked."""

import collections

import pytest

from tests.fakenova import FakeNova
from tests.functional.engine_process import LOCK_REASON
from tests.functional.engine_process import EngineProcess
from tests.functional.engine_process import wait_until

HOST = "compute-1"
COUNT = 30


def locks(nova):
    return [e for e in nova.lock_events
            if e["event"] == "lock" and e["reason"] == LOCK_REASON]


def unlocks(nova):
    return [e for e in nova.lock_events if e["event"] == "unlock"]


def done_migrations(nova):
    return [m for m in nova.migrations() if m["status"] == "done"]


# Each kill point is a condition on what the fake Nova has seen.
KILL_POINTS = {
    "while-locking": lambda nova: len(locks(nova)) >= 3,
    "after-evacuate-calls": lambda nova: len(nova.evacuate_calls) >= 12,
    "during-confirmation": lambda nova: (len(done_migrations(nova)) >= 3
                                         and len(unlocks(nova)) < 25),
}


@pytest.fixture
def nova():
    with FakeNova(evacuation_latency=0.4) as fake:
        for host in ("compute-1", "compute-2", "compute-3"):
            fake.add_compute(host)
        yield fake


@pytest.mark.parametrize("points", [
    ["while-locking"],
    ["after-evacuate-calls"],
    ["during-confirmation"],
    ["while-locking", "after-evacuate-calls", "during-confirmation"],
])
def test_killed_engine_resumes_without_evacuating_twice(nova, tmp_path,
                                                        points):
    uuids = [nova.add_server(f"vm{n}", HOST) for n in range(COUNT)]
    nova.fail_host(HOST)
    engine = EngineProcess(tmp_path, nova.endpoint, threads=6)
    try:
        engine.start()
        notification = engine.post_host_down(HOST)
        for point in points:
            wait_until(lambda p=point: KILL_POINTS[p](nova), what=point)
            engine.kill()
            engine.start()
        done = engine.wait_status(notification, "finished", "failed",
                                  timeout=120)
        _, body = engine.request(
            "GET", f"/v1/notifications/{notification}/vmoves")
    finally:
        engine.close()
    assert done["status"] == "finished", done["message"]
    evacuated = collections.Counter(c["uuid"] for c in nova.evacuate_calls)
    assert evacuated == {uuid: 1 for uuid in uuids}
    assert [s["id"] for s in nova.servers() if s["locked"]] == []
    assert all(s["host"] != HOST and s["vm_state"] == "active"
               for s in nova.servers())
    assert len(body["vmoves"]) == COUNT
    assert {v["status"] for v in body["vmoves"]} == {"succeeded"}
