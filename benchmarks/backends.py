"""Benchmark: the two concurrency backends side by side.

    python -m benchmarks.backends       (about 9 minutes; needs the
                                         ``integration`` extra)

The same figures as the other benchmarks, each measured on eventlet and
on threading (``RECOVERY_CONCURRENCY_BACKEND`` set for the child
``recovery`` processes only), by the other benchmarks' own functions:

- TTR: 30 instances on a real Nova 34, recovery at its defaults, from
  the CLI's start to every instance ACTIVE on another host
  (benchmarks/ttr.py, ``run_recovery``);
- CPU per instance with 1,000 in flight on the fake Nova, less the same
  backend's cost with nothing to recover, measured in the same round
  (benchmarks/scale.py, ``one_host``);
- the peak RSS of that 1,000-instance process;
- process start to the first Nova request, store already migrated
  (benchmarks/startup.py, ``first_request``, scratch bytecode cache
  filled by one uncounted run per backend).

The backends alternate run by run (eventlet, threading, eventlet, ...),
so that whatever else the machine does falls on both. The noise of a
figure is the larger of its two spreads (the highest run less the
lowest, per backend). Every figure is better lower: threading is within
the noise when its median exceeds eventlet's by no more than that.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from benchmarks import common
from benchmarks import scale
from benchmarks import startup
from benchmarks import ttr

BACKENDS = ("eventlet", "threading")
VARIABLE = "RECOVERY_CONCURRENCY_BACKEND"
TTR_INSTANCES = 30
TTR_ROUNDS = 4
SCALE_ROUNDS = 5
STARTUP_ROUNDS = 7

# What a CLI process on that backend has loaded once its commands are
# imported: eventlet, or not.
CHECK = """
import sys
from recovery import concurrency
backend = concurrency.start([], "recovery")
import recovery.cmd.commands
print(backend, "eventlet" in sys.modules)
"""


def backend_env(backend: str,
                base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) choosing
    ``backend`` for the processes started in it."""
    return {**(os.environ if base is None else base), VARIABLE: backend}


def check(backend: str) -> None:
    """Raise unless a CLI process in ``backend_env(backend)`` runs on it:
    monkey-patched by eventlet, or without eventlet at all."""
    out = subprocess.run([sys.executable, "-c", CHECK], check=True,
                         capture_output=True, text=True, cwd=common.ROOT,
                         env=backend_env(backend)).stdout.split()
    expected = [backend, str(backend == "eventlet")]
    if out != expected:
        raise RuntimeError(f"{VARIABLE}={backend}: the process says {out}")


def alternate(name: str, rounds: int,
              measure: Callable[[str], dict[str, Any]],
              shown: str) -> dict[str, list[dict[str, Any]]]:
    """``measure(backend)`` ``rounds`` times per backend, alternating;
    each run printed with its ``shown`` value."""
    runs: dict[str, list[dict[str, Any]]] = {b: [] for b in BACKENDS}
    for n in range(rounds):
        for backend in BACKENDS:
            run = measure(backend)
            runs[backend].append(run)
            print(f"{name} {n + 1}/{rounds}, {backend}: "
                  f"{shown} {run[shown]:.3g}", flush=True)
    return runs


def ttr_run(backend: str) -> dict[str, Any]:
    return ttr.run_recovery(TTR_INSTANCES, None, env=backend_env(backend))


def scale_run(backend: str) -> dict[str, Any]:
    env = backend_env(backend)
    idle = scale.one_host(0, env=env)
    big = scale.one_host(scale.ONE_HOST, env=env)
    return {"idle": idle, "one_host": big,
            "cpu_ms_per_instance":
            (big["cpu_s"] - idle["cpu_s"]) / scale.ONE_HOST * 1000,
            "peak_rss_mb": big["peak_rss_mb"]}


def compare(values: dict[str, list[float]]) -> dict[str, Any]:
    """Each backend's median and spread; threading's median less
    eventlet's; whether that is within the noise."""
    stats = {b: {"values": v, "median": common.median(v), "min": min(v),
                 "max": max(v), "spread": max(v) - min(v)}
             for b, v in values.items()}
    noise = max(s["spread"] for s in stats.values())
    difference = stats["threading"]["median"] - stats["eventlet"]["median"]
    if difference <= 0:
        verdict = "threading lower"
    elif difference <= noise:
        verdict = "within noise"
    else:
        verdict = "THREADING HIGHER, beyond noise"
    return {**stats, "difference": difference,
            "difference_percent":
            100 * difference / stats["eventlet"]["median"],
            "noise": noise, "within_noise": difference <= noise,
            "verdict": verdict}


def main(ttr_rounds: int = TTR_ROUNDS, scale_rounds: int = SCALE_ROUNDS,
         startup_rounds: int = STARTUP_ROUNDS) -> dict[str, Any]:
    began = time.time()
    for backend in BACKENDS:
        check(backend)
    with tempfile.TemporaryDirectory() as cache:
        envs = {b: startup.scratch_cache_env(cache, backend_env(b))
                for b in BACKENDS}
        for env in envs.values():
            startup.first_request(env, migrated=True)
        starts = alternate(
            "start -> first request", startup_rounds,
            lambda b: {"seconds": startup.first_request(envs[b],
                                                        migrated=True)},
            "seconds")
    scales = alternate(f"{scale.ONE_HOST} in flight", scale_rounds,
                       scale_run, "cpu_ms_per_instance")
    ttrs = alternate(f"TTR, {TTR_INSTANCES} instances", ttr_rounds,
                     ttr_run, "seconds")
    figures = {
        "ttr_s": (f"TTR, {TTR_INSTANCES} instances, real Nova (s)",
                  ttrs, "seconds"),
        "cpu_ms_per_instance": (
            f"CPU per instance, {scale.ONE_HOST:,} in flight (ms)",
            scales, "cpu_ms_per_instance"),
        "peak_rss_mb": (f"peak RSS, {scale.ONE_HOST:,} in flight (MB)",
                        scales, "peak_rss_mb"),
        "first_request_s": ("process start -> first Nova request (s)",
                            starts, "seconds"),
    }
    data: dict[str, Any] = {
        "rounds": {"ttr": ttr_rounds, "scale": scale_rounds,
                   "startup": startup_rounds},
        "figures": {}, "labels": {},
        "runs": {"ttr": ttrs, "scale": scales, "startup": starts}}
    for key, (label, runs, field) in figures.items():
        data["labels"][key] = label
        data["figures"][key] = compare(
            {b: [r[field] for r in runs[b]] for b in BACKENDS})
    data["minutes"] = (time.time() - began) / 60
    _table(data)
    return data


def _table(data: dict[str, Any]) -> None:
    """Print the figures side by side and write the JSON file."""
    print("\n== Concurrency backends side by side (median [spread], "
          f"{data['minutes']:.1f} min)")
    head = (f"  {'figure':<44} {'eventlet':>17} {'threading':>17} "
            f"{'thr - evt':>16} {'noise':>7}  verdict")
    print(head)
    for key, f in data["figures"].items():
        sides = [f"{f[b]['median']:.3g} [{f[b]['spread']:.2g}]"
                 for b in BACKENDS]
        difference = (f"{f['difference']:+.3g} "
                      f"({f['difference_percent']:+.0f}%)")
        print(f"  {data['labels'][key]:<44} {sides[0]:>17} {sides[1]:>17} "
              f"{difference:>16} {f['noise']:>7.2g}  {f['verdict']}")
    common.report("backends", "Runs per backend", [
        ("TTR runs", data["rounds"]["ttr"], ""),
        (f"{scale.ONE_HOST:,}-in-flight runs", data["rounds"]["scale"], ""),
        ("start-up runs", data["rounds"]["startup"], ""),
    ], data)


if __name__ == "__main__":
    main()
