"""Benchmarks 1 and 2: time to recover a host on a real Nova 34, against
clients that do the least a correct client must, in the same run; and
the Nova API requests each evacuated instance costs (counted by Nova).

Each run gets a fresh Nova (the integration tier's, fake virt driver) in
the same starting state: N ACTIVE instances on compute-1, which has just
been reported down. TTR runs from the start of the process (recovery's
CLI) or of the client, to the moment an independent monitor, reading
Nova's database and not its API, sees every instance ACTIVE with no task
on another host. Runs of the two sides alternate.

- ``defaults``: 30 instances; recovery at its defaults against the
  minimal client: 3 threads, lock, evacuate, GET the instance every 1 s
  until it is ACTIVE on another host, unlock.
- ``ten_threads``: 30 instances; recovery with 10 threads against the
  ideal client: 10 threads, lock, evacuate, one shared poll of the
  evacuation migrations every 0.5 s, unlock.
- ``hundred``: 100 instances; recovery at its defaults against the
  minimal client.
- ``masakari``: 30 instances; recovery at its defaults against Masakari
  22's own host-failure flow at its best setting (benchmarks/masakari.py).
"""

from __future__ import annotations

import concurrent.futures
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import common
from tests.integration.realnova.harness import ENGINE_TOKEN
from tests.integration.realnova.harness import MICROVERSION
from tests.integration.realnova.harness import RealNova

DEFAULT_THREADS = 3
FINAL = ("done", "error", "failed")
MONITOR_INTERVAL = 0.05
# Servers are booted this many at a time: a hundred at once queue in
# Nova longer than the harness waits for each.
BOOT_BATCH = 10


def prepared_nova(instances: int) -> RealNova:
    nova = RealNova(hosts=4).start()
    try:
        for first in range(0, instances, BOOT_BATCH):
            ids = [nova.create(f"vm-{n}", common.FAILED)
                   for n in range(first, min(first + BOOT_BATCH, instances))]
            for server_id in ids:
                nova.settle(server_id)
        nova.fail_host(common.FAILED)
        nova.wait_service(common.FAILED, "down")
    except BaseException:
        nova.stop()
        raise
    return nova


class Monitor:
    """When every instance was first seen ACTIVE, with no task, on
    another host: read from Nova's database every 50 ms."""

    def __init__(self, nova: RealNova, instances: int):
        self._nova = nova
        self._instances = instances
        self.recovered_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set():
            servers = self._nova.servers()
            if sum(s["vm_state"] == "active" and s["task_state"] is None
                   and s["host"] != common.FAILED
                   for s in servers) == self._instances:
                self.recovered_at = time.time()
                return
            self._stop.wait(MONITOR_INTERVAL)

    def wait(self, timeout: float) -> float:
        self._thread.join(timeout)
        self._stop.set()
        if self.recovered_at is None:
            raise RuntimeError("not every instance was recovered")
        return self.recovered_at


def _novaclient(endpoint: str) -> Any:
    from keystoneauth1 import session as ks_session
    from keystoneauth1 import token_endpoint
    from novaclient import client as nova_client

    session = ks_session.Session(
        auth=token_endpoint.Token(endpoint, ENGINE_TOKEN), timeout=60)
    return nova_client.Client(MICROVERSION, session=session,
                              endpoint_override=endpoint)


def minimal_client(endpoint: str, threads: int) -> None:
    """Lock, evacuate, GET the instance every 1 s until it is ACTIVE on
    another host, unlock; ``threads`` instances at a time."""
    nova = _novaclient(endpoint)
    servers = nova.servers.list(search_opts={"host": common.FAILED,
                                             "all_tenants": True})

    def recover(server: Any) -> None:
        nova.servers.lock(server, reason="minimal client")
        nova.servers.evacuate(server)
        while True:
            time.sleep(1.0)
            current = nova.servers.get(server.id)
            if (current.status == "ACTIVE"
                    and getattr(current, "OS-EXT-STS:task_state") is None
                    and getattr(current, "OS-EXT-SRV-ATTR:host")
                    != common.FAILED):
                break
        nova.servers.unlock(server)

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(recover, servers))


def ideal_client(endpoint: str, threads: int, poll: float = 0.5) -> None:
    """Lock, evacuate, wait on one shared poll of the host's evacuation
    migrations, unlock: it reads nothing else and restores nothing."""
    nova = _novaclient(endpoint)
    servers = nova.servers.list(search_opts={"host": common.FAILED,
                                             "all_tenants": True})
    statuses: dict[str, str] = {}
    changed = threading.Condition()
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            migrations = nova.migrations.list(
                source_compute=common.FAILED, migration_type="evacuation")
            with changed:
                statuses.update({m.instance_uuid: m.status
                                 for m in migrations})
                changed.notify_all()
            stop.wait(poll)

    def recover(server: Any) -> None:
        nova.servers.lock(server, reason="ideal client")
        nova.servers.evacuate(server)
        with changed:
            changed.wait_for(lambda: statuses.get(server.id) in FINAL)
        nova.servers.unlock(server)

    poller = threading.Thread(target=watch, daemon=True)
    poller.start()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(recover, servers))
    stop.set()


def run_client(instances: int,
               client: Callable[[str], None]) -> dict[str, Any]:
    with prepared_nova(instances) as nova:
        mark = len(nova.calls())
        monitor = Monitor(nova, instances)
        started = time.time()
        client(nova.endpoint)
        recovered = monitor.wait(60)
        calls = nova.calls()[mark:]
    return {"seconds": recovered - started, "requests": len(calls)}


def run_recovery(instances: int, threads: int | None,
                 env: dict[str, str] | None = None) -> dict[str, Any]:
    """``recovery host-failure`` as a child (in ``env``, default this
    process's), at its defaults but for ``threads`` (None: the default)
    and the Nova endpoint."""
    with prepared_nova(instances) as nova, \
            tempfile.TemporaryDirectory() as workdir:
        mark = len(nova.calls())
        config = common.default_config(Path(workdir), nova.endpoint,
                                       threads)
        monitor = Monitor(nova, instances)
        run = common.run_cli(config, env=env)
        recovered = monitor.wait(60)
        calls = nova.calls()[mark:]
    summary = run["report"]["summary"]
    if summary.get("recovered") != instances:
        raise RuntimeError(f"recovery did not recover them all: {summary}")
    return {"seconds": recovered - run["started"], "requests": len(calls),
            "cpu_s": run["cpu_s"], "peak_rss_mb": run["peak_rss_mb"],
            "kinds": common.kinds(calls)}


def compare(name: str, instances: int, threads: int | None,
            other: str, other_run: Callable[[], dict[str, Any]],
            rounds: int) -> dict[str, Any]:
    """Alternate recovery and the other side, ``rounds`` runs each."""
    ours, theirs = [], []
    for _ in range(rounds):
        ours.append(run_recovery(instances, threads))
        theirs.append(other_run())
        print(f"{name}: recovery {ours[-1]['seconds']:.1f} s, "
              f"{other} {theirs[-1]['seconds']:.1f} s", flush=True)
    seconds = common.median([r["seconds"] for r in ours])
    other_seconds = common.median([r["seconds"] for r in theirs])
    return {"name": name, "instances": instances,
            "threads": threads or DEFAULT_THREADS, "other": other,
            "recovery": ours, "client": theirs,
            "ttr_s": seconds, "client_ttr_s": other_seconds,
            "ttr_ratio": seconds / other_seconds,
            "requests_per_instance": common.median(
                [r["requests"] for r in ours]) / instances,
            "client_requests_per_instance": common.median(
                [r["requests"] for r in theirs]) / instances}


def main(rounds: int = 2, only: list[str] | None = None) -> dict[str, Any]:
    """Every comparison, or ``only`` those named; the others keep their
    figures from the last results file."""
    # Imported here: it imports this module.
    from benchmarks import masakari

    comparisons = {
        "defaults": lambda: compare(
            "defaults", 30, None, "minimal client (GET every 1 s)",
            lambda: run_client(30, lambda e: minimal_client(
                e, DEFAULT_THREADS)), rounds),
        "masakari": lambda: compare(
            "masakari", 30, None, "Masakari 22 (no 180 s sleep)",
            lambda: masakari.run(30), rounds),
        "ten_threads": lambda: compare(
            "ten_threads", 30, 10, "ideal client (0.5 s poll)",
            lambda: run_client(30, lambda e: ideal_client(e, 10)), rounds),
        "hundred": lambda: compare(
            "hundred", 100, None, "minimal client (GET every 1 s)",
            lambda: run_client(100, lambda e: minimal_client(
                e, DEFAULT_THREADS)), rounds),
    }
    path = common.RESULTS / "ttr.json"
    kept = json.loads(path.read_text()) if only and path.exists() else {}
    data = {name: (run() if not only or name in only else kept[name])
            for name, run in comparisons.items()}
    results = list(data.values())
    rows = []
    for r in results:
        label = f"{r['instances']} instances, T={r['threads']}"
        rows += [
            (f"{label}: recovery TTR, s", r["ttr_s"], ""),
            (f"{label}: {r['other']} TTR, s", r["client_ttr_s"], ""),
            (f"{label}: TTR ratio", r["ttr_ratio"],
             "target <= 0.70" if r["name"] == "masakari"
             else "target <= 1.00"),
            (f"{label}: requests per instance", r["requests_per_instance"],
             "target <= 3.5"),
        ]
    common.report("ttr", "Time to recover a host on a real Nova", rows,
                  data)
    return data


if __name__ == "__main__":
    main(only=sys.argv[1:] or None)
