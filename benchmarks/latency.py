"""Benchmark 4: from a notification accepted (the API's 202) to the
first evacuate call Nova receives, through ``recovery-engine`` and the
fake Nova. Ten hosts fail one after another; each is measured alone."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import common
from tests.fakenova import FakeNova
from tests.fakenova.server import wait_until
from tests.functional.engine_process import EngineProcess

HOSTS = 10




def main() -> dict[str, Any]:
    hosts = [f"compute-{n}" for n in range(1, HOSTS + 1)]
    latencies = []
    with FakeNova(evacuation_latency=0.3) as fake, \
            tempfile.TemporaryDirectory() as workdir:
        for host in hosts + ["spare"]:
            fake.add_compute(host)
        engine = EngineProcess(Path(workdir), fake.endpoint, threads=3,
                               poll_interval=1.0, extra=common.BRAKES_OFF)
        try:
            engine.start()
            for host in hosts:
                uuid = fake.add_server(f"{host}-vm", host)
                fake.fail_host(host)
                notification = engine.post_host_down(host)
                accepted = time.time()
                call = wait_until(
                    lambda u=uuid: next((c for c in fake.evacuate_calls
                                         if c["uuid"] == u), None),
                    30, interval=0.001, what=f"the evacuate of {host}")
                latencies.append(call["time"] - accepted)
                wait_until(lambda n=notification: engine.notification(n)[
                    "status"] == "finished", 30, interval=0.2,
                    what=f"the recovery of {host}")
        finally:
            engine.close()
    data = {"hosts": HOSTS, "seconds": latencies,
            "median_s": common.median(latencies), "max_s": max(latencies)}
    common.report("latency", "Notification accepted -> first evacuate "
                  "(recovery-engine, fake Nova)", [
                      ("median, s", data["median_s"], "target <= 1"),
                      ("max, s", data["max_s"], "target <= 1"),
                  ], data)
    return data


if __name__ == "__main__":
    main()
