"""Benchmark: a soak of ``recovery host-failure`` on a real Nova 34 behind
a fault proxy (issue 33). Not part of CI: it takes minutes.

    python -m benchmarks.soak --seeds 50     (22 minutes here, on 2 cores)

with the ``integration`` extra (e.g. ``.tox/integration/bin/python``).

One real Nova (the integration tier's, fake virt driver, 4 hosts) serves
every run. Run ``seed`` fails host ``compute-(seed mod 4 + 1)`` with
``--instances`` ACTIVE instances on it, then runs ``recovery
host-failure`` through tests/faultproxy.py, which draws from
``random.Random(seed)`` a mix of 503s, resets before and after Nova
acted, late answers and late deliveries (tests/behaviour/proxied.py,
``realistic_mix``). Recovery's ``[nova] timeout`` is 3 s and its
``late_request_margin`` is ``--margin``; every late delivery lands within
``--late-by`` seconds of recovery giving up, which is less than the
margin: within what recovery is told to expect.

Once every held request has reached Nova, the run is read from Nova
directly (not through the proxy): moved (the instance is off the failed
host), failed (with the reason recovery reported), left locked, and
evacuated twice (more than one evacuation migration, by
``instance_uuid``). The host is then restored (a new nova-compute, no
longer forced down, enabled) and the run's instances deleted.

Target: 0 locked, 0 evacuated twice. Writes benchmarks/results/soak.json.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import common
from tests.behaviour.clouds import HOSTS
from tests.behaviour.clouds import RealCloud
from tests.behaviour.clouds import Spec
from tests.behaviour.proxied import TIMEOUT
from tests.behaviour.proxied import outcome
from tests.behaviour.proxied import realistic_mix
from tests.behaviour.proxied import run_recovery
from tests.behaviour.proxied import write_config
from tests.faultproxy import FAULTS
from tests.faultproxy import FaultProxy

INSTANCES = 6
MARGIN = 5.0
LATE_BY = (0.2, 4.0)
SHORT = {"503": "503", "reset_before": "rb", "reset_after": "ra",
         "late_answer": "la", "late_delivery": "ld"}


def one_run(cloud: RealCloud, seed: int, instances: int, margin: float,
            late_by: tuple[float, float], workdir: Path) -> dict[str, Any]:
    host = HOSTS[seed % len(HOSTS)]
    started = time.monotonic()
    ids = cloud.boot(host, [Spec(f"s{seed}-vm-{n}")
                            for n in range(instances)])
    cloud.fail_host(host)
    rundir = workdir / f"seed-{seed}"
    rundir.mkdir()
    with FaultProxy(cloud.endpoint, seed=seed,
                    rules=realistic_mix(late_by=late_by),
                    hold=TIMEOUT + margin) as proxy:
        config = write_config(
            rundir, proxy.endpoint,
            nova_extra=f"late_request_margin = {margin:g}\n")
        run = run_recovery(config, host)
        drained = proxy.drain(timeout=120)
    result = outcome(cloud, host, ids, run)
    faults = collections.Counter(r.fault for r in proxy.records if r.fault)
    row = {
        "seed": seed, "host": host, "instances": instances,
        "moved": len(result.moved),
        "failed": result.failed,
        "not_recovered": result.not_recovered,
        "locked": result.locked,
        "twice": result.twice,
        "settled": result.settled,
        "exit": run.returncode,
        "requests": len(proxy.records),
        "faults": {f: faults[f] for f in FAULTS if faults[f]},
        "drained": drained,
        "recovery_s": round(run.seconds, 2),
        "run_s": 0.0,
    }
    if run.returncode not in (0, 1):
        row["stderr_tail"] = run.stderr[-2000:]
    restore(cloud, host, list(ids.values()))
    row["run_s"] = round(time.monotonic() - started, 2)
    return row


def restore(cloud: RealCloud, host: str, uuids: list[str]) -> None:
    """The host back in service, and the run's instances gone."""
    cloud.restore_host(host)
    service_id = cloud.service(host)["id"]
    for change in ({"forced_down": False}, {"status": "enabled"}):
        status, body = cloud.api("PUT", f"/os-services/{service_id}", change)
        if status != 200:
            raise RuntimeError(f"cannot restore {host}: {status} {body}")
    cloud.wait_service(host, "up")
    for uuid in uuids:
        if cloud.server(uuid)["locked"]:
            cloud.api("POST", f"/servers/{uuid}/action", {"unlock": None})
        cloud.api("POST", f"/servers/{uuid}/action", {"forceDelete": None})


def table(rows: list[dict[str, Any]]) -> None:
    print(f"\n{'seed':>4} {'host':<9} {'inst':>4} {'moved':>5} "
          f"{'failed':>6} {'locked':>6} {'twice':>5} {'exit':>4} "
          f"{'reqs':>4} {'secs':>5}  faults / reasons")
    for row in rows:
        faults = " ".join(f"{SHORT[f]}={n}" for f, n in row["faults"].items())
        notes = [f"{name}: {reason}" for name, reason
                 in row["failed"].items()]
        notes += [f"{name} locked ({reason})" for name, reason
                  in row["locked"].items()]
        notes += [f"{name} evacuated {n}x" for name, n
                  in row["twice"].items()]
        print(f"{row['seed']:>4} {row['host']:<9} {row['instances']:>4} "
              f"{row['moved']:>5} {len(row['failed']):>6} "
              f"{len(row['locked']):>6} {len(row['twice']):>5} "
              f"{row['exit']:>4} {row['requests']:>4} "
              f"{row['recovery_s']:>5.1f}  {faults}")
        for note in notes:
            print(f"{'':>11}{note[:150]}")


def main(seeds: int = 50, first: int = 0, instances: int = INSTANCES,
         margin: float = MARGIN,
         late_by: tuple[float, float] = LATE_BY) -> dict[str, Any]:
    if late_by[1] >= margin:
        raise ValueError("late deliveries must land within the margin")
    rows: list[dict[str, Any]] = []
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="soak-"))
    cloud = RealCloud()
    try:
        for seed in range(first, first + seeds):
            row = one_run(cloud, seed, instances, margin, late_by, workdir)
            rows.append(row)
            print(f"seed {seed}: moved {row['moved']}/{instances}, "
                  f"failed {len(row['failed'])}, locked "
                  f"{len(row['locked'])}, twice {len(row['twice'])}, "
                  f"{row['recovery_s']:.1f} s", flush=True)
    finally:
        cloud.close()
        shutil.rmtree(workdir, ignore_errors=True)
    total_s = time.monotonic() - started
    table(rows)
    totals = {
        "runs": len(rows),
        "instances": sum(r["instances"] for r in rows),
        "moved": sum(r["moved"] for r in rows),
        "failed": sum(len(r["failed"]) for r in rows),
        "locked": sum(len(r["locked"]) for r in rows),
        "twice": sum(len(r["twice"]) for r in rows),
        "clean_runs": sum(1 for r in rows if r["moved"] == r["instances"]
                          and not (r["failed"] or r["locked"]
                                   or r["twice"])),
        "crashed_runs": sum(1 for r in rows if r["exit"] not in (0, 1)),
        "faults": dict(sum((collections.Counter(r["faults"]) for r in rows),
                           collections.Counter())),
    }
    data = {"seeds": [first, first + seeds - 1], "instances_per_run":
            instances, "nova_timeout_s": TIMEOUT, "late_request_margin_s":
            margin, "late_by_s": list(late_by), "minutes": total_s / 60,
            "totals": totals, "runs": rows}
    common.report("soak", f"Soak: {len(rows)} seeded runs through a fault "
                  f"proxy (real Nova)", [
                      ("runs", totals["runs"], ""),
                      ("instances", totals["instances"], ""),
                      ("moved", totals["moved"], "all"),
                      ("failed", totals["failed"], "report"),
                      ("left locked", totals["locked"], "target 0"),
                      ("evacuated twice", totals["twice"], "target 0"),
                      ("runs every instance moved, none locked or twice",
                       totals["clean_runs"], "all"),
                      ("recovery crashed or hung", totals["crashed_runs"],
                       "target 0"),
                      ("minutes", total_s / 60, "< 25"),
                  ], data)
    return data


def _pair(text: str) -> tuple[float, float]:
    low, high = (float(x) for x in text.split(","))
    return low, high


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--instances", type=int, default=INSTANCES)
    parser.add_argument("--margin", type=float, default=MARGIN,
                        help="recovery's [nova] late_request_margin (s)")
    parser.add_argument("--late-by", type=_pair, default=LATE_BY,
                        help="LOW,HIGH: a late delivery lands this long "
                        "after recovery gave up (s)")
    args = parser.parse_args()
    main(args.seeds, args.first_seed, args.instances, args.margin,
         args.late_by)
