"""Benchmark: the Ceph storage fence, from the fence to the old guest's
first refused write, and the evacuated instance's takeover of its disk.

    .tox/py3/bin/python -m benchmarks.ceph_fence [--repeat 10]

Needs Debian's ceph-mon, ceph-osd, ceph-common, python3-rados and
python3-rbd (tools/ceph_bindings.py in the virtualenv) and gcc. About
a minute on 2 cores. Writes benchmarks/results/ceph_fence.json.

A Ceph of its own (tests/ceph.py: one monitor, one memstore OSD, cephx,
Ceph's defaults otherwise: the monitor proposes a change at most once a
second, ``paxos_propose_interval``), recovery's cephx user with the
documented caps. Each run, on a new image and a host address of its own
(127.0.0.x):

1. a guest (tests/ceph_guest.py, librbd, exclusive-lock, no cache)
   writes 4 KiB every 10 ms from the host's address;
2. ``CephFencer.power_off`` (connect, ``osd blocklist add``, read back
   until listed) is timed: its start is "the fence", its return "the
   proof";
3. the guest's first refused write (the time it returned, its own
   ``time.monotonic()``: one clock for the machine) is timed from the
   fence;
4. a second guest from another address (the evacuated instance) opens
   the image and writes: the takeover is from its image open to its
   first write done (librbd asks the dead owner for the lock, breaks it
   and blocklists its instance);
5. ``unfence`` (both entries removed, read back) is timed, untimed
   cleanup follows.

p50 is the median, p95 the nearest rank (with 10 runs: the max).
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from oslo_config import cfg

from benchmarks import common
from recovery.concurrency import Clock
from recovery.conf import fencing as fencing_conf
from recovery.fencing import load_fencing
from tests.bmc import write_sections
from tests.ceph import COMPUTE_CAPS
from tests.ceph import Ceph
from tests.ceph import missing
from tests.ceph import recovery_caps
from tests.ceph_guest import Guest

HOST = "compute-1"
REPEAT = 10
INTERVAL = 0.01
EXPIRE = 2592000


def fencer(workdir: Path, ceph: Ceph, keyring: Path, address: str) -> Any:
    """The CephFencer of HOST at ``address``, through the credentials
    file as recovery reads it."""
    path = write_sections(workdir / f"fencing-{address}.ini", {
        HOST: {"level1": "ceph"},
        "device:ceph": {"driver": "ceph", "ceph_conf": str(ceph.conf),
                        "keyring": str(keyring), "storage_address": address,
                        "ephemeral_pool": "vms", "timeout": "30"}})
    conf = cfg.ConfigOpts()
    fencing_conf.register_opts(conf)
    conf([])
    conf.set_override("credentials_file", str(path), "fencing")
    conf.set_override("poll_interval", 0.1, "fencing")
    [(_, device)] = load_fencing(conf).for_host(HOST).devices
    return device.fencer


def one_run(workdir: Path, ceph: Ceph, users: dict[str, Path],
            n: int) -> dict[str, Any]:
    image = f"{uuid.uuid4()}_disk"
    ceph.image("vms", image)
    address = f"127.0.0.{30 + n}"
    fence = fencer(workdir, ceph, users["recovery"], address)
    with Guest(ceph, address, users["compute"], "vms", image,
               interval=INTERVAL) as old:
        old.next("ok")
        began = time.monotonic()
        proof = fence.power_off(Clock())
        proved = time.monotonic()
        refused = float(old.next("error", 30).split()[2])
        with Guest(ceph, f"127.0.0.{130 + n}", users["compute"], "vms",
                   image, interval=INTERVAL) as evacuated:
            took = float(evacuated.next("ok", 30).split()[2])
            takeover = took - evacuated.opened
            lifting = time.monotonic()
            lifted = fence.unfence(Clock())
            unfenced = time.monotonic() - lifting
    return {"address": address, "fence_to_proof": proved - began,
            "fence_to_refused_write": refused - began,
            "refused_before_proof": refused < proved,
            "takeover": takeover, "unfence": unfenced,
            "proof": proof, "unfenced": lifted}


def stats(values: list[float]) -> dict[str, float]:
    return {"p50": common.median(values), "p95": common.percentile(values, 95),
            "max": max(values)}


def main(repeat: int = REPEAT) -> dict[str, Any]:
    reason = missing()
    if reason:
        raise SystemExit(f"benchmarks.ceph_fence: {reason}")
    runs = []
    with tempfile.TemporaryDirectory(prefix="ceph-bench-") as tmp:
        with Ceph(Path(tmp) / "ceph") as ceph:
            started_in = ceph.started_in
            ceph.pools("vms")
            users = {"recovery": ceph.user("recovery", recovery_caps("vms")),
                     "compute": ceph.user("compute", COMPUTE_CAPS)}
            for n in range(repeat):
                runs.append(one_run(Path(tmp), ceph, users, n))
                print(f"run {n + 1}/{repeat}: refused write after "
                      f"{runs[-1]['fence_to_refused_write']:.3f} s, "
                      f"takeover {runs[-1]['takeover']:.3f} s", flush=True)
    figures = {key: stats([run[key] for run in runs]) for key in (
        "fence_to_refused_write", "fence_to_proof", "takeover", "unfence")}
    data = {"repeat": repeat, "write_interval_s": INTERVAL,
            "ceph_start_s": started_in, "figures": figures, "runs": runs}
    rows = []
    for key, label in (
            ("fence_to_refused_write", "fence -> old guest's first refused "
                                       "write"),
            ("fence_to_proof", "fence -> proof (blocklist read back)"),
            ("takeover", "evacuated client: image open -> first write"),
            ("unfence", "unfence (entries removed, read back)")):
        rows += [(f"{label}, {name} (s)", figures[key][name], "measured")
                 for name in ("p50", "p95", "max")]
    rows.append(("Ceph start: one monitor, one OSD (s)", started_in,
                 "measured"))
    common.report("ceph_fence", f"The Ceph storage fence ({repeat} runs)",
                  rows, data)
    return data


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=REPEAT)
    main(parser.parse_args().repeat)
