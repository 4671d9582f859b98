"""Benchmark 6: the detector on a real Nova 34. From a host's nova-compute
stopping (its last heartbeat) to the first evacuate call Nova receives,
with nobody posting a notification; and what the detector costs Nova
while nothing fails.

Nova's own service_down_time is 3 s in this harness (heartbeats every
1 s). The host is let through on Nova's heartbeat (trust_nova_heartbeat),
so the time measured is detection alone: fencing adds its own time, which
benchmark 2 of the fencing tests covers per BMC.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import common
from tests.fakenova.server import wait_until
from tests.functional.engine_process import EngineProcess
from tests.integration.realnova.harness import RealNova
from tests.integration.realnova.stack import REPORT_INTERVAL
from tests.integration.realnova.stack import SERVICE_DOWN_TIME

GRACE = 5.0
POLL = 1.0
HOSTS = ("compute-1", "compute-2", "compute-3")
IDLE = 20.0


def main() -> dict[str, Any]:
    delays, idle_requests = [], 0
    with RealNova(hosts=len(HOSTS) + 1).start() as nova, \
            tempfile.TemporaryDirectory() as workdir:
        for host in HOSTS:
            nova.settle(nova.create(f"{host}-vm", host))
        engine = EngineProcess(
            Path(workdir), nova.endpoint, threads=3, poll_interval=0.5,
            extra=f"{common.BRAKES_OFF}[detector]\nenabled = true\n"
                  f"hosts = compute-*\ngrace_period = {GRACE:g}\n"
                  f"poll_interval = {POLL:g}\ntrust_nova_heartbeat = true\n")
        try:
            engine.start()
            idle_from = time.time()
            time.sleep(IDLE)        # a benchmark: the idle cost, measured
            idle_requests = len([c for c in nova.calls()
                                 if c["time"] >= idle_from])
            for host in HOSTS:
                stopped = time.time()
                nova.fail_host(host)
                call = wait_until(
                    lambda since=stopped: next(
                        (c for c in nova.calls() if c.get("action")
                         == "evacuate" and c["time"] >= since), None),
                    120, interval=0.05, what=f"the evacuate of {host}")
                delays.append(call["time"] - stopped)
                wait_until(lambda h=host: engine.stored(
                    hostname=h, status="finished"), 120, interval=0.5,
                    what=f"the recovery of {host}")
        finally:
            engine.close()
    # The target: service_down_time + grace_period + fencing (none
    # here) + 2 s. Measured from the stop: the last heartbeat came at most
    # REPORT_INTERVAL before it.
    bound = SERVICE_DOWN_TIME + GRACE + 2
    data = {"grace_period_s": GRACE, "poll_interval_s": POLL,
            "service_down_time_s": SERVICE_DOWN_TIME,
            "report_interval_s": REPORT_INTERVAL,
            "seconds": delays, "median_s": common.median(delays),
            "max_s": max(delays), "target_s": bound,
            "idle_requests_per_poll": idle_requests / (IDLE / POLL)}
    common.report("detector", "nova-compute stopped -> first evacuate "
                  "(detector, real Nova, no notification posted)", [
                      ("median, s", data["median_s"], f"target <= {bound:g}"),
                      ("max, s", data["max_s"], f"target <= {bound:g}"),
                      ("Nova requests per poll, idle",
                       data["idle_requests_per_poll"], "target 1"),
                  ], data)
    return data


if __name__ == "__main__":
    main()
