"""Benchmark: a rack of 10 hosts x 20 instances, their disks on Ceph,
loses its power (issue 41): every instance ACTIVE elsewhere, with the
rack's BMCs gone with it (proved off by the Ceph fence alone, on the
evidence rule) against the same rack with its BMCs alive (proved off by
power).

    python -m benchmarks.ceph_rack [--rounds 1] [--bmc-timeout SECONDS]

as root (network namespaces), with Debian's Ceph (as
benchmarks/ceph_fence.py). About 2.5 minutes a round on 2 cores. Writes
benchmarks/results/ceph_rack.json (with ``--bmc-timeout`` T, the BMC
devices' own timeout in the credentials file instead of [fencing]
timeout's 30 s: ceph_rack_bmc_timeout_T.json).

The cloud is benchmarks/ceph_cloud.py's, one per run on one Ceph: the
fake Nova with its latency model at Nova's default heartbeat settings;
the rack's hosts r1-00..r1-09 in network namespaces, one failure domain
(a Nova aggregate with ``failure_domain`` metadata), each with 20
ACTIVE instances whose root disks are ``<uuid>_disk`` in pool vms (all
covered), its Ceph fence (storage address 127.0.0.(100+n)) as level 2
and its BMC as level 1: gone with it, or alive (sushy-emulator, its
1-11 s power-off delay); ten spare hosts, up, in two domains of five
(their probe address refuses: they answer). One ``recovery-engine``
watches them all with the detector's fast path, at its defaults, the
safety brakes included, but for ``max_concurrent_host_recoveries``, set
so that the rack is recovered at once (10; the default is 8); its
``retry_backoff`` is the default's 15 s (a host held by its fencing is
tried again after it).

The rack's links go down and its heartbeats stop together; the time is
from then to the last of the 200 instances ACTIVE, with no task, on a
spare (the fake Nova's state, read every 0.1 s), with the first
evacuate, each host's ``fenced`` event and its proof's kind. The runs
alternate, BMCs alive first.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import ceph_cloud
from benchmarks import common
from benchmarks.ceph_cloud import Cloud
from benchmarks.ceph_cloud import stats
from benchmarks.common import epoch
from recovery.events import EventKind
from tests.ceph import missing
from tests.functional.engine_process import EngineProcess

HOSTS = [f"r1-{n:02}" for n in range(10)]
PER_HOST = 20
SPARES = [f"spare-{n:02}" for n in range(10)]
DOMAIN = "rack-1"
SEED = 4141
ROUNDS = 1
RECOVERY_TIMEOUT = 300.0
# [engine] retry_backoff's default (EngineProcess sets 0.2 s).
RETRY_BACKOFF = 15.0


def cloud_for(workdir: Path, ceph: Any, users: dict[str, Path],
              bmcs_alive: bool) -> tuple[Cloud, dict[str, str]]:
    """The rack, its spares and their domains; each instance's host."""
    cloud = Cloud(workdir, ceph, users, SEED).start()
    try:
        for n, name in enumerate(HOSTS):
            cloud.add_host(name, f"127.0.0.{100 + n}", bmc_alive=bmcs_alive)
        for name in SPARES:
            cloud.nova.add_compute(name)
        cloud.nova.add_aggregate(DOMAIN, HOSTS,
                                 metadata={"failure_domain": DOMAIN})
        for n in range(2):
            name = f"spares-{n}"
            cloud.nova.add_aggregate(name, SPARES[5 * n:5 * n + 5],
                                     metadata={"failure_domain": name})
        origin = {uuid: host for host in HOSTS
                  for uuid in cloud.boot(host, PER_HOST, host)}
    except BaseException:
        cloud.close()
        raise
    return cloud, origin


def one_run(workdir: Path, ceph: Any, users: dict[str, Path],
            bmcs_alive: bool, bmc_timeout: float | None) -> dict[str, Any]:
    label = "alive" if bmcs_alive else "gone"
    rundir = workdir / f"rack-{label}-{time.monotonic_ns()}"
    rundir.mkdir()
    cloud, origin = cloud_for(rundir, ceph, users, bmcs_alive)
    try:
        assert cloud.lab is not None
        probes = ",".join([cloud.lab.probe_addresses()]
                          + [f"{name}:127.0.0.1" for name in SPARES])
        engine = EngineProcess(
            rundir, cloud.nova.endpoint, threads=3, poll_interval=0.5,
            extra=f"max_concurrent_host_recoveries = {len(HOSTS)}\n"
                  f"retry_backoff = {RETRY_BACKOFF:g}\n"
                  + cloud.engine_extra(cloud.credentials(bmc_timeout),
                                       "r1-*,spare-*", probes))
        try:
            engine.start()
            # Past the detector's first looks: every host seen live.
            time.sleep(ceph_cloud.REPORT_INTERVAL)  # a benchmark: settle
            load = ceph_cloud.load()
            watch = ceph_cloud.ActiveWatch(cloud.nova, origin)
            lost = time.time()
            for host in cloud.hosts.values():
                host.lab.power_loss()
            lost_done = time.time()
            last = watch.wait(RECOVERY_TIMEOUT)
            return _figures(engine, cloud, label, lost, lost_done, last,
                            watch.done, load)
        finally:
            engine.close()
    finally:
        cloud.close()


def _figures(engine: EngineProcess, cloud: Cloud, label: str, lost: float,
             lost_done: float, last: float | None, done: dict[str, float],
             load: list[float]) -> dict[str, Any]:
    store = engine.store()
    try:
        events = [e for e in store.events()
                  if (epoch(e.created_at) or 0) >= lost]
    finally:
        store.close()
    fenced = {e.subject: e for e in events if e.kind == EventKind.FENCED}
    evacuates = [c["time"] for c in cloud.nova.evacuate_calls
                 if c["time"] >= lost]
    per_host = {}
    for host in HOSTS:
        event = fenced.get(host)
        per_host[host] = {
            "fenced_s": (None if event is None
                         else round(epoch(event.created_at) - lost, 3)),
            "storage_only": (event is not None
                             and "a storage fence alone" in event.message)}
    return {
        "bmcs": label, "load_before": load,
        "loss_took_s": round(lost_done - lost, 3),
        "instances": len(done), "expected": len(HOSTS) * PER_HOST,
        "last_active_s": None if last is None else round(last - lost, 3),
        "first_evacuate_s": (round(min(evacuates) - lost, 3)
                             if evacuates else None),
        "evacuate_calls": len(evacuates),
        "hosts_fenced_by_storage_only": sum(
            1 for h in per_host.values() if h["storage_only"]),
        "fenced_s": stats([h["fenced_s"] for h in per_host.values()]),
        "instance_active_s": stats([t - lost for t in done.values()]),
        "per_host": per_host,
        "held": [e.message[:300] for e in events
                 if e.kind == EventKind.HELD],
        "load_after": ceph_cloud.load(),
    }


def main(rounds: int = ROUNDS,
         bmc_timeout: float | None = None) -> dict[str, Any]:
    reason = missing()
    if reason:
        raise SystemExit(f"benchmarks.ceph_rack: {reason}")
    started = time.monotonic()
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ceph-rack-") as tmp:
        ceph, users = ceph_cloud.start_ceph(Path(tmp) / "ceph")
        try:
            for n in range(rounds):
                for alive in (True, False):
                    runs.append(one_run(Path(tmp), ceph, users, alive,
                                        bmc_timeout))
                    ceph.unblock_all()
                    run = runs[-1]
                    print(f"round {n + 1}, BMCs {run['bmcs']}: last of "
                          f"{run['instances']} ACTIVE after "
                          f"{run['last_active_s']} s, fenced p50 "
                          f"{run['fenced_s']['p50']:.1f} s; load "
                          f"{run['load_before'][0]}", flush=True)
        finally:
            ceph.stop()
    data = {"hosts": len(HOSTS), "instances_per_host": PER_HOST,
            "report_interval_s": ceph_cloud.REPORT_INTERVAL,
            "service_down_time_s": ceph_cloud.SERVICE_DOWN_TIME,
            "evacuation_latency_s": ceph_cloud.EVACUATION_LATENCY,
            "evacuation_jitter": ceph_cloud.EVACUATION_JITTER,
            "bmc_timeout_s": bmc_timeout, "runs": runs,
            "last_active_s": {label: stats([r["last_active_s"] for r in runs
                                            if r["bmcs"] == label])
                              for label in ("alive", "gone")},
            "minutes": (time.monotonic() - started) / 60}
    name = ("ceph_rack" if bmc_timeout is None
            else f"ceph_rack_bmc_timeout_{bmc_timeout:g}")
    common.report(name, f"A rack of {len(HOSTS)} hosts x {PER_HOST} "
                  f"instances on Ceph loses its power (fake Nova, Nova's "
                  f"default heartbeats)", _rows(data), data)
    return data


def _rows(data: dict[str, Any]) -> list[tuple[str, Any, str]]:
    rows: list[tuple[str, Any, str]] = []
    for run in data["runs"]:
        name = f"BMCs {run['bmcs']}"
        rows += [
            (f"{name}: instances ACTIVE elsewhere",
             f"{run['instances']} / {run['expected']}", "all"),
            (f"{name}: power loss -> last instance ACTIVE (s)",
             run["last_active_s"], "report"),
            (f"{name}: power loss -> first evacuate (s)",
             run["first_evacuate_s"], "report"),
            (f"{name}: power loss -> host fenced, p50 / max (s)",
             f"{run['fenced_s']['p50']:.1f} / {run['fenced_s']['max']:.1f}",
             "report"),
            (f"{name}: hosts held by their fencing (retried)",
             len(run["held"]), "report"),
            (f"{name}: instance ACTIVE, p50 / p95 (s)",
             f"{run['instance_active_s']['p50']:.1f} / "
             f"{run['instance_active_s']['p95']:.1f}"
             if run["instance_active_s"]["n"] else "-", "report"),
            (f"{name}: hosts proved off by the storage fence alone",
             run["hosts_fenced_by_storage_only"], "report"),
        ]
    rows.append(("minutes", data["minutes"], "report"))
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--bmc-timeout", type=float, default=None,
                        help="the BMC devices' own timeout (default: "
                             "[fencing] timeout, 30 s)")
    args = parser.parse_args()
    main(args.rounds, args.bmc_timeout)
