"""Benchmarks 1 and 2: time to recover 50 instances on a real Nova,
against the bound an ideal minimal client sets, and the Nova API requests
each evacuated instance costs (counted by Nova's side).

Each run gets a fresh Nova 34 (the integration tier's, fake virt driver)
in the same starting state: 50 ACTIVE instances on compute-1, which has
just been reported down. Both clients run T = 10 instances at a time and
poll at the same interval.

The ideal client is the least a correct client must do: lock, evacuate,
wait on one shared poll of the host's evacuation migrations, unlock. It
reads nothing else and restores nothing.
"""

from __future__ import annotations

import concurrent.futures
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks import common
from tests.integration.realnova.harness import ENGINE_TOKEN
from tests.integration.realnova.harness import MICROVERSION
from tests.integration.realnova.harness import RealNova

INSTANCES = 50
THREADS = 10
POLL = 0.25
FINAL = ("done", "error", "failed")


def prepared_nova() -> RealNova:
    nova = RealNova(hosts=4).start()
    ids = [nova.create(f"vm-{n}", common.FAILED) for n in range(INSTANCES)]
    for server_id in ids:
        nova.settle(server_id)
    nova.fail_host(common.FAILED)
    nova.wait_service(common.FAILED, "down")
    return nova


def ideal_client(endpoint: str) -> float:
    """Recover the host with novaclient directly; its wall time."""
    from keystoneauth1 import session as ks_session
    from keystoneauth1 import token_endpoint
    from novaclient import client as nova_client

    session = ks_session.Session(
        auth=token_endpoint.Token(endpoint, ENGINE_TOKEN), timeout=60)
    nova = nova_client.Client(MICROVERSION, session=session,
                              endpoint_override=endpoint)
    started = time.time()
    servers = nova.servers.list(search_opts={"host": common.FAILED,
                                             "all_tenants": True})
    statuses: dict[str, str] = {}
    changed = threading.Condition()
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            migrations = nova.migrations.list(
                source_compute=common.FAILED, migration_type="evacuation")
            with changed:
                statuses.update({m.instance_uuid: m.status
                                 for m in migrations})
                changed.notify_all()
            stop.wait(POLL)

    def recover(server: Any) -> None:
        nova.servers.lock(server, reason="ideal client")
        nova.servers.evacuate(server)
        with changed:
            changed.wait_for(lambda: statuses.get(server.id) in FINAL)
        nova.servers.unlock(server)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(recover, servers))
    stop.set()
    return time.time() - started


def measure_ideal() -> dict[str, Any]:
    with prepared_nova() as nova:
        mark = len(nova.calls())
        seconds = ideal_client(nova.endpoint)
        calls = nova.calls()[mark:]
    return {"seconds": seconds, "requests": len(calls)}


def measure_engine() -> dict[str, Any]:
    with prepared_nova() as nova, \
            tempfile.TemporaryDirectory() as workdir:
        mark = len(nova.calls())
        config = common.recovery_config(Path(workdir), nova.endpoint,
                                        THREADS, POLL, rate=50)
        run = common.run_cli(config)
        calls = nova.calls()[mark:]
    summary = run["report"]["summary"]
    if summary.get("recovered") != INSTANCES:
        raise RuntimeError(f"the engine did not recover them all: {summary}")
    # From the command's start to the last instance confirmed (unlocked),
    # both by this machine's clock.
    return {"seconds": common.last(calls, "unlock") - run["started"],
            "requests": len(calls), "cpu_s": run["cpu_s"]}


def main() -> dict[str, Any]:
    ideal = measure_ideal()
    engine = measure_engine()
    ratio = engine["seconds"] / ideal["seconds"]
    per_instance = engine["requests"] / INSTANCES
    data = {"instances": INSTANCES, "threads": THREADS,
            "poll_interval": POLL, "ideal": ideal, "engine": engine,
            "ttr_ratio": ratio, "requests_per_instance": per_instance,
            "ideal_requests_per_instance": ideal["requests"] / INSTANCES}
    common.report("ttr", f"Time to recover {INSTANCES} instances on a real "
                  f"Nova, T={THREADS}", [
                      ("bound (ideal client), s", ideal["seconds"], ""),
                      ("engine, s", engine["seconds"], ""),
                      ("TTR ratio engine/bound", ratio, "target <= 1.10"),
                      ("requests per instance (engine)", per_instance,
                       "target <= 4"),
                      ("requests per instance (ideal)",
                       data["ideal_requests_per_instance"], ""),
                  ], data)
    return data


if __name__ == "__main__":
    main()
