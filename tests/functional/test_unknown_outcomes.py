"""Nova answering late, or not at all (issue 33): the ``recovery``
command, a real process, against the fake Nova's injected faults over
real HTTP. ``[nova] timeout`` is 1 s and ``late_request_margin`` 5 s, so
a request may reach Nova up to 6 s after it was sent."""

import json

import pytest

from tests.fakenova import FakeNova
from tests.functional.cli_process import LOCK_REASON
from tests.functional.cli_process import run_cli
from tests.functional.cli_process import write_config

FAILED = "compute-1"
ACTION = r"^/v2\.1/servers/[^/]+/action$"
# Past the client's timeout (1 s), the retry's back-off (1 s) and the
# instance's recovery; within the window.
LATE = 4.0
# A rebuild takes longer than a request is held: a second evacuate would
# reach Nova during the first one's rebuild, as on a real Nova.
REBUILD = LATE + 1


def populate(fake):
    for host in ("compute-1", "compute-2", "compute-3"):
        fake.add_compute(host)
    uuids = [fake.add_server(f"vm-{n}", FAILED) for n in range(3)]
    fake.fail_host(FAILED)
    return fake, uuids


@pytest.fixture
def cloud():
    with FakeNova(evacuation_latency=REBUILD) as fake:
        yield populate(fake)


@pytest.fixture
def fast_cloud(fake_nova):
    """Rebuilds take 50 ms: a late lock arrives after the unlock."""
    return populate(fake_nova)


def recover(fake, tmp_path):
    config = write_config(tmp_path, fake, retries=3)
    with open(config) as f:
        text = f.read()
    with open(config, "w") as f:
        f.write(text.replace("timeout = 5\n", "timeout = 1\n").replace(
            "late_request_margin = 1\n", "late_request_margin = 5\n"))
    proc = run_cli(config, "host-failure", FAILED, "--format", "json")
    report = json.loads(proc.stdout)
    return proc, {r["uuid"]: r for r in report["instances"]}


def evacuate_calls(fake, uuid):
    return [c for c in fake.evacuate_calls if c["uuid"] == uuid]


def evacuations(fake, uuid):
    return [m for m in fake.migrations() if m["instance_uuid"] == uuid]


def assert_all_recovered(fake, proc, results, uuids):
    assert proc.returncode == 0, proc.stderr
    for uuid in uuids:
        assert results[uuid]["outcome"] == "recovered", results[uuid]
        server = fake.server(uuid)
        assert server["host"] != FAILED
        assert not server["locked"], server
        assert len(evacuations(fake, uuid)) == 1


def test_a_late_delivered_lock_leaves_no_lock_behind(fast_cloud, tmp_path):
    """The first lock times out and is retried; the instance is
    recovered and unlocked; then the first lock reaches Nova. The run
    looks again once it can no longer arrive, and lifts it."""
    fake, uuids = fast_cloud
    fake.inject("POST", ACTION, action="lock", delay=LATE)
    proc, results = recover(fake, tmp_path)
    assert_all_recovered(fake, proc, results, uuids)
    [late] = [u for u in uuids if [e["event"] for e in fake.lock_events
                                   if e["uuid"] == u].count("lock") == 2]
    events = [(e["event"], e["reason"]) for e in fake.lock_events
              if e["uuid"] == late]
    # The late lock came after the unlock, and was lifted.
    assert events == [("lock", LOCK_REASON), ("unlock", LOCK_REASON),
                      ("lock", LOCK_REASON), ("unlock", LOCK_REASON)]


def test_a_late_delivered_evacuate_is_never_followed_by_a_second(
        cloud, tmp_path):
    """Nova accepts the evacuate after the client gave up; until then
    it shows nothing (a new migration has no updated_at)."""
    fake, uuids = cloud
    fake.inject("POST", ACTION, action="evacuate", delay=LATE)
    proc, results = recover(fake, tmp_path)
    assert_all_recovered(fake, proc, results, uuids)
    for uuid in uuids:
        assert len(evacuate_calls(fake, uuid)) == 1


def test_an_evacuate_reset_after_nova_acted_is_not_sent_again(
        cloud, tmp_path):
    fake, uuids = cloud
    fake.inject("POST", ACTION, action="evacuate", reset=True, after=True)
    proc, results = recover(fake, tmp_path)
    assert_all_recovered(fake, proc, results, uuids)
    for uuid in uuids:
        assert len(evacuate_calls(fake, uuid)) == 1


def test_an_evacuate_reset_before_nova_saw_it_is_sent_again(
        cloud, tmp_path):
    """No answer: it might still arrive, so it is waited out first."""
    fake, uuids = cloud
    fake.inject("POST", ACTION, action="evacuate", reset=True)
    proc, results = recover(fake, tmp_path)
    assert_all_recovered(fake, proc, results, uuids)
    evacuates = [r for r in fake.requests if r["action"] == "evacuate"]
    assert len(evacuates) == len(uuids) + 1


def test_a_503_that_proves_nothing_happened_is_sent_again(cloud, tmp_path):
    """Nova's own 503 (its request id): the request ended in Nova, which
    shows no evacuation, so it is sent again without waiting."""
    fake, uuids = cloud
    fake.inject("POST", ACTION, action="evacuate", status=503)
    proc, results = recover(fake, tmp_path)
    assert_all_recovered(fake, proc, results, uuids)
    evacuates = [r for r in fake.requests if r["action"] == "evacuate"]
    assert [r["status"] for r in evacuates].count(503) == 1
    assert len(evacuates) == len(uuids) + 1


def test_a_late_answer_to_an_evacuate_is_not_sent_again(cloud, tmp_path):
    fake, uuids = cloud
    fake.inject("POST", ACTION, action="evacuate", delay=LATE, after=True)
    proc, results = recover(fake, tmp_path)
    assert_all_recovered(fake, proc, results, uuids)
    for uuid in uuids:
        assert len(evacuate_calls(fake, uuid)) == 1
