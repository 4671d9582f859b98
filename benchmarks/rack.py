"""The rack drill: a rack of 20 hosts with 50 instances each fails at
once, and three ``recovery-engine`` processes sharing one PostgreSQL
database recover it against the fake Nova, whose evacuations take 5 s.

The notifications all go to one engine's API, as a monitor behind one
address sends them; how the hosts spread over the engines is whatever
the engines do. The rack is a failure domain (a Nova aggregate with
``failure_domain`` metadata), so the safety brakes stay at their
defaults: the rack is one event, past the percentage and as one start
of the per-window cap, though it is most of this small cloud. The
engines run at their defaults (threads, poll interval, the ``[nova]``
rate cap of each), but for ``max_concurrent_host_recoveries``, set so
that every host may be recovered at once.

The bound is the least time the threads, the evacuation latency and the
rate cap allow together, for E engines, each recovering at most P hosts
at once with T threads per host, H hosts of N instances, an evacuation
latency L and a cap of R requests per second per engine:

    waves    = ceil(H / min(H, E * P))      hosts recovered one after the
                                            other, when there are more
                                            than the engines take at once
    threads  = waves * ceil(N / T) * L      each thread evacuates its
                                            instances one after another
    rate     = 3 * H * N / (E * R)          lock, evacuate and unlock,
                                            the requests no recovery can
                                            do without, at the cap
    bound    = max(threads, rate)

Everything else (the other requests, their round trips, the wait for a
poll to confirm an evacuation, the journal) is what the engines add: the
target is at most 1.10 times the bound.

    python -m benchmarks.rack [--hosts 20] [--per-host 50]

``--hosts 40 --per-host 250`` is the 10,000-instance drill (about 12
minutes on 2 cores): every host may still be recovered at once, and the
safety brakes stay at their defaults. Not in CI.

Reported: the time from the notifications to the last instance
recovered (its evacuation confirmed and the instance unlocked), against
the bound; instances per minute; Nova's requests per second at the peak
(1 s windows, all engines together, against the engines' caps added up);
Nova requests per instance, by kind; the engines' CPU per instance (user
+ system time of the three processes, from the notifications to the end,
less what they use in that time with nothing to recover, measured
first); each engine's peak RSS; the store's committed transactions
(PostgreSQL's own count for the database, from the notifications to the
end: the engines' reads included, less their idle rate, measured first
with the CPU's) and its rows by table at the end; and
how the hosts spread over the engines.
"""

from __future__ import annotations

import argparse
import collections
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from benchmarks import common
from tests.databases import POSTGRESQL
from tests.fakenova import FakeNova
from tests.functional.engine_process import start_engines

HOSTS, PER_HOST = 20, 50
LATENCY = 5.0
ENGINES = 3
# The defaults of [DEFAULT] host_failure_recovery_threads, [host_failure]
# poll_interval and [nova] max_requests_per_second.
THREADS = 3
POLL_INTERVAL = 0.5
RATE = 50.0
# The engines' own cost with nothing to recover (their detectors, leases
# and registry) is measured this long first, and taken out.
IDLE = 15.0


def bound(hosts: int, per_host: int) -> dict[str, float]:
    """The least time the threads, the latency and the rate cap allow;
    every host may be recovered at once, even by one engine
    (``max_concurrent_host_recoveries`` = ``hosts``)."""
    waves = math.ceil(hosts / min(hosts, ENGINES * hosts))
    threads = waves * math.ceil(per_host / THREADS) * LATENCY
    rate = 3 * hosts * per_host / (ENGINES * RATE)
    return {"threads_s": threads, "rate_s": rate,
            "bound_s": max(threads, rate)}


def drill(count: int, per_host: int) -> dict[str, Any]:
    hosts = [f"compute-{n}" for n in range(1, count + 1)]
    admin = POSTGRESQL.admin()
    database = POSTGRESQL.create(admin)
    try:
        with FakeNova(evacuation_latency=LATENCY) as fake, \
                tempfile.TemporaryDirectory() as workdir:
            common.failed_rack(fake, hosts, per_host)
            fake.add_aggregate("rack-1", hosts,
                               metadata={"failure_domain": "rack-1"})
            engines = start_engines(
                ENGINES, Path(workdir), fake.endpoint,
                POSTGRESQL.database_url(database), threads=THREADS,
                poll_interval=POLL_INTERVAL,
                extra=f"max_concurrent_host_recoveries = {count}\n"
                      f"[nova]\nmax_requests_per_second = {RATE:g}\n")
            try:
                idle = _cpu(engines)
                idle_commits, idle_began = (_commits(admin, database),
                                            time.monotonic())
                time.sleep(IDLE)
                idle = (_cpu(engines) - idle) / IDLE
                idle_commits = (_commits(admin, database) - idle_commits) / (
                    time.monotonic() - idle_began)
                cpu_ready = _cpu(engines)
                commits = _commits(admin, database)
                started = time.time()
                common.wait_finished(engines[0], [
                    engines[0].post_host_down(host) for host in hosts],
                    timeout=max(600, 4 * bound(count, per_host)["bound_s"]))
                cpu = _cpu(engines) - cpu_ready
                busy = time.time() - started
                owners = {e.owner: n for n, e in enumerate(engines, 1)}
                rss = [_peak_rss_mb(e.proc.pid) for e in engines]
            finally:
                for engine in engines:
                    engine.close()
            requests = fake.requests
        transactions = _commits(admin, database) - commits
        store = {"transactions": transactions,
                 "idle_transactions_per_s": idle_commits,
                 "transactions_less_idle": transactions - idle_commits * busy,
                 "rows": _rows(database)}
    finally:
        POSTGRESQL.drop(admin, database)
        admin.dispose()
    return _figures(count, per_host, requests, started, cpu - idle * busy,
                    owners, {"cpu_s": cpu, "idle_cpu_s_per_s": idle,
                             "peak_rss_mb": rss, "store": store})


def _cpu(engines: list[Any]) -> float:
    return sum(common.cpu_seconds(e.proc.pid) for e in engines)


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _commits(admin: sa.engine.Engine, database: str) -> int:
    """PostgreSQL's count of the transactions committed in ``database``
    (its statistics, flushed within a second of each)."""
    time.sleep(1.5)
    with admin.connect() as conn:
        conn.execute(sa.text("SELECT pg_stat_clear_snapshot()"))
        return int(conn.execute(sa.text(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = "
            ":name"), {"name": database}).scalar())


def _rows(database: str) -> dict[str, int]:
    engine = sa.create_engine(POSTGRESQL.database_url(database))
    try:
        with engine.connect() as conn:
            return {table: int(conn.execute(sa.text(
                f'SELECT count(*) FROM "{table}"')).scalar())
                for table in sa.inspect(conn).get_table_names()}
    finally:
        engine.dispose()


def _figures(count: int, per_host: int, requests: list[dict[str, Any]],
             started: float, cpu: float, owners: dict[str, int],
             raw: dict[str, Any]) -> dict[str, Any]:
    instances = count * per_host
    compute = [r for r in requests if r["path"].startswith("/v2.1")
               and r["time"] >= started]
    unlocks = [r["time"] for r in compute if r["action"] == "unlock"]
    seconds = max(unlocks) - started
    per_second = collections.Counter(int(r["time"] - started)
                                     for r in compute)
    # The instances each engine locked (the User-Agent names it).
    locked_by_engine: dict[int, set[str]] = collections.defaultdict(set)
    for r in compute:
        if r["action"] == "lock":
            engine = next((n for owner, n in owners.items()
                           if owner in r["user_agent"]), 0)
            locked_by_engine[engine].add(r["path"].split("/")[3])
    limits = bound(count, per_host)
    return {
        "hosts": count, "instances_per_host": per_host,
        "evacuation_latency_s": LATENCY, "engines": ENGINES,
        "threads": THREADS, "poll_interval_s": POLL_INTERVAL,
        "rate_cap_per_engine": RATE, **limits,
        "seconds": seconds, "ratio_to_bound": seconds / limits["bound_s"],
        "instances_per_minute": instances / seconds * 60,
        "peak_requests_per_second": max(per_second.values()),
        "rate_cap_total": ENGINES * RATE,
        "requests": len(compute),
        "requests_per_instance": len(compute) / instances,
        "kinds": common.kinds(compute),
        **raw, "cpu_less_idle_s": cpu,
        "cpu_ms_per_instance": cpu / instances * 1000,
        "instances_locked_by_engine": {
            str(n): len(uuids) for n, uuids in sorted(
                locked_by_engine.items())},
    }


def main(hosts: int = HOSTS, per_host: int = PER_HOST) -> dict[str, Any]:
    data = drill(hosts, per_host)
    instances = hosts * per_host
    name = "rack" if (hosts, per_host) == (HOSTS, PER_HOST) else (
        f"rack-{hosts}x{per_host}")
    common.report(name, f"The rack drill: {hosts} hosts x {per_host} "
                  f"instances, {ENGINES} engines, {LATENCY:g} s "
                  f"evacuations (fake Nova)", [
                      ("last instance recovered, s", data["seconds"], ""),
                      ("bound (threads, latency, rate cap), s",
                       data["bound_s"], ""),
                      ("ratio to the bound", data["ratio_to_bound"],
                       "target <= 1.10"),
                      ("instances per minute", data["instances_per_minute"],
                       ""),
                      ("Nova requests per second at the peak",
                       data["peak_requests_per_second"],
                       f"cap {data['rate_cap_total']:g}"),
                      ("Nova requests per instance",
                       data["requests_per_instance"], "target <= 3.5"),
                      ("CPU per instance, ms", data["cpu_ms_per_instance"],
                       "target <= 2"),
                      ("peak RSS of each engine, MB",
                       ", ".join(f"{mb:.0f}" for mb in data["peak_rss_mb"]),
                       "target <= 300"),
                      ("store transactions per instance, idle taken out",
                       data["store"]["transactions_less_idle"] / instances,
                       "target <= 2, leases apart"),
                      ("instances locked by each engine",
                       str(data["instances_locked_by_engine"]), ""),
                  ], data)
    return data


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=HOSTS)
    parser.add_argument("--per-host", type=int, default=PER_HOST)
    args = parser.parse_args()
    main(args.hosts, args.per_host)
