"""Three engines on one shared database (PostgreSQL, then MariaDB), each a
real ``recovery-engine`` process against the fake Nova.

Whatever happens to one engine (killed, frozen past its lease, cut off
from the database), each notification runs once, every instance is
evacuated once, and none is left locked. The fake Nova keeps each
request's User-Agent, which names the engine that sent it (its lease owner
name), so every request is attributed.
"""

import collections
import concurrent.futures
import re
import signal
import time
import urllib.error

import pytest
import sqlalchemy as sa

from recovery.db.store import open_store
from tests.fakenova import FakeNova
from tests.functional.engine_process import LOCK_REASON
from tests.functional.engine_process import owning_engine
from tests.functional.engine_process import start_engines
from tests.functional.engine_process import wait_until
from tests.tcpproxy import TcpProxy

HOST = "compute-1"
TARGETS = ("compute-2", "compute-3", "compute-4")
COUNT = 30
# Quick evacuations, yet a 30-instance run lasts seconds: long enough to
# act on an engine mid-run, by what Nova has seen, never by a sleep.
LATENCY = 0.3
MID_RUN_LOCKS = 5
OUTAGE = 10.0
FINISH_TIMEOUT = 90


@pytest.fixture(params=["postgresql", "mysql"])
def database(request):
    """A fresh database on each server in turn."""
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
def nova():
    with FakeNova(evacuation_latency=LATENCY) as fake:
        for host in (HOST, *TARGETS):
            fake.add_compute(host)
        yield fake


@pytest.fixture
def cluster(nova, tmp_path):
    """Start engines on a database: ``cluster(url, count=3, **options)``;
    their store, opened on ``direct`` (the server itself) when the engines
    reach it through a proxy. All closed at the end."""
    opened = []

    def start(url, count=3, direct=None, **options):
        engines = start_engines(count, tmp_path, nova.endpoint, url,
                                **options)
        store = open_store(direct or url)
        opened.append((engines, store))
        return engines, store

    yield start
    for engines, store in opened:
        for engine in engines:
            engine.close()
        store.close()


# -- reading what happened -------------------------------------------------
def locks(nova):
    return [e for e in nova.lock_events
            if e["event"] == "lock" and e["reason"] == LOCK_REASON]


def sent_by(nova, engine, since=0.0):
    """The Nova requests ``engine`` sent after ``since``."""
    return [r for r in nova.requests
            if engine.owner in r["user_agent"] and r["time"] > since]


def assert_recovered_once(nova, uuids, done):
    assert done["status"] == "finished", done["message"]
    evacuated = collections.Counter(c["uuid"] for c in nova.evacuate_calls)
    assert evacuated == {uuid: 1 for uuid in uuids}
    assert [s["id"] for s in nova.servers() if s["locked"]] == []


def boot_and_fail(nova, host=HOST, count=COUNT):
    uuids = [nova.add_server(f"{host}-vm{n}", host) for n in range(count)]
    nova.fail_host(host)
    return uuids


def mid_run(nova):
    wait_until(lambda: len(locks(nova)) >= MID_RUN_LOCKS,
               what=f"{MID_RUN_LOCKS} instances locked")


# -- the tests ---------------------------------------------------------------
def test_a_killed_owner_is_taken_over(nova, cluster, database):
    engines, store = cluster(database)
    uuids = boot_and_fail(nova)
    notification = engines[0].post_host_down(HOST)
    mid_run(nova)
    victim = owning_engine(engines, store, notification)
    killed_at = time.time()
    victim.kill()
    others = [e for e in engines if e is not victim]
    done = others[0].wait_status(notification, "finished", "failed",
                                 timeout=FINISH_TIMEOUT)
    assert_recovered_once(nova, uuids, done)
    after = sorted(r["time"] for e in others
                   for r in sent_by(nova, e, since=killed_at))
    assert after, "no Nova request after the kill names a live engine"
    print(f"takeover ({database.split(':')[0]}): "
          f"{after[0] - killed_at:.2f} s from SIGKILL to the new owner's "
          f"first Nova request")


def test_twenty_hosts_each_run_once_spread_over_engines(nova, cluster,
                                                        database):
    hosts = [f"failed-{n:02}" for n in range(20)]
    for host in hosts:
        nova.add_compute(host)
    servers = {host: boot_and_fail(nova, host, count=2) for host in hosts}
    # A lease long enough that an engine starved of CPU or I/O for a few
    # seconds (CI's test workers share two cores) keeps its runs: the
    # test is about who claims, not about takeovers.
    engines, store = cluster(database, lease_seconds=15, extra=(
        "[safety]\nmax_failed_hosts_percent = 100\n"
        "max_host_recoveries_per_window = 100\n"))
    notifications = [engines[n % 3].post_host_down(host)
                     for n, host in enumerate(hosts)]
    for uuid in notifications:
        done = engines[0].wait_status(uuid, "finished", "error", "failed",
                                      timeout=FINISH_TIMEOUT)
        assert done["status"] == "finished", done["message"]
        assert store.get(uuid).attempts == 1
    assert_recovered_once(nova, sum(servers.values(), []),
                          {"status": "finished"})
    runners = {host: {e.owner for e in engines for uuid in uuids
                      if any(uuid in r["path"] for r in sent_by(nova, e))}
               for host, uuids in servers.items()}
    # Failing, it says why a second engine ran a host: its warnings.
    assert all(len(owners) == 1 for owners in runners.values()), (
        runners, [line for e in engines
                  for line in e.log.read_text().splitlines()
                  if " WARNING " in line or " ERROR " in line])
    assert len(set().union(*runners.values())) > 1, runners


def test_a_frozen_owner_that_wakes_up_sends_nothing(nova, cluster,
                                                    database):
    engines, store = cluster(database)
    uuids = boot_and_fail(nova)
    notification = engines[0].post_host_down(HOST)
    mid_run(nova)
    victim = owning_engine(engines, store, notification)
    stopped_at = time.time()
    victim.signal(signal.SIGSTOP)
    wait_until(lambda: store.get(notification).owner != victim.owner,
               timeout=30, what="another engine taking the run over")
    woke_at = time.time()
    # The report of the lease path (no pid to go by): for the note.
    print(f"takeover of a frozen owner ({database.split(':')[0]}): "
          f"{woke_at - stopped_at:.2f} s from SIGSTOP, lease "
          f"{victim.lease_seconds:g} s")
    victim.signal(signal.SIGCONT)
    others = [e for e in engines if e is not victim]
    done = others[0].wait_status(notification, "finished", "failed",
                                 timeout=FINISH_TIMEOUT)
    assert_recovered_once(nova, uuids, done)
    late = sent_by(nova, victim, since=woke_at)
    assert late == [], [(r["method"], r["path"], r["action"]) for r in late]
    # Awake, it says so once per instance it gave up, without a traceback.
    # The run ends interrupted (the lease is lost), or stopped by the
    # store when its first write met a connection the server closed
    # while it was frozen (MariaDB does, under load).
    ends = (f"Notification {notification} interrupted",
            f"Notification {notification} stops: the store failed")
    wait_until(lambda: any(end in victim.log.read_text() for end in ends),
               what="the frozen run's end")
    victim.close()
    log = victim.log.read_text()
    for text in (log, victim.stderr()):
        assert "Traceback" not in text, text
    # Most say the lease was lost; a task whose first write on waking
    # met a connection the server closed meanwhile says that instead.
    # (The database's words vary with the server and the moment: the
    # end of the line is the run's.)
    abandoned = collections.Counter(re.findall(
        r"WARNING \S+ \[-\] Instance (\S+) abandoned: (?:lease lost; "
        r"the run resumes on the engine that owns it|.*; the run resumes "
        r"from its journal)$", log, re.MULTILINE))
    assert abandoned and set(abandoned.values()) == {1}, log
    unlocked = {uuid for r in sent_by(nova, victim) for uuid in uuids
                if r["action"] == "unlock" and uuid in r["path"]}
    assert set(uuids) - unlocked <= set(abandoned) <= set(uuids), log


def test_a_database_outage_stores_or_refuses_and_resumes(nova, cluster,
                                                         database):
    url = sa.engine.make_url(database)
    with TcpProxy(url.host, url.port) as proxy:
        engines, store = cluster(
            url.set(port=proxy.port).render_as_string(hide_password=False),
            direct=database)
        uuids = boot_and_fail(nova)
        notification = engines[0].post_host_down(HOST)
        mid_run(nova)
        cut_at = time.time()
        proxy.cut()
        answers = post_to_each(engines, TARGETS)
        # The outage itself lasts OUTAGE seconds: the scenario, not a wait.
        time.sleep(max(0.0, cut_at + OUTAGE - time.time()))
        # Nothing reaches the database now: what it holds was announced
        # before the cut.
        started = {r.uuid for r in store.journal(notification)}
        restored_at = time.time()
        proxy.restore()
        done = engines[1].wait_status(notification, "finished", "failed",
                                      timeout=FINISH_TIMEOUT)
    assert_recovered_once(nova, uuids, done)
    assert all(e.proc.poll() is None for e in engines), "an engine exited"
    assert all(status in (503, 202, None) for status, _ in answers), answers
    for status, body in answers:
        if status == 202:
            store.get(body["notification"]["notification_uuid"])
    touched = {uuid for r in nova.requests for uuid in uuids
               if uuid in r["path"] and r["method"] != "GET"
               and cut_at < r["time"] < restored_at}
    assert touched <= started, f"started while cut off: {touched - started}"


def post_to_each(engines, hosts):
    """POST a host-down notification to each engine at once; each
    answer's (status, body), or (None, None) for no answer."""
    def post(engine, host):
        try:
            return engine.request("POST", "/v1/notifications", {
                "notification": {
                    "type": "COMPUTE_HOST", "hostname": host,
                    "generated_time": "2026-11-22T10:00:00",
                    "payload": {"event": "STOPPED", "host_status": "NORMAL",
                                "cluster_status": "OFFLINE"}}},
                timeout=OUTAGE / 2)
        except (urllib.error.URLError, OSError):
            return None, None

    with concurrent.futures.ThreadPoolExecutor(len(engines)) as pool:
        return list(pool.map(post, engines, hosts))
