"""The cost of one refresh of the failures tolerated, at 1,000 hosts and
20,000 instances on the fake Nova.

recovery-engine refreshes the figure every ``[capacity]
refresh_interval``: one look at Nova and Placement (the services,
Placement's providers and room, every instance, a page of 1,000 at a
time), then the plan of each failure as a run would make it, the most
loaded hosts first, until one leaves an instance without room. Its cost
grows with the failures the cloud tolerates: each one plans one more
host's instances against every host left. Three clouds, by the room
left on each host: 1 slot (it tolerates few failures), 4 and 10 (it
tolerates many: the worst case for the planning).

One refresh runs in a child process (``CapacityWatch.refresh``, as the
engine's), with no segment (the detector's watched hosts: all 1,000).
Reported: the requests Nova and Placement served for it (the fake's
request log), the child's CPU (user + system) for the refresh alone,
its wall time, and the figure. Also the 'recovery capacity' command
(the figure, and each host's plan if it failed alone).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import common
from tests.fakenova import FakeNova
from tests.fakenova.placement import endpoint_for

HOSTS, PER_HOST = 1000, 20
FREE_SLOTS = (1, 4, 10)
# Services, providers, room, and the pages of instances (a last, empty
# one: Nova links a next page whenever a page is full).
TARGET_REQUESTS = 3 + HOSTS * PER_HOST // 1000 + 1


def config(workdir: Path, endpoint: str) -> Path:
    path = workdir / "recovery.conf"
    path.write_text(
        "[detector]\nhosts = compute-*\n\n"
        "[nova]\nauth_type = admin_token\n"
        f"endpoint = {endpoint}\n"
        f"placement_endpoint_override = {endpoint_for(endpoint)}\n"
        "token = admin:admin:admin\ntimeout = 60\n"
        "max_requests_per_second = 0\n\n"
        f"[database]\nconnection = sqlite:///{workdir}/r.sqlite\n")
    return path


def child(path: str) -> None:
    """One refresh, as the engine's; its CPU and wall time on stdout."""
    from oslo_config import cfg

    from recovery import conf as recovery_conf
    from recovery.concurrency import Clock
    from recovery.db.store import open_conf_store
    from recovery.engine.capacity import CapacityWatch
    from recovery.nova import load_nova

    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf(args=[], default_config_files=[path])
    clock = Clock()
    watch = CapacityWatch(conf, open_conf_store(conf), load_nova(conf, clock),
                          clock, "bench")
    before, started = resource.getrusage(resource.RUSAGE_SELF), time.time()
    [found] = watch.refresh()
    after, ended = resource.getrusage(resource.RUSAGE_SELF), time.time()
    cpu = (after.ru_utime + after.ru_stime
           - before.ru_utime - before.ru_stime)
    print(json.dumps({"cpu_s": cpu, "wall_s": ended - started,
                      "tolerated": found.tolerated,
                      "peak_rss_mb": after.ru_maxrss / 1024}))


def one_cloud(free: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, FakeNova() as fake:
        for n in range(HOSTS):
            host = f"compute-{n:04d}"
            fake.add_compute(host, capacity=PER_HOST + free)
            for m in range(PER_HOST):
                fake.add_server(f"vm-{n:04d}-{m:02d}", host)
        path = config(Path(tmp), fake.endpoint)
        mark = len(fake.requests)
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.tolerance", "child",
             str(path)], capture_output=True, text=True, check=True,
            timeout=1800)
        refresh = json.loads(done.stdout)
        requests = fake.requests[mark:]
        refresh["requests"] = len(requests)
        refresh["by_path"] = sorted({r["path"].split("?")[0]
                                     for r in requests})
        started = time.time()
        view = subprocess.run(
            [sys.executable, "-m", "recovery.cmd.cli", "--config-file",
             str(path), "capacity", "--format", "json"],
            capture_output=True, text=True, check=True, timeout=1800)
        refresh["capacity_command_s"] = time.time() - started
        [segment] = json.loads(view.stdout)["segments"]
        assert segment["failures_tolerated"] == refresh["tolerated"]
        return refresh


def main() -> dict[str, Any]:
    clouds = {free: one_cloud(free) for free in FREE_SLOTS}
    rows = []
    for free, found in clouds.items():
        rows += [
            (f"{free} slot(s) free per host: failures tolerated",
             found["tolerated"], ""),
            (f"{free} slot(s): requests per refresh", found["requests"],
             f"target <= {TARGET_REQUESTS}"),
            (f"{free} slot(s): refresh CPU, s", found["cpu_s"], ""),
            (f"{free} slot(s): refresh wall time, s", found["wall_s"], ""),
            (f"{free} slot(s): 'recovery capacity', s",
             found["capacity_command_s"], ""),
        ]
    data = {"hosts": HOSTS, "instances": HOSTS * PER_HOST,
            "clouds": {str(k): v for k, v in clouds.items()}}
    common.report("tolerance", f"One refresh of the failures tolerated: "
                               f"{HOSTS} hosts, {HOSTS * PER_HOST} "
                               f"instances (fake Nova)", rows, data)
    return data


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        child(sys.argv[2])
    else:
        main()
