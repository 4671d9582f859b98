"""Benchmark: a rack of 20 hosts failing at once, recovered together by
``recovery-engine`` against the fake Nova: how many polls of the
evacuation migrations each poll interval costs, all hosts together.

One watcher per engine means one poll per interval in total, whatever
the number of hosts (it was one per host). The evacuation latency is
3 s, each host has 10 instances, and every host is recovered at once.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from benchmarks import common
from tests.fakenova import FakeNova
from tests.functional.engine_process import EngineProcess

HOSTS, PER_HOST = 20, 10
LATENCY = 3.0
INTERVAL = 1.0


def main() -> dict[str, Any]:
    hosts = [f"compute-{n}" for n in range(1, HOSTS + 1)]
    with FakeNova(evacuation_latency=LATENCY) as fake, \
            tempfile.TemporaryDirectory() as workdir:
        common.failed_rack(fake, hosts, PER_HOST)
        engine = EngineProcess(
            Path(workdir), fake.endpoint, threads=3, poll_interval=INTERVAL,
            extra=f"max_concurrent_host_recoveries = {HOSTS}\n"
                  f"{common.BRAKES_OFF}")
        try:
            engine.start()
            common.wait_finished(
                engine, [engine.post_host_down(host) for host in hosts])
        finally:
            engine.close()
        requests = fake.requests
    evacuates = [r["time"] for r in requests if r["action"] == "evacuate"]
    unlocks = [r["time"] for r in requests if r["action"] == "unlock"]
    start, end = min(evacuates), max(unlocks)
    polls = [r for r in requests if r["path"].endswith("/os-migrations")
             and start <= r["time"] <= end]
    intervals = (end - start) / INTERVAL
    gaps = [b["time"] - a["time"] for a, b in zip(polls, polls[1:],
                                                  strict=False)]
    data = {"hosts": HOSTS, "instances_per_host": PER_HOST,
            "evacuation_latency": LATENCY, "poll_interval": INTERVAL,
            "seconds": end - start, "polls": len(polls),
            "polls_per_interval": len(polls) / intervals,
            "median_gap_s": common.median(gaps) if gaps else None}
    common.report("rack", f"A rack of {HOSTS} hosts failing at once "
                  f"(fake Nova)", [
                      ("first evacuate -> last unlock, s", end - start, ""),
                      ("migration polls in that time", len(polls), ""),
                      ("polls per interval, all hosts together",
                       data["polls_per_interval"], "target 1"),
                      ("median gap between polls, s", data["median_gap_s"],
                       f"the interval, {INTERVAL:g} s"),
                  ], data)
    return data


if __name__ == "__main__":
    main()
