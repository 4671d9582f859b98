"""The recovery methods: reserved hosts, and the priority fallbacks."""

import datetime

import pytest

from recovery.db.store import open_store
from recovery.flows import host_failure as hf
from recovery.flows import placement
from recovery.models import Aggregate
from recovery.results import Outcome
from tests.unit.fakes import FakeClock
from tests.unit.fakes import ListRecorder
from tests.unit.fakes import MemoryNova
from tests.unit.fakes import SyncPool
from tests.unit.fakes import make_env

HOST = "compute-1"
NOW = datetime.datetime(2026, 11, 22, tzinfo=datetime.timezone.utc)


class MessageRecorder(ListRecorder):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[tuple[str, str]] = []

    def step_changed(self, step: str, state: str, message: str,
                     **told) -> None:
        super().step_changed(step, state, message, **told)
        self.messages.append((step, message))


@pytest.fixture
def store():
    store = open_store("sqlite://")
    yield store
    store.close()


def cloud(servers=("a", "b", "c"), reserved=(("r1", "up"), ("r2", "up"))):
    """A dead HOST with ``servers``; compute-2 for auto; reserved hosts
    (disabled, as operators keep them) in the given state."""
    nova = MemoryNova(dest="compute-2")
    nova.add_service(HOST, state="down")
    nova.add_service("compute-2", state="up")
    for name, state in reserved:
        nova.add_service(name, state=state, status="disabled")
    for uuid in servers:
        nova.add_server(uuid, host=HOST)
    return nova


def segment(store, method, reserved=("r1", "r2"), *, with_host=True):
    seg = store.create_segment(name="seg", recovery_method=method, now=NOW)
    if with_host:
        store.create_host(seg.uuid, name=HOST, now=NOW)
    for name in reserved:
        store.create_host(seg.uuid, name=name, reserved=True, now=NOW)
    return seg


def recover(nova, store, notification="n-1", recorder=None, **overrides):
    env = make_env(nova, clock=FakeClock(),
                   recorder=recorder or MessageRecorder(), **overrides)
    methods = placement.for_host(env, store, HOST, notification)
    report = hf.recover_host(env, HOST, pool_factory=SyncPool,
                             placement=methods)
    return {r.uuid: r for r in report.instances}


def evacuations(nova, uuid):
    return [call[2:] for call in nova.calls
            if call[0] == "evacuate" and call[1] == uuid]


def host_row(store, name):
    return store.host_record(name)[0]


def test_reserved_host_is_taken_then_the_next_when_full(store):
    nova = cloud()
    nova.capacity["r1"] = 2
    segment(store, "reserved_host")
    results = recover(nova, store)
    assert {u: (r.outcome, r.method, r.dest_host)
            for u, r in results.items()} == {
        "a": (Outcome.RECOVERED, "reserved_host", "r1"),
        "b": (Outcome.RECOVERED, "reserved_host", "r1"),
        "c": (Outcome.RECOVERED, "reserved_host", "r2")}
    # Only the instance refused by the full host was sent again.
    assert evacuations(nova, "a") == [("r1",)]
    assert evacuations(nova, "b") == [("r1",)]
    assert evacuations(nova, "c") == [("r1",), ("r2",)]
    for name in ("r1", "r2"):
        row = host_row(store, name)
        assert (row.reserved, row.claimed_by) == (False, "n-1")
        assert nova.services[name].status == "enabled"
    # Claimed (store), then enabled, before the first evacuate to it.
    names = nova.names()
    assert names.index("enable") < names.index("evacuate")


def test_a_reserved_host_nova_reports_down_is_skipped(store):
    nova = cloud(reserved=(("r1", "down"), ("r2", "up")))
    segment(store, "reserved_host")
    recorder = MessageRecorder()
    results = recover(nova, store, recorder=recorder)
    assert {r.dest_host for r in results.values()} == {"r2"}
    assert host_row(store, "r1").reserved is True
    assert nova.services["r1"].status == "disabled"
    assert ("reserved-hosts", "skipping reserved host r1: Nova reports "
                              "it down") in recorder.messages


def test_reserved_hosts_exhausted_fail_only_the_rest(store):
    nova = cloud(reserved=(("r1", "up"),))
    nova.capacity["r1"] = 1
    segment(store, "reserved_host", reserved=("r1",))
    results = recover(nova, store)
    assert results["a"].outcome is Outcome.RECOVERED
    for uuid in ("b", "c"):
        assert results[uuid].outcome is Outcome.FAILED
        assert "no reserved host of the segment is left" in (
            results[uuid].reason)
        assert results[uuid].method == "reserved_host"
    # b was refused by the full r1; c found no host left to try.
    assert "last failure" in results["b"].reason
    assert "No valid host" in results["b"].reason
    assert evacuations(nova, "a") == [("r1",)]
    assert evacuations(nova, "b") == [("r1",)]
    assert evacuations(nova, "c") == []


def test_rh_priority_falls_back_to_auto_for_the_failed_instance_only(store):
    nova = cloud()
    nova.outcomes["b"] = "error"        # b fails on r1, not for room
    segment(store, "rh_priority")
    results = recover(nova, store)
    assert (results["a"].method, results["a"].dest_host) == (
        "reserved_host", "r1")
    assert (results["c"].method, results["c"].dest_host) == (
        "reserved_host", "r1")
    assert evacuations(nova, "a") == [("r1",)]
    assert evacuations(nova, "c") == [("r1",)]
    # One failure is the instance's: it alone tries auto, and the pool
    # keeps r1 (r2 is never taken).
    assert evacuations(nova, "b") == [("r1",), ()]
    assert results["b"].method == "auto"
    assert host_row(store, "r2").reserved is True


def test_a_second_failed_instance_moves_the_pool_on(store):
    nova = cloud()
    nova.outcomes["a"] = nova.outcomes["b"] = "error"
    segment(store, "reserved_host")
    results = recover(nova, store)
    assert results["a"].outcome is results["b"].outcome is Outcome.FAILED
    assert (results["c"].outcome, results["c"].dest_host) == (
        Outcome.RECOVERED, "r2")
    assert evacuations(nova, "a") == [("r1",)]     # never sent again
    assert evacuations(nova, "b") == [("r1",)]


def test_auto_priority_falls_back_to_reserved_hosts(store):
    nova = cloud()
    nova.capacity["compute-2"] = 1
    segment(store, "auto_priority")
    results = recover(nova, store)
    assert (results["a"].method, results["a"].dest_host) == (
        "auto", "compute-2")
    for uuid in ("b", "c"):
        assert (results[uuid].method, results[uuid].dest_host) == (
            "reserved_host", "r1")
        assert evacuations(nova, uuid) == [(), ("r1",)]
    assert host_row(store, "r2").reserved is True


def test_auto_priority_takes_no_reserved_host_when_auto_suffices(store):
    nova = cloud()
    segment(store, "auto_priority")
    results = recover(nova, store)
    assert {r.method for r in results.values()} == {"auto"}
    assert host_row(store, "r1").reserved is True
    assert "enable" not in nova.names()


def test_a_timed_out_evacuation_is_not_sent_again(store):
    nova = cloud(servers=("a", "b"))
    nova.outcomes["a"] = "hang"
    segment(store, "rh_priority")
    results = recover(nova, store, evacuation_timeout=5.0)
    assert results["a"].outcome is Outcome.FAILED
    assert evacuations(nova, "a") == [("r1",)]
    # r1 is suspect: the next instance goes to r2.
    assert results["b"].dest_host == "r2"


def test_two_recoveries_never_take_the_same_reserved_host(store):
    seg = segment(store, "reserved_host", with_host=False)
    nova = cloud()
    env = make_env(nova)
    first = placement.ReservedHosts(env, store, seg.uuid, "n-1", HOST)
    second = placement.ReservedHosts(env, store, seg.uuid, "n-2",
                                     "compute-9")
    assert first.target().host == "r1"
    assert second.target().host == "r2"
    assert host_row(store, "r1").claimed_by == "n-1"
    assert host_row(store, "r2").claimed_by == "n-2"
    # And the store refuses a second claim of the same host.
    assert not store.claim_reserved(host_row(store, "r1").uuid, "n-2", NOW)


def test_a_resumed_run_goes_back_to_the_host_it_took(store):
    seg = segment(store, "reserved_host")
    r2 = host_row(store, "r2")
    assert store.claim_reserved(r2.uuid, "n-1", NOW)
    nova = cloud()
    env = make_env(nova)
    pool = placement.ReservedHosts(env, store, seg.uuid, "n-1", HOST)
    assert pool.target().host == "r2"
    assert host_row(store, "r1").reserved is True


def test_aggregates_of_the_failed_host_are_joined(store):
    nova = cloud(servers=("a",))
    nova.aggregates = [Aggregate(1, "ssd"), Aggregate(2, "other")]
    nova.aggregate_hosts = {1: [HOST, "compute-2"], 2: ["compute-2"]}
    segment(store, "reserved_host")
    recover(nova, store, add_reserved_host_to_aggregate=True)
    assert nova.aggregate_hosts[1] == [HOST, "compute-2", "r1"]
    assert nova.aggregate_hosts[2] == ["compute-2"]
    names = nova.names()
    assert names.index("add_to_aggregate") < names.index("evacuate")


def test_aggregates_are_left_alone_by_default(store):
    nova = cloud(servers=("a",))
    segment(store, "reserved_host")
    recover(nova, store)
    assert "aggregates_of" not in nova.names()


def test_a_failed_enable_gives_the_host_back(store):
    from recovery import exception
    nova = cloud(servers=("a",))
    nova.fail("enable", "r1", exception.NovaError("boom", status=500))
    segment(store, "reserved_host")
    results = recover(nova, store)
    assert results["a"].dest_host == "r2"
    assert host_row(store, "r1").reserved is True
    assert host_row(store, "r1").claimed_by is None


def test_host_in_no_segment_uses_the_default_method(store):
    nova = cloud(servers=("a",))
    results = recover(nova, store, default_recovery_method="rh_priority")
    assert (results["a"].method, results["a"].dest_host) == (
        "auto", "compute-2")
    results = recover(cloud(servers=("a",)), store,
                      default_recovery_method="reserved_host")
    assert results["a"].outcome is Outcome.FAILED
    assert "in no failover segment" in results["a"].reason


def test_the_segment_method_wins_over_the_default(store):
    nova = cloud(servers=("a",))
    segment(store, "reserved_host")
    results = recover(nova, store, default_recovery_method="auto")
    assert results["a"].dest_host == "r1"


def test_dry_run_names_the_method_and_changes_nothing(store):
    nova = cloud(servers=("a",))
    segment(store, "rh_priority")
    env = make_env(nova, recorder=MessageRecorder())
    report = hf.recover_host(
        env, HOST, dry_run=True,
        placement=placement.for_host(env, store, HOST, "n-1"))
    assert report.instances[0].reason == "evacuate (rh_priority)"
    assert ("recover-instances", "dry run: rh_priority: reserved_host "
            "(reserved hosts r1, r2), then auto (the scheduler picks)") in (
        env.recorder.messages)
    assert host_row(store, "r1").reserved is True
