"""Benchmark: what the store costs per notification and per instance, on
each backend (SQLite, PostgreSQL, MariaDB/MySQL).

    python -m benchmarks.store

One engine's writes for a host recovery, in the order the engine makes
them: the intake (durable before the 202), the claim under the claims
lock, then per instance the journal entries of its phases and the step
events, each checked against the run's lease (the fencing token), with
the decision log's events the engine writes in those transactions (an
instance's evacuation and outcome), then the lease renewals and the
finish. The servers are the local ones the
tests use (tests/databases.py: RECOVERY_TEST_POSTGRESQL_URL and
RECOVERY_TEST_MYSQL_URL override them); a backend that is not there is
skipped with one line.

Then the journal alone, as a host recovery writes it, in a child process
made green as the engine and the command are: each instance's six entries
(one per phase), first one instance at a time (a transaction per entry),
then with every instance in flight at once, when the entries written
while one transaction commits share the next (group commit). It reports
the CPU, wall time and transactions per instance of each.
"""

from __future__ import annotations

import datetime
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from benchmarks import common
from recovery import concurrency
from recovery.db.claims import Holder
from recovery.db.events import Decision
from recovery.db.events import EventKind
from recovery.db.store import open_store
from recovery.notification import Kind
from recovery.notification import Status
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import Phase
from tests import databases

HOSTS = 10
INSTANCES = 30            # per host
LEASE = 30.0
OWNER = "bench-engine"
# The journal entries an instance gets in a host recovery.
PHASES = (Phase.LOCKING, Phase.EVACUATING, Phase.CONFIRMING, Phase.UNLOCKING,
          Phase.DONE)
# The journal alone: this many instances, with the entries of an instance
# restored to its state after the evacuation.
JOURNAL_INSTANCES = 200
JOURNAL_PHASES = (Phase.LOCKING, Phase.EVACUATING, Phase.CONFIRMING,
                  Phase.RESTORING, Phase.UNLOCKING, Phase.DONE)


def _timed(samples: dict[str, list[float]], name: str,
           fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    started = time.perf_counter()
    value = fn(*args, **kwargs)
    samples.setdefault(name, []).append(
        (time.perf_counter() - started) * 1000)
    return value


def _host_recovery(store, samples, host: str) -> None:
    now = datetime.datetime.now(datetime.timezone.utc)
    item = _timed(samples, "intake (add)", store.add,
                  type="COMPUTE_HOST", kind=Kind.HOST_FAILURE,
                  hostname=host, generated_time=now,
                  payload={"event": "STOPPED"}, origin="api",
                  status=Status.NEW, now=now, event=Decision(
                      "api", host, EventKind.RECEIVED, "COMPUTE_HOST"))
    taken = _timed(samples, "claim (take)", store.take, item, OWNER, LEASE)
    holder = Holder(OWNER, taken.version, LEASE)
    _timed(samples, "step event", store.add_step_event, taken.uuid,
           "recover_instances", "RUNNING", 0.5, "started", now,
           holder=holder)
    for n in range(INSTANCES):
        result = InstanceResult(uuid=f"{host}-vm-{n}", name=f"vm-{n}",
                                source_host=host, original_state="active")
        subject = f"{result.name} ({result.uuid})"
        for phase in PHASES:
            result.phase = phase
            event = None
            if phase is Phase.EVACUATING:
                event = Decision(OWNER, subject, EventKind.EVACUATING,
                                 f"evacuating from {host} (auto)")
            if phase is Phase.DONE:
                result.outcome = Outcome.RECOVERED
                event = Decision(OWNER, subject, EventKind.RECOVERED,
                                 f"evacuated from {host} (auto)")
            _timed(samples, "journal entry (save_instance)",
                   store.save_instance, taken.uuid, result, now,
                   holder=holder, event=event)
        if n % 10 == 0:
            _timed(samples, "lease renewal", store.renew_leases,
                   {taken.uuid: holder})
    _timed(samples, "finish", store.finish, taken.uuid, Status.FINISHED,
           "done", holder=holder, event=Decision(
               OWNER, host, EventKind.FINISHED, "done"))


def _journal(store, host: str, in_flight: int) -> dict[str, float]:
    """JOURNAL_INSTANCES instances' entries, ``in_flight`` at a time."""
    now = datetime.datetime.now(datetime.timezone.utc)
    item = store.add(type="COMPUTE_HOST", kind=Kind.HOST_FAILURE,
                     hostname=host, generated_time=now,
                     payload={"event": "STOPPED"}, origin="api",
                     status=Status.NEW, now=now)
    taken = store.take(item, OWNER, LEASE)
    holder = Holder(OWNER, taken.version, LEASE)
    commits = 0

    def committed(conn: Any) -> None:
        nonlocal commits
        commits += 1

    def instance(n: int) -> None:
        result = InstanceResult(uuid=f"{host}-vm-{n}", name=f"vm-{n}",
                                source_host=host, original_state="active")
        for phase in JOURNAL_PHASES:
            result.phase = phase
            if phase is Phase.DONE:
                result.outcome = Outcome.RECOVERED
            store.save_instance(taken.uuid, result, now, holder=holder)

    # The store's engine: its commits are the journal's transactions.
    engine = store._engine
    sa.event.listen(engine, "commit", committed)
    cpu, wall = time.process_time(), time.perf_counter()
    concurrency.task_pool(in_flight).run(instance, range(JOURNAL_INSTANCES))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    sa.event.remove(engine, "commit", committed)
    store.finish(taken.uuid, Status.FINISHED, "done", holder=holder)
    return {"cpu_ms_per_instance": cpu * 1000 / JOURNAL_INSTANCES,
            "wall_ms_per_instance": wall * 1000 / JOURNAL_INSTANCES,
            "transactions_per_instance": commits / JOURNAL_INSTANCES}


def _measure(url: str) -> dict[str, Any]:
    store = open_store(url, upgrade=True)
    samples: dict[str, list[float]] = {}
    started = time.perf_counter()
    try:
        for h in range(HOSTS):
            _host_recovery(store, samples, f"compute-{h}")
        total_ms = (time.perf_counter() - started) * 1000
        journal = json.loads(subprocess.run(
            [sys.executable, "-m", "benchmarks.store", "--journal", url],
            cwd=common.ROOT, check=True, capture_output=True,
            text=True).stdout)
    finally:
        store.close()
    ops = {name: {"median_ms": statistics.median(values),
                  "p95_ms": sorted(values)[int(0.95 * (len(values) - 1))],
                  "count": len(values)}
           for name, values in samples.items()}
    return {"ops": ops, "ms_per_instance": total_ms / (HOSTS * INSTANCES),
            "journal": journal}


def _server_url(server: databases.Server):
    """A fresh database on ``server`` and its admin engine, or None."""
    try:
        admin = server.admin()
        name = server.create(admin)
    except (ImportError, sa.exc.SQLAlchemyError) as exc:
        print(f"  {server.name}: skipped ({str(exc).splitlines()[0]})")
        return None
    return admin, name


def main() -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        results["sqlite"] = _measure(f"sqlite:///{tmp}/store.sqlite")
    for server in (databases.POSTGRESQL, databases.MYSQL):
        found = _server_url(server)
        if found is None:
            continue
        admin, name = found
        try:
            results[server.name] = _measure(server.database_url(name))
        finally:
            server.drop(admin, name)
            admin.dispose()
    rows = []
    for backend, data in results.items():
        for op, stats in data["ops"].items():
            rows.append((f"{backend}: {op}, median / p95 (ms)",
                         f"{stats['median_ms']:.2f} / {stats['p95_ms']:.2f}",
                         ""))
        rows.append((f"{backend}: store time per instance (ms)",
                     data["ms_per_instance"], ""))
        for mode, journal in data["journal"].items():
            rows.append((
                f"{backend}: journal, {mode}: CPU / wall (ms), "
                f"transactions per instance",
                f"{journal['cpu_ms_per_instance']:.2f} / "
                f"{journal['wall_ms_per_instance']:.2f}, "
                f"{journal['transactions_per_instance']:.2f}", ""))
    common.report("store", f"Store cost, {HOSTS} hosts x {INSTANCES} "
                  f"instances, {len(PHASES)} journal entries each", rows,
                  {"hosts": HOSTS, "instances_per_host": INSTANCES,
                   "backends": results})
    return results


def _journal_child(url: str) -> None:
    """The journal part (``--journal URL``), in this process made green."""
    concurrency.monkey_patch()
    store = open_store(url)
    try:
        print(json.dumps({
            "one at a time": _journal(store, "journal-1", 1),
            "all in flight": _journal(store, "journal-2",
                                      JOURNAL_INSTANCES)}))
    finally:
        store.close()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--journal"]:
        _journal_child(sys.argv[2])
    else:
        main()
