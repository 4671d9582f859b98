"""Engines that share a database share a rack's host failures: each claims
up to its share of the host recoveries while the others have room, and a
share left waiting past ``[engine] balance_grace`` goes to whoever looks.

Several engines run in this one process on one SQLite store, each with its
own owner name and registry row; a turn is one call of ``_claim``. A run
ends at once, interrupted, so it stays running under its engine (with a
long lease), as a run in flight would."""

import collections
import logging

import pytest
import sqlalchemy as sa
from oslo_config import cfg

from recovery import conf as recovery_conf
from recovery.engine import runner
from recovery.engine.detector import Detector
from recovery.engine.lease import LeaseKeeper
from recovery.engine.service import Engine
from recovery.fencing import load_fencing
from recovery.notification import Kind
from recovery.notification import Status
from recovery.nova import Nova

HOSTS = [f"rack-1-{n:02}" for n in range(20)]


class OpenGates:
    """Gates that hold nothing: these tests are about who claims."""

    def check(self, notification):
        return None

    def window(self, notification):
        """No per-window cap in the claim."""
        return None


@pytest.fixture
def conf():
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf([])
    # Room for the whole rack on each engine: only the share limits.
    conf.set_override("max_concurrent_host_recoveries", len(HOSTS),
                      group="engine")
    return conf


@pytest.fixture
def engines(conf, store, clock):
    """``engines(n)``: ``n`` engines on the store, each in the registry."""
    made = []

    def make(count):
        for n in range(len(made), len(made) + count):
            engine = Engine(
                conf, store, clock,
                detector=Detector(conf, store, Nova(None, retries=0,
                                                    clock=clock),
                                  load_fencing(conf), clock),
                gates=OpenGates(),
                keeper=LeaseKeeper(store, clock, conf.engine.lease_seconds),
                attempt=lambda run: runner.Attempt(None, "in flight"))
            engine.owner = f"controller-{n}:{n + 100}"
            store.engine_seen(engine.owner, f"controller-{n}", n + 100)
            made.append(engine)
        return made[-count:]

    yield make
    for engine in made:
        for _, task in engine._runs.values():
            assert task.wait(5)


def fail(store, clock, hosts=HOSTS):
    return [store.add(type="COMPUTE_HOST", kind=Kind.HOST_FAILURE,
                      hostname=host, generated_time=clock.now(),
                      payload={"event": "STOPPED"}, origin="api",
                      status=Status.NEW, now=clock.now()).uuid
            for host in hosts]


def runs(engine):
    return sorted(n.hostname for n, _ in engine._runs.values())


def assert_claimed_once(store, uuids):
    """Each notification claimed by one engine, once; none left."""
    claims = collections.Counter(
        e.notification_uuid for e in store.events() if e.kind == "claimed")
    assert claims == {uuid: 1 for uuid in uuids}
    assert {store.get(u).status for u in uuids} == {Status.RUNNING}


@pytest.mark.parametrize("count, spread", [
    (1, [20]), (2, [10, 10]), (3, [7, 7, 6])])
def test_a_rack_spreads_over_the_live_engines(store, clock, engines,
                                              count, spread):
    uuids = fail(store, clock)
    live = engines(count)
    for engine in live:
        engine._claim()
    assert [len(engine._runs) for engine in live] == spread
    assert sorted(sum((runs(e) for e in live), [])) == HOSTS
    assert_claimed_once(store, uuids)


def test_hosts_arriving_one_by_one_spread_within_one_of_even(
        store, clock, engines):
    """The engine the API wakes at each POST takes a share of what has
    arrived so far; the others, looking within a second, take the rest."""
    woken, *others = engines(3)
    uuids = []
    for host in HOSTS:
        uuids += fail(store, clock, [host])
        woken._claim()
    clock.sleep(1)
    for engine in others:
        engine._claim()
    assert [len(e._runs) for e in (woken, *others)] == [7, 7, 6]
    assert_claimed_once(store, uuids)


def test_an_engine_at_its_share_says_what_it_leaves(store, clock, engines,
                                                   caplog):
    first, _, _ = engines(3)
    fail(store, clock)
    with caplog.at_level(logging.INFO, "recovery.engine.service"):
        first._claim()
    left = [r.getMessage() for r in caplog.records
            if "leaving" in r.getMessage()]
    assert left == [
        "This engine runs 7 host recoveries, its share of 20 over 3 live "
        "engines: leaving 13 waiting host failure(s) to 2 other "
        "engine(s), for up to 3 s each"]
    assert first.status() == (
        f"recovering 7 host(s): {', '.join(HOSTS[:7])}; leaving 13 "
        f"waiting host failure(s) to 2 other engine(s)")
    first._claim()
    assert len(first._runs) == 7


def test_a_silent_engine_s_share_is_taken_after_the_grace(
        store, clock, engines):
    """An engine that died is live in the registry until its row is a
    lease old; its share waits the grace, not the lease."""
    uuids = fail(store, clock)
    first, second, _silent = engines(3)
    first._claim()
    second._claim()
    clock.sleep(2)
    first._claim()
    assert [len(first._runs), len(second._runs)] == [7, 7]
    clock.sleep(1)
    first._claim()
    assert [len(first._runs), len(second._runs)] == [13, 7]
    assert first.status().startswith("recovering 13 host(s)")
    assert_claimed_once(store, uuids)


def test_an_engine_gone_from_the_registry_has_no_share(
        store, clock, engines, conf):
    """Once its row is a lease old the engine is no longer live: the two
    left share the rack between them at once."""
    first, second, silent = engines(3)
    clock.sleep(conf.engine.lease_seconds + 1)
    for engine in (first, second):
        store.engine_seen(engine.owner, "controller", 1)
    fail(store, clock)
    first._claim()
    second._claim()
    assert [len(first._runs), len(second._runs), len(silent._runs)] == [
        10, 10, 0]


def test_resumed_runs_are_not_limited_by_the_share(store, clock, engines):
    """A run an engine abandoned (its lease ran out) is resumed by the
    first engine that looks, however many it runs: it may hold locks."""
    uuids = fail(store, clock, HOSTS[:10])
    for uuid in uuids:
        store.take(store.get(uuid), "crashed:1", 60)
    clock.sleep(61)
    resumer, *_ = engines(3)
    resumer._claim()
    assert runs(resumer) == HOSTS[:10]
    assert {store.get(u).owner for u in uuids} == {resumer.owner}


def test_instance_failures_are_not_limited_by_the_share(store, clock,
                                                        engines):
    first, _ = engines(2)
    instances = [store.add(type="VM", kind=Kind.INSTANCE, hostname=host,
                           generated_time=clock.now(), payload={},
                           origin="api", status=Status.NEW,
                           now=clock.now()).uuid for host in HOSTS[2:6]]
    fail(store, clock, HOSTS[:2])
    first._claim()
    # The four instances, and one of the two hosts: its share.
    assert runs(first) == sorted(HOSTS[:1] + HOSTS[2:6])
    assert {store.get(u).owner for u in instances} == {first.owner}


def test_what_waits_behind_a_host_left_to_others_is_claimed(
        store, clock, engines):
    """Instance failures stored after the rack are not held up behind the
    host failures an engine leaves: it passes over those, in the same
    turn."""
    first, _ = engines(2)
    fail(store, clock, HOSTS[:4])
    instances = [store.add(type="VM", kind=Kind.INSTANCE, hostname=host,
                           generated_time=clock.now(), payload={},
                           origin="api", status=Status.NEW,
                           now=clock.now()).uuid for host in HOSTS[4:6]]
    first._claim()
    assert runs(first) == sorted(HOSTS[:2] + HOSTS[4:6])
    assert {store.get(u).owner for u in instances} == {first.owner}


def test_the_load_counts_each_waiting_host_once_and_no_run_by_hand(
        store, clock, engines):
    """Two notifications of one host are one host to recover; a run by
    hand (the CLI's) makes its host busy, and is no engine's share."""
    engine, = engines(1)
    fail(store, clock, HOSTS[:3] + HOSTS[:1])
    store.take(store.next_runnable(), "cli:7", 60)
    clock.sleep(2)
    load = store.host_load(engine.owner, live_within=60)
    assert load.live == {engine.owner}
    assert load.running == {}
    assert load.waiting == {HOSTS[1]: 2.0, HOSTS[2]: 2.0}


def test_a_held_host_failure_is_not_waiting(store, clock, engines):
    engine, = engines(1)
    [uuid] = fail(store, clock, HOSTS[:1])
    store.hold(store.get(uuid), "held by the window", 30)
    assert store.host_load(engine.owner, live_within=60).waiting == {}
    clock.sleep(31)
    assert store.host_load(engine.owner, live_within=60).waiting == {
        HOSTS[0]: 1.0}


def test_no_grace_no_balance(store, clock, engines, conf):
    conf.set_override("balance_grace", 0, group="engine")
    fail(store, clock)
    first, _, _ = engines(3)
    first._claim()
    assert len(first._runs) == 20


def test_an_engine_at_its_share_leaves_hosts_without_a_look_each(
        store, clock, engines):
    """A turn of an engine at its share costs the same statements however
    many host failures it leaves to the others: not one look of the store
    more for each."""
    first, _ = engines(2)
    statements = []
    sa.event.listen(store._engine, "before_cursor_execute",
                    lambda *args: statements.append(args[2]))

    def turn(running):
        """The statements of a turn that claims nothing."""
        first._claim()
        statements.clear()
        first._claim()
        assert len(first._runs) == running
        return len(statements)

    fail(store, clock, HOSTS[:2])
    leaving_one = turn(1)
    fail(store, clock, HOSTS[2:])
    assert turn(10) == leaving_one
