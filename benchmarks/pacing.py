"""Benchmark: a BMC's power-off requests paced by its learned lag
(issue 42), against the same BMC unpaced.

    .tox/py3/bin/python -m benchmarks.pacing [--repeat 30] [--seed 42]

About 12 minutes on 2 cores. Writes benchmarks/results/pacing.json.

Two sushy-emulators (``RedfishBmc``: the fake driver applies a power-off
1-11 s after the request, at random, and a request sent again starts
that delay anew), both seeded alike so that they draw the same delays in
the same order. Each is fenced ``--repeat`` times by the built-in
``redfish`` driver at the defaults (``[fencing] timeout`` 30 s,
``attempts`` 3: each request gets a third of the time left;
``poll_interval`` 1 s), taking turns:

- unpaced: no store, as before this release: each share's end with the
  power still On sends a request again;
- paced: an SQLite store keeps the device's lag, learned from this
  arm's own fencings. Its first fencing has nothing learned yet, as a
  device's first in production has, and it is counted.

Per fencing: start -> proof (``HostFence.power_off``), the requests the
emulator held (its state read every 20 ms behind its back), and whether
the fencing failed; and how many fencings went Off (the emulator's
apply time) past the first share (10 s) on their one request: requests
the shares alone would have sent again. Between two fencings the power
is turned back On through Redfish, untimed. The two arms draw alike
only until their fencings differ (a restart draws once more, and a
fencing's length moves its power-on): the seed makes a run repeatable,
not the arms' delays identical.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from oslo_config import cfg

from benchmarks import common
from benchmarks.fencing import RedfishWatch
from benchmarks.fencing import redfish_on
from recovery.concurrency import Clock
from recovery.conf import fencing as fencing_conf
from recovery.db.store import Store
from recovery.db.store import open_store
from recovery.exception import FencingError
from recovery.fencing import HostFence
from recovery.fencing import load_fencing
from tests.bmc import write_sections
from tests.bmc.redfish import RedfishBmc

HOST = "compute-1"
REPEAT = 30
SEED = 42
ARMS = ("unpaced", "paced")
SHARE = 10.0       # the first request's share: timeout 30 / attempts 3


def host_fence(path: Path, bmc: RedfishBmc) -> HostFence:
    """The host's fence through ``bmc``, ``[fencing]`` at its defaults."""
    conf = cfg.ConfigOpts()
    fencing_conf.register_opts(conf)
    conf([])
    write_sections(path, {HOST: bmc.credentials()})
    conf.set_override("credentials_file", str(path), "fencing")
    fence = load_fencing(conf).for_host(HOST)
    assert fence is not None
    return fence


def fence_once(fence: HostFence, bmc: RedfishBmc,
               store: Store | None) -> dict[str, Any]:
    watch = RedfishWatch(bmc)
    began, began_wall = time.monotonic(), time.time()
    try:
        proof, error = fence.power_off(Clock(), lags=store).text, None
    except FencingError as exc:
        proof, error = "", str(exc)
    seconds = time.monotonic() - began
    seen = watch.stop()
    return {"seconds": seconds, "failed": error is not None,
            "bmc_requests": seen["bmc_requests"],
            "start_to_off": (None if seen["off"] is None
                             else seen["off"] - began_wall),
            "paced": "paced by" in proof, "message": proof or error}


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    seconds = [r["seconds"] for r in runs]
    return {"n": len(runs), "p50_s": common.median(seconds),
            "p95_s": common.percentile(seconds, 95), "max_s": max(seconds),
            "failed": sum(r["failed"] for r in runs),
            "two_or_more_requests": sum(r["bmc_requests"] > 1
                                        for r in runs),
            # Off (the emulator's apply time) after the first share
            # (10 s) on its one request: a request the shares alone would
            # have sent again.
            "held_back": sum(r["bmc_requests"] == 1
                             and (r["start_to_off"] or 0) > SHARE
                             for r in runs),
            "paced": sum(r["paced"] for r in runs)}


def main(repeat: int = REPEAT, seed: int = SEED) -> dict[str, Any]:
    began = time.monotonic()
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
    with tempfile.TemporaryDirectory(prefix="pacing-") as tmp:
        workdir = Path(tmp)
        store = open_store(f"sqlite:///{workdir}/recovery.sqlite")
        with RedfishBmc(workdir / "unpaced", seed=seed) as unpaced, \
                RedfishBmc(workdir / "paced", seed=seed) as paced:
            bmcs = {"unpaced": unpaced, "paced": paced}
            fences = {arm: host_fence(workdir / f"{arm}.ini", bmc)
                      for arm, bmc in bmcs.items()}
            for n in range(repeat):
                for arm in ARMS:
                    redfish_on(bmcs[arm])
                    run = fence_once(fences[arm], bmcs[arm],
                                     store if arm == "paced" else None)
                    runs[arm].append(run)
                    print(f"{n + 1}/{repeat} {arm}: {run['seconds']:.1f} s,"
                          f" {run['bmc_requests']} request(s)"
                          f"{', failed' if run['failed'] else ''}",
                          flush=True)
            [(_, device)] = fences["paced"].devices
            learned = store.fence_lag(device.fencer.device_key())
        store.close()
    data: dict[str, Any] = {
        "repeat": repeat, "seed": seed,
        "fencing": {"timeout": 30, "attempts": 3, "poll_interval": 1.0},
        "runs": runs, "summary": {arm: summary(runs[arm]) for arm in ARMS},
        "learned": None if learned is None else vars(learned),
        "minutes": (time.monotonic() - began) / 60}
    rows: list[tuple[str, Any, str]] = []
    for arm in ARMS:
        figures = data["summary"][arm]
        rows += [(f"{arm}: start -> proof p50 / p95 / max (s)",
                  f"{figures['p50_s']:.1f} / {figures['p95_s']:.1f} / "
                  f"{figures['max_s']:.1f}", ""),
                 ("  fencings with 2+ requests / failed",
                  f"{figures['two_or_more_requests']} / "
                  f"{figures['failed']}", ""),
                 ("  Off past the first share on one request",
                  figures["held_back"], "")]
    rows.append(("minutes", data["minutes"], "target < 10"))
    common.report("pacing", "Fencing paced by the learned lag", rows, data)
    return data


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=REPEAT,
                        help="fencings per arm (default %(default)s)")
    parser.add_argument("--seed", type=int, default=SEED,
                        help="the emulators' seed (default %(default)s)")
    args = parser.parse_args()
    main(args.repeat, args.seed)
