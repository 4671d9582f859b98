"""The store's claims on a three-node MariaDB Galera cluster
(tests/galera.py), with writers on several nodes at once.

A row lock (``SELECT ... FOR UPDATE``) is held on one Galera node only,
and Galera certifies writes, never reads: two claims made at once on two
nodes would each see the other's work as not there yet. The claims lock
is therefore also a write (recovery.db.claims_lock.lock_claims), and of
two claims certified at once one loses with a deadlock, is tried again, and
sees the winner's. Each race below is run many times: once is luck.

Then two real engines, each on its own node, recover a host while the
node of the engine that runs it is killed.
"""

import collections
import concurrent.futures
import datetime
import functools
import subprocess
import sys
import threading
import time

import pytest
import sqlalchemy as sa

from recovery import exception
from recovery import intake
from recovery.db import revisions
from recovery.db.claims import Window
from recovery.db.events import EventKind
from recovery.db.store import open_store
from recovery.notification import Kind
from recovery.notification import Notification
from recovery.notification import Status
from recovery.notification import classify
from tests.fakenova import FakeNova
from tests.functional.cli_process import run_cli
from tests.functional.engine_process import LOCK_REASON
from tests.functional.engine_process import EngineProcess
from tests.functional.engine_process import create_schema
from tests.functional.engine_process import owning_engine
from tests.functional.engine_process import wait_until
from tests.galera import galera  # noqa: F401

TRIALS = 40
LEASE = 600.0
STOPPED = {"event": "STOPPED", "host_status": "NORMAL",
           "cluster_status": "OFFLINE"}
NOW = datetime.datetime.now(datetime.timezone.utc)


@pytest.fixture
def cluster(galera):  # noqa: F811
    """The cluster, with every node up (a test before may have killed
    one)."""
    galera.heal()
    return galera


@pytest.fixture
def database(cluster):
    """A new database on the cluster, with the schema: its name."""
    with cluster.database() as name:
        open_store(cluster.nodes[0].url(name), upgrade=True).close()
        # Galera applies a commit on the other nodes a moment after it
        # returns: a store opened there at once may read the old schema.
        for node in cluster.nodes:
            engine = sa.create_engine(node.url(name))
            try:
                wait_until(functools.partial(revisions.is_current, engine),
                           what=f"the schema at head on {node.url(name)}")
            finally:
                engine.dispose()
        yield name


@pytest.fixture
def stores(cluster, database):
    """One store on each of two nodes, for two writers."""
    opened = [open_store(node.url(database)) for node in cluster.nodes[:2]]
    yield opened
    for store in opened:
        store.close()


def add(store, hostname):
    return store.add(type="COMPUTE_HOST",
                     kind=classify("COMPUTE_HOST", STOPPED),
                     hostname=hostname, generated_time=NOW, payload=STOPPED,
                     origin="api", status=Status.NEW, now=NOW)


def race(*calls):
    """Run ``calls`` at once, each in a thread of its own, released
    together: what each returned, or raised."""
    start = threading.Barrier(len(calls))

    def run(call):
        start.wait()
        try:
            return call()
        except exception.RecoveryError as exc:
            return exc

    with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(run, calls))


class Tally:
    """What each trial of a race gave: its winners, its losers told
    "taken" (None, or RecoveryInProgress), and its losers that gave up on
    a conflict (StoreUnavailable)."""

    def __init__(self, cluster):
        self.winners = collections.Counter()
        self.errors: list[str] = []
        self.cluster = cluster
        self.conflicts = self._conflicts()

    def _conflicts(self) -> int:
        """The transactions the nodes rolled back in a conflict so far:
        proof that the claims did meet."""
        return sum(int(node.status(name)) for node in self.cluster.nodes
                   for name in ("wsrep_local_cert_failures",
                                "wsrep_local_bf_aborts"))

    def record(self, results):
        won = [r for r in results if isinstance(r, (Notification, tuple))]
        self.winners[len(won)] += 1
        self.errors += [str(r) for r in results
                        if isinstance(r, exception.StoreUnavailable)]
        for result in results:
            if isinstance(result, exception.RecoveryError) and not (
                    isinstance(result, (exception.StoreUnavailable,
                                        exception.RecoveryInProgress))):
                raise result

    def check(self, what):
        print(f"{what}: {TRIALS} trials, winners per trial "
              f"{dict(sorted(self.winners.items()))}, "
              f"{self._conflicts() - self.conflicts} conflicts rolled "
              f"back by Galera, {len(self.errors)} gave up after retries")
        assert self.winners == {1: TRIALS}, (
            f"{what}: winners per trial {dict(self.winners)} (trials "
            f"with two winners: {self.winners[2]} of {TRIALS})")


def live_runs(store, hostname):
    return store.list_notifications(
        filters={"hostname": hostname, "status": "running"})


def agree(one, other, count):
    """Until both nodes hold what ``count(store)`` counts alike (the
    other node applies a write set a moment after it is certified)."""
    wait_until(lambda: count(one) == count(other),
               what="the nodes agreeing")


def claim_host(store, host, owner):
    """What 'recovery host-failure HOST' claims."""
    return intake.by_hand(store, kind=Kind.HOST_FAILURE, hostname=host,
                          owner=owner, lease=LEASE, actor=owner)


# -- the races ---------------------------------------------------------------
def test_two_notifications_of_one_host_taken_on_two_nodes(cluster, stores):
    """Two notifications for one host, one taken on each node at once:
    one run of the host, never two."""
    one, other = stores
    tally = Tally(cluster)
    for trial in range(TRIALS):
        host = f"compute-{trial}"
        first, second = add(one, host), add(other, host)
        tally.record(race(
            functools.partial(one.take, first, "engine-a:1", LEASE),
            functools.partial(other.take, second, "engine-b:2", LEASE)))
        agree(one, other, functools.partial(_count_live, host))
    tally.check("take() of two notifications of one host on two nodes")
    for trial in range(TRIALS):
        assert len(live_runs(one, f"compute-{trial}")) == 1


def _count_live(host, store):
    return len(live_runs(store, host))


def _count_started(store):
    return len(store.recoveries_started_within(3600))


def test_the_per_window_cap_holds_across_nodes(cluster, stores):
    """Two host failures of two hosts, taken on two nodes at once, with
    room in the window for one more: one starts."""
    one, other = stores
    tally = Tally(cluster)
    for trial in range(TRIALS):
        first, second = add(one, f"a-{trial}"), add(other, f"b-{trial}")
        window = Window(_count_started(one) + 1, 3600.0)
        tally.record(race(
            functools.partial(one.take, first, "engine-a:1", LEASE,
                              window=window),
            functools.partial(other.take, second, "engine-b:2", LEASE,
                              window=window)))
        agree(one, other, _count_started)
    tally.check("take() within the per-window cap on two nodes")
    assert _count_started(one) == TRIALS


def test_claim_host_on_two_nodes_gives_one_run(cluster, stores):
    """The CLI's claim of a host on one node, raced by another CLI's (odd
    trials: by an engine's take) on another node: one run."""
    one, other = stores
    tally = Tally(cluster)
    for trial in range(TRIALS):
        host = f"cli-{trial}"
        if trial % 2:
            second = functools.partial(other.take, add(other, host),
                                       "engine-b:2", LEASE)
        else:
            second = functools.partial(claim_host, other, host, "cli-b:2")
        tally.record(race(
            functools.partial(claim_host, one, host, "cli-a:1"), second))
        agree(one, other, functools.partial(_count_live, host))
    tally.check("claim_host() against claim_host() or take() on two nodes")


# -- the schema upgrade ------------------------------------------------------
UPGRADES = 3


def test_two_upgrades_on_two_nodes_leave_the_schema_at_head(
        cluster, tmp_path):
    """'recovery db upgrade' run on two nodes at once (which the README
    says not to do: its lock, GET_LOCK, is one node's). Galera runs each
    DDL statement in one order on every node, so the run that is behind
    fails on a table or column the other made (under load both may fail,
    each on the other's step); one more run takes the schema to this
    version's head, whatever the two left."""
    failed = 0
    for trial in range(UPGRADES):
        with cluster.database() as name:
            configs = []
            for node in cluster.nodes[:2]:
                config = tmp_path / f"{trial}-{node.name}.conf"
                config.write_text(
                    f"[database]\nconnection = {node.url(name)}\n")
                configs.append(str(config))
            runs = [subprocess.Popen(
                [sys.executable, "-m", "recovery.cmd.cli", "--config-file",
                 config, "db", "upgrade"], stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, text=True) for config in configs]
            codes = [run.wait(120) for run in runs]
            for run in runs:
                run.stderr.close()
            failed += sum(1 for code in codes if code)
            assert run_cli(configs[1], "db", "upgrade").returncode == 0
            engine = sa.create_engine(cluster.nodes[2].url(name))
            try:
                assert revisions.current_revision(engine) == (
                    revisions.HEAD_REVISION)
            finally:
                engine.dispose()
    print(f"db upgrade on two nodes at once: {UPGRADES} trials, "
          f"{failed} runs failed, the schema at head after each")


# -- a node killed mid-run ---------------------------------------------------
COUNT = 30
LATENCY = 0.3
MID_RUN_LOCKS = 5
FINISH_TIMEOUT = 90


@pytest.fixture
def nova():
    with FakeNova(evacuation_latency=LATENCY) as fake:
        for host in ("compute-1", "compute-2", "compute-3", "compute-4"):
            fake.add_compute(host)
        yield fake


@pytest.fixture
def engines(cluster, database, nova, tmp_path):
    """Two engines, each writing to its own Galera node (the first and
    the second); the third node holds a copy only."""
    started = []
    try:
        for n, node in enumerate(cluster.nodes[:2], start=1):
            workdir = tmp_path / f"engine-{n}"
            workdir.mkdir()
            started.append(EngineProcess(
                workdir, nova.endpoint, database=node.url(database),
                lease_seconds=5))
        create_schema(started[0].config)
        for engine in started:
            engine.start()
        yield started
    finally:
        for engine in started:
            engine.close()


def test_a_killed_galera_node_leaves_the_other_engine_to_finish(
        cluster, database, nova, engines):
    """The node under the engine that runs a host's recovery is killed
    (SIGKILL) mid-run: the engine on another node takes the run over and
    finishes it; each instance is evacuated once, none is left locked."""
    uuids = [nova.add_server(f"vm{n}", "compute-1") for n in range(COUNT)]
    nova.fail_host("compute-1")
    notification = engines[0].post_host_down("compute-1")
    # Read on the third node: it outlives whichever node is killed.
    store = open_store(cluster.nodes[2].url(database))
    try:
        wait_until(lambda: len([e for e in nova.lock_events
                                if e["event"] == "lock"
                                and e["reason"] == LOCK_REASON])
                   >= MID_RUN_LOCKS,
                   what=f"{MID_RUN_LOCKS} instances locked")
        victim = owning_engine(engines, store, notification)
        [survivor] = [e for e in engines if e is not victim]
        node = cluster.nodes[engines.index(victim)]
        killed_at = time.monotonic()
        node.kill()
        done = survivor.wait_status(notification, "finished", "failed",
                                    timeout=FINISH_TIMEOUT)
        took = time.monotonic() - killed_at
        assert done["status"] == "finished", done["message"]
        assert store.get(notification).owner is None
        taken_over = [e for e in store.events(notification)
                      if e.kind == EventKind.TAKEN_OVER]
        assert taken_over, "the survivor did not take the run over"
    finally:
        store.close()
    evacuated = collections.Counter(c["uuid"] for c in nova.evacuate_calls)
    assert evacuated == {uuid: 1 for uuid in uuids}
    assert [s["id"] for s in nova.servers() if s["locked"]] == []
    print(f"galera {node.name} killed under {victim.owner}: "
          f"{survivor.owner} finished the run {took:.1f} s later")
