"""A stress test on native threads: ``recovery-engine`` as a real process
on the threading backend, three hosts of fifty instances failing at once,
twenty instances of each recovered at a time, against the fake Nova with
random latency on every request and every evacuation; repeated.

A real process, not the flows in this one: the races it looks for are
between every part that runs on threads in production (the engine's
loop, the three runs and their pools, the lease keeper, the watcher
shared by the runs, the rate limiter, the journal's commit groups, the
API on cheroot), which only the entry point wires together. One engine
serves every round: what outlives a run (the watcher, the keeper, the
limiter, the metrics) is shared by the next.

After each round: each instance evacuated exactly once, none left
locked, and the journal consistent: each notification finished and
released (no owner, no lease), one journal entry per instance of its
host, each recovered and done on the host Nova has it on, one
``recovered`` event per instance.

``STRESS_ROUNDS`` (default 5) and ``STRESS_SEED`` (default: random,
named in any failure) repeat it, or replay one.
"""

import collections
import os
import random
import time

import pytest

from recovery import concurrency
from recovery.notification import Status
from recovery.results import Outcome
from recovery.results import Phase
from tests.fakenova import FakeNova
from tests.fakenova.state import State
from tests.functional.engine_process import LOCK_REASON
from tests.functional.engine_process import EngineProcess
from tests.functional.engine_process import wait_until

HOSTS, INSTANCES, THREADS = 3, 50, 20
ROUNDS = int(os.environ.get("STRESS_ROUNDS", "5"))
SPARES = ("spare-1", "spare-2", "spare-3")
# Every request waits 0 to 50 ms; each evacuation takes 0.2 s +/- 60 %.
REQUEST_LATENCY = (0.0, 0.05)
EVACUATION_LATENCY, JITTER = 0.2, 0.6


@pytest.fixture
def seed():
    return int(os.environ.get("STRESS_SEED", random.randrange(2 ** 32)))


@pytest.fixture
def nova(seed):
    with FakeNova(evacuation_latency=EVACUATION_LATENCY,
                  evacuation_jitter=JITTER, request_latency=REQUEST_LATENCY,
                  seed=seed) as fake:
        for host in SPARES:
            fake.add_compute(host)
        yield fake


@pytest.fixture
def engine(nova, tmp_path):
    process = EngineProcess(
        tmp_path, nova.endpoint, threads=THREADS,
        env={concurrency.BACKEND_VARIABLE: "threading"},
        # The shortest lease: the keeper renews every 1.7 s, while the
        # runs write and end.
        lease_seconds=5,
        # Several rounds of three hosts, against few spares: the gates
        # are not what is tested. The rate cap is, high enough to keep
        # the round short.
        extra="\n[safety]\nmax_failed_hosts_percent = 100\n"
              "max_host_recoveries_per_window = 100\n"
              "[nova]\nmax_requests_per_second = 500\n")
    yield process
    process.close()


def ended(engine, uuid) -> bool:
    # What the engine tells systemd is read as it comes: a full socket
    # would make it warn.
    engine.drain()
    return engine.notification(uuid)["status"] in ("finished", "error",
                                                  "failed")


def peak_locked_per_host(nova, hosts_of):
    """The most instances of each host locked by recovery at once."""
    held, peak = collections.Counter(), collections.Counter()
    for event in nova.lock_events:
        host = hosts_of.get(event["uuid"])
        if host is None:
            continue
        if event["event"] == "lock" and event["reason"] == LOCK_REASON:
            held[host] += 1
            peak[host] = max(peak[host], held[host])
        elif event["event"] == "unlock":
            held[host] -= 1
    return peak


def check_round(engine, nova, uuids, instances, seed):
    """The invariants of one round (``uuids``: notification by host;
    ``instances``: instance uuids by host)."""
    why = f"(STRESS_SEED={seed})"
    for uuid in uuids.values():
        shown = engine.notification(uuid)
        assert shown["status"] == "finished", (shown["message"], why)
    everyone = [u for host in instances for u in instances[host]]
    evacuated = collections.Counter(c["uuid"] for c in nova.evacuate_calls)
    assert {u: evacuated[u] for u in everyone} == dict.fromkeys(
        everyone, 1), f"an instance evacuated other than once {why}"
    locked = [s["id"] for s in nova.servers()
              if s["locked"] and s["locked_reason"] == LOCK_REASON]
    assert locked == [], f"instances left locked {why}"
    servers = {s["id"]: s for s in nova.servers()}
    store = engine.store()
    try:
        for host, uuid in uuids.items():
            row = store.get(uuid)
            assert row.status is Status.FINISHED, (row.message, why)
            assert f"{INSTANCES} recovered" in row.message, why
            assert (row.owner, row.lease_until) == (None, None), why
            journal = store.journal(uuid)
            assert sorted(r.uuid for r in journal) == sorted(
                instances[host]), f"one entry per instance {why}"
            for result in journal:
                server = servers[result.uuid]
                assert (result.outcome, result.phase) == (
                    Outcome.RECOVERED, Phase.DONE), (result, why)
                assert result.dest_host == server["host"] in SPARES, why
                assert (server["vm_state"], server["task_state"]) == (
                    "active", None), why
            recovered = collections.Counter(
                e.subject for e in store.events(uuid)
                if e.kind == "recovered")
            assert sorted(recovered.values()) == [1] * INSTANCES, (
                f"one recovered event per instance {why}")
    finally:
        store.close()
    hosts_of = {u: host for host in instances for u in instances[host]}
    assert all(n <= THREADS for n in peak_locked_per_host(
        nova, hosts_of).values()), f"a pool over {THREADS} {why}"


def test_three_hosts_of_fifty_on_native_threads_repeatedly(engine, nova,
                                                           seed):
    engine.start()
    took = []
    for round_ in range(1, ROUNDS + 1):
        hosts = [f"r{round_}-compute-{n}" for n in range(1, HOSTS + 1)]
        instances = {}
        for host in hosts:
            nova.add_compute(host)
            instances[host] = [nova.add_server(f"{host}-vm{n}", host)
                               for n in range(INSTANCES)]
        started = time.monotonic()
        for host in hosts:
            nova.fail_host(host)
        uuids = {host: engine.post_host_down(host) for host in hosts}
        for uuid in uuids.values():
            wait_until(lambda uuid=uuid: ended(engine, uuid), 90,
                       f"notification {uuid} ended")
        took.append(time.monotonic() - started)
        check_round(engine, nova, uuids, instances, seed)
    log = (engine.workdir / "engine.log").read_text()
    assert "Concurrency backend: threading" in log
    for trouble in ("Traceback", "Lost the lease", "unexpected error",
                    "ERROR"):
        assert trouble not in log, f"{trouble} in the engine's log"
    print(f"rounds of {HOSTS}x{INSTANCES} on threads (seed {seed}): "
          + ", ".join(f"{t:.1f} s" for t in took))


def test_the_fake_nova_s_random_latency_is_bounded_and_repeatable():
    def draws(seed):
        state = State(EVACUATION_LATENCY, 0.0, 1000,
                      request_latency=REQUEST_LATENCY,
                      evacuation_jitter=JITTER, seed=seed)
        return ([state.request_delay() for _ in range(100)],
                [state.one_evacuation_latency() for _ in range(100)])

    requests, evacuations = draws(7)
    assert (requests, evacuations) == draws(7)
    assert all(REQUEST_LATENCY[0] <= d <= REQUEST_LATENCY[1]
               for d in requests)
    assert all(EVACUATION_LATENCY * (1 - JITTER) <= d
               <= EVACUATION_LATENCY * (1 + JITTER) for d in evacuations)
    assert len(set(requests)) > 1
    # None asked: none added.
    assert State(0.3, 0.0, 1000).request_delay() == 0.0
