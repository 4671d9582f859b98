"""Benchmark 3: the engine's own cost at scale, against the fake Nova
with a simulated evacuation latency (Nova's speed is not measured here).

- 1,000 instances on one host, all in flight at once
  (``recovery host-failure``, T = 1000);
- 20 hosts failing at once with 50 instances each (``recovery-engine``,
  20 notifications, every host recovered at the same time, T = 10).

Reported: CPU time per instance (the process's user + system time, less
the same process's cost with nothing to recover) and peak RSS. The rate
cap is off: it would only stretch the run.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import common
from tests.fakenova import FakeNova
from tests.functional.engine_process import EngineProcess

LATENCY = 5.0
ONE_HOST = 1000
HOSTS, PER_HOST = 20, 50


def one_host(instances: int,
             env: dict[str, str] | None = None) -> dict[str, Any]:
    """``recovery host-failure`` as a child (in ``env``, default this
    process's), ``instances`` in flight at once."""
    with FakeNova(evacuation_latency=LATENCY) as fake, \
            tempfile.TemporaryDirectory() as workdir:
        common.failed_host(fake, instances)
        config = common.recovery_config(Path(workdir), fake.endpoint,
                                        threads=max(instances, 1),
                                        poll_interval=1.0, rate=0)
        run = common.run_cli(config, env=env)
        peak = _peak_in_flight(fake.requests)
    return {"instances": instances, "cpu_s": run["cpu_s"],
            "peak_rss_mb": run["peak_rss_mb"], "peak_in_flight": peak,
            "seconds": run["ended"] - run["started"]}


def _peak_in_flight(requests: list[dict[str, Any]]) -> int:
    held, peak = 0, 0
    for request in sorted(requests, key=lambda r: r["time"]):
        if request["action"] == "evacuate":
            held += 1
        elif request["action"] == "unlock":
            held -= 1
        peak = max(peak, held)
    return peak


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def many_hosts() -> dict[str, Any]:
    hosts = [f"compute-{n}" for n in range(1, HOSTS + 1)]
    with FakeNova(evacuation_latency=LATENCY) as fake, \
            tempfile.TemporaryDirectory() as workdir:
        common.failed_rack(fake, hosts, PER_HOST)
        engine = EngineProcess(
            Path(workdir), fake.endpoint, threads=10, poll_interval=1.0,
            extra=f"max_concurrent_host_recoveries = {HOSTS}\n"
                  f"[nova]\nmax_requests_per_second = 0\n"
                  f"{common.BRAKES_OFF}")
        try:
            engine.start()
            pid = engine.proc.pid
            cpu_ready = common.cpu_seconds(pid)
            started = time.time()
            common.wait_finished(
                engine, [engine.post_host_down(host) for host in hosts])
            seconds = time.time() - started
            cpu = common.cpu_seconds(pid) - cpu_ready
            rss = _peak_rss_mb(pid)
            peak = _peak_in_flight(fake.requests)
        finally:
            engine.close()
    return {"hosts": HOSTS, "instances": HOSTS * PER_HOST, "cpu_s": cpu,
            "peak_rss_mb": rss, "peak_in_flight": peak, "seconds": seconds}


def main() -> dict[str, Any]:
    idle = one_host(0)
    big = one_host(ONE_HOST)
    rack = many_hosts()
    per_instance_ms = (big["cpu_s"] - idle["cpu_s"]) / ONE_HOST * 1000
    rack_ms = rack["cpu_s"] / rack["instances"] * 1000
    data = {"evacuation_latency": LATENCY, "idle": idle, "one_host": big,
            "many_hosts": rack, "cpu_ms_per_instance_one_host":
            per_instance_ms, "cpu_ms_per_instance_many_hosts": rack_ms}
    common.report("scale", "Engine cost at scale (fake Nova)", [
        (f"{ONE_HOST} instances: peak in flight", big["peak_in_flight"],
         ""),
        (f"{ONE_HOST} instances: peak RSS, MB", big["peak_rss_mb"],
         "target <= 150"),
        (f"{ONE_HOST} instances: CPU per instance, ms", per_instance_ms,
         "target <= 2"),
        (f"{ONE_HOST} instances: wall time, s", big["seconds"], ""),
        (f"{HOSTS}x{PER_HOST}: peak in flight", rack["peak_in_flight"], ""),
        (f"{HOSTS}x{PER_HOST}: peak RSS, MB", rack["peak_rss_mb"], ""),
        (f"{HOSTS}x{PER_HOST}: CPU per instance, ms", rack_ms,
         "target <= 2"),
        (f"{HOSTS}x{PER_HOST}: wall time, s", rack["seconds"], ""),
    ], data)
    return data


if __name__ == "__main__":
    main()
