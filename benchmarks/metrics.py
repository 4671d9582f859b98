"""Benchmark: what the Prometheus metrics cost with 1,000 instances in
flight.

    python -m benchmarks.metrics

The hooks an instance's recovery calls, as many times as it calls them
(each Nova call timed and counted, each journal change shown to the
outcome listener, each rate-limiter turn), for 1,000 instances at once;
then a scrape of ``/metrics`` with every label in use and a store of 20
host failures behind it. Reported: CPU per instance of the hooks, the
scrape's time and size, the memory the registry holds after the 1,000
(it must not grow with instances: no label is per instance), and what
importing prometheus-client costs a process.
"""

from __future__ import annotations

import datetime
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from typing import Any

import prometheus_client

from benchmarks import common
from recovery.db.store import open_store
from recovery.metrics import InstanceOutcomes
from recovery.metrics import Metrics
from recovery.notification import Kind
from recovery.notification import Status
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import Phase

INSTANCES = 1000
HOSTS = 20
# What one evacuated instance asks of Nova (the shared migration poll is
# per host, not per instance: counted once per 50 instances here).
CALLS = ("server.lock", "server.evacuate", "server.get", "server.unlock")
PHASES = (Phase.LOCKING, Phase.EVACUATING, Phase.CONFIRMING,
          Phase.RESTORING, Phase.UNLOCKING, Phase.DONE)
NOW = datetime.datetime(2026, 11, 25, 10, 0, tzinfo=datetime.timezone.utc)
ROUNDS = 5


def one_round(metrics: Metrics) -> float:
    """CPU seconds of the hooks of ``INSTANCES`` instances."""
    listener = InstanceOutcomes()
    results = [InstanceResult(
        uuid=f"i-{n}", name=f"vm-{n}", source_host=f"compute-{n % HOSTS}",
        original_state="active", method="auto", started_at=NOW)
        for n in range(INSTANCES)]
    started = time.process_time()
    for n, result in enumerate(results):
        for kind in CALLS:
            with metrics.nova_call(kind):
                pass
        if n % 50 == 0:
            with metrics.nova_call("migration.list"):
                pass
        for phase in PHASES:
            result.phase = phase
            if phase is Phase.UNLOCKING:
                result.outcome = Outcome.RECOVERED
            if phase is Phase.DONE:
                result.finished_at = NOW + datetime.timedelta(seconds=20)
            listener.instance_changed(result)
    return time.process_time() - started


def _baseline() -> float:
    """The same loop with hooks that do nothing."""
    class Nothing:
        def __enter__(self) -> None:
            return None

        def __exit__(self, *exc: Any) -> None:
            return None

    class NoMetrics:
        def nova_call(self, kind: str) -> Nothing:
            return Nothing()

    import recovery.metrics as module

    counted = module.METRICS
    module.METRICS = Metrics()   # the listener reports here, unused
    try:
        started = time.process_time()
        one_round(NoMetrics())   # type: ignore[arg-type]
        return time.process_time() - started
    finally:
        module.METRICS = counted


def scrape(metrics: Metrics) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as workdir:
        store = open_store(f"sqlite:///{workdir}/m.sqlite")
        try:
            for n in range(HOSTS):
                store.add(type="COMPUTE_HOST", kind=Kind.HOST_FAILURE,
                          hostname=f"compute-{n}", generated_time=NOW,
                          payload={"event": "STOPPED", "n": n},
                          origin="api", status=Status.RUNNING, now=NOW)
            store.engine_seen("engine-1:1", "engine-1", 1)
            metrics.watch_store(store)
            times, size = [], 0
            for _ in range(20):
                started = time.perf_counter()
                size = len(prometheus_client.generate_latest(
                    metrics.registry))
                times.append(time.perf_counter() - started)
        finally:
            store.close()
    return {"scrape_ms": statistics.median(times) * 1000,
            "scrape_bytes": size}


# What recovery-engine imports anyway, before prometheus-client.
ENGINE_LIBRARIES = ("novaclient.client", "keystoneauth1.session", "webob",
                    "sqlalchemy", "alembic", "oslo_config.cfg",
                    "oslo_log.log", "keystonemiddleware.auth_token")


def import_cost() -> dict[str, float]:
    """RSS and time that importing prometheus-client adds to a new
    process that has the engine's other libraries."""
    code = ("import time, warnings\n"
            "warnings.simplefilter('ignore')\n"
            + "".join(f"import {name}\n" for name in ENGINE_LIBRARIES) +
            "import eventlet\n"
            "def rss():\n"
            "    for line in open('/proc/self/status'):\n"
            "        if line.startswith('VmRSS:'):\n"
            "            return int(line.split()[1])\n"
            "t, r = time.perf_counter(), rss()\n"
            "import prometheus_client\n"
            "print(time.perf_counter() - t, rss() - r)")
    out = subprocess.run([sys.executable, "-c", code], check=True,
                         capture_output=True, text=True).stdout.split()
    return {"import_ms": float(out[0]) * 1000,
            "import_rss_mb": float(out[1]) / 1024}


def main() -> dict[str, Any]:
    metrics = Metrics()
    one_round(metrics)      # every label child exists from here on
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    cpu = [one_round(metrics) for _ in range(ROUNDS)]
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    growth = sum(s.size_diff for s in after.compare_to(before, "filename")
                 if "prometheus_client" in s.traceback[0].filename
                 or "recovery/metrics" in s.traceback[0].filename)
    hooks = statistics.median(cpu)
    base = _baseline()
    data = {
        "instances": INSTANCES,
        "cpu_ms_per_instance": (hooks - base) / INSTANCES * 1000,
        "calls_per_instance": len(CALLS) + 1 / 50,
        "registry_growth_bytes_per_1000": growth / ROUNDS,
        **scrape(metrics),
        **import_cost(),
    }
    common.report("metrics", f"Metrics cost, {INSTANCES} instances in "
                             f"flight", [
        ("hooks' CPU per instance, ms", data["cpu_ms_per_instance"],
         f"({data['calls_per_instance']:.2f} Nova calls, {len(PHASES)} "
         f"journal changes each)"),
        ("registry growth per 1,000 instances, bytes",
         data["registry_growth_bytes_per_1000"], "target 0"),
        ("one scrape, ms", data["scrape_ms"], ""),
        ("one scrape, bytes", data["scrape_bytes"], ""),
        ("importing prometheus-client after the engine's libraries, ms",
         data["import_ms"], ""),
        ("importing prometheus-client after the engine's libraries, RSS "
         "MB", data["import_rss_mb"], ""),
    ], data)
    return data


if __name__ == "__main__":
    main()
