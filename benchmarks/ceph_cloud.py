"""What the storage-fence benchmarks share (benchmarks/ceph_loss.py and
benchmarks/ceph_rack.py): a cloud whose instances' disks are on a real
Ceph, watched by one ``recovery-engine`` at Nova's default heartbeat
settings.

- Nova: the fake Nova (tests/fakenova) with its latency model: each
  service heartbeats every 10 s at its own phase and is down once its
  last heartbeat is 60 s old (Nova's report_interval and
  service_down_time); every request waits 1-5 ms; each evacuation takes
  1 s +/- 50 % (a real Nova 34's, fake virt driver, took 0.6-1.5 s in
  benchmarks/ttr.py). Seeded.
- Hosts: network namespaces of tests/netlab.py, each with its probe
  listeners (sshd's and libvirtd's ports). A power loss takes the link
  down (packets vanish, nothing answers) and stops the host's
  heartbeats at the same moment.
- Ceph: tests/ceph.py (one monitor, one memstore OSD, cephx), pool
  ``vms`` holding each instance's root disk ``<uuid>_disk`` (Nova's
  ``images_type = rbd``), recovery's cephx user with the documented
  caps. Each host's Ceph client address, its storage network, is a
  127.0.0.N of its own; the engine's own client connects from
  127.0.0.1, which no fence blocklists.
- BMCs: gone with their host (the BMC's address is in the host's
  namespace and vanishes with its link: connections time out, as with
  a BMC that lost its power), or alive (sushy-emulator with its own
  1-11 s power-off delay, tests/bmc/redfish.py; its power Off takes the
  host down too).
- Fencing: level 1 the host's BMC (redfish), level 2 its Ceph fence
  (``storage_address`` 127.0.0.N, ``ephemeral_pool`` vms); ``[fencing]``
  at its defaults (timeout 30 s, no_answer_timeout 5 s: a BMC gone is
  given up after 5 s, level 1 having a later level; 3 attempts, poll
  1 s) unless a run sets the BMC device's own ``timeout``.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import time
from pathlib import Path
from typing import Any

from benchmarks import common
from tests.bmc import write_sections
from tests.bmc.redfish import RedfishBmc
from tests.ceph import COMPUTE_CAPS
from tests.ceph import Ceph
from tests.ceph import recovery_caps
from tests.fakenova.server import FakeNova
from tests.fakenova.server import wait_until
from tests.netlab import PROBE_PORTS
from tests.netlab import NetLab
from tests.netlab import TestHost

# Nova's defaults.
REPORT_INTERVAL = 10
SERVICE_DOWN_TIME = 60
REQUEST_LATENCY = (0.001, 0.005)
EVACUATION_LATENCY, EVACUATION_JITTER = 1.0, 0.5
POOL = "vms"
# A gone BMC's port, on its host's address: refused while the link is
# up (nothing asks then), silent once it is down.
BMC_PORT = 443
IMAGE_WORKERS = 8
WATCH_INTERVAL = 0.1


@dataclasses.dataclass
class Host:
    name: str
    lab: TestHost
    storage: str                     # its Ceph client address
    bmc: RedfishBmc | None = None    # None: gone with the host

    def bmc_section(self, timeout: float | None) -> dict[str, str]:
        if self.bmc is not None:
            section = self.bmc.credentials()
        else:
            section = {"driver": "redfish",
                       "address": f"http://{self.lab.address}:{BMC_PORT}",
                       "username": "admin", "password": "gone-with-it"}
        if timeout is not None:
            section["timeout"] = f"{timeout:g}"
        return section


def start_ceph(workdir: Path) -> tuple[Ceph, dict[str, Path]]:
    """A Ceph with pool vms, and the keyrings of recovery's user (the
    documented caps) and of a compute host's (profile rbd)."""
    ceph = Ceph(workdir).start()
    try:
        ceph.pools(POOL)
        users = {"recovery": ceph.user("recovery", recovery_caps(POOL)),
                 "compute": ceph.user("compute", COMPUTE_CAPS)}
    except BaseException:
        ceph.stop()
        raise
    return ceph, users


class Cloud:
    """The fake Nova, the netlab hosts and their BMCs, on one Ceph."""

    def __init__(self, workdir: Path, ceph: Ceph, users: dict[str, Path],
                 seed: int) -> None:
        self.workdir = workdir
        self.ceph = ceph
        self.users = users
        self.nova = FakeNova(
            evacuation_latency=EVACUATION_LATENCY,
            evacuation_jitter=EVACUATION_JITTER,
            request_latency=REQUEST_LATENCY, report_interval=REPORT_INTERVAL,
            service_down_time=SERVICE_DOWN_TIME, seed=seed)
        self.lab: NetLab | None = None
        self.hosts: dict[str, Host] = {}

    def start(self) -> Cloud:
        self.nova.start()
        try:
            self.lab = NetLab()
        except BaseException:
            self.nova.stop()
            raise
        return self

    def close(self) -> None:
        if self.lab is not None:
            self.lab.close()
        for host in self.hosts.values():
            if host.bmc is not None:
                host.bmc.stop()
        self.nova.stop()

    def add_host(self, name: str, storage: str,
                 bmc_alive: bool = False) -> Host:
        assert self.lab is not None
        self.nova.add_compute(name)
        lab_host = self.lab.add_host(name, PROBE_PORTS,
                                     stop_compute=self.nova.fail_host,
                                     start_compute=self.nova.restore_host)
        host = Host(name, lab_host, storage)
        self.hosts[name] = host
        if bmc_alive:
            host.bmc = RedfishBmc(self.workdir / f"bmc-{name}")
            host.bmc.start()
            lab_host.link_bmc(host.bmc)
        return host

    def boot(self, host: str, count: int, prefix: str) -> list[str]:
        """``count`` ACTIVE instances on ``host``, each with its root
        disk ``<uuid>_disk`` in pool vms."""
        ids = [self.nova.add_server(f"{prefix}-{n}", host)
               for n in range(count)]
        with concurrent.futures.ThreadPoolExecutor(IMAGE_WORKERS) as pool:
            list(pool.map(lambda i: self.ceph.image(POOL, f"{i}_disk"), ids))
        return ids

    def credentials(self, bmc_timeout: float | None = None) -> Path:
        """Each host: level 1 its BMC, level 2 its Ceph fence."""
        sections: dict[str, dict[str, str]] = {}
        for host in self.hosts.values():
            sections[host.name] = {"level1": f"bmc-{host.name}",
                                   "level2": f"ceph-{host.name}"}
            sections[f"device:bmc-{host.name}"] = host.bmc_section(
                bmc_timeout)
            sections[f"device:ceph-{host.name}"] = {
                "driver": "ceph", "ceph_conf": str(self.ceph.conf),
                "keyring": str(self.users["recovery"]),
                "storage_address": host.storage, "ephemeral_pool": POOL}
        return write_sections(self.workdir / "fencing.ini", sections)

    def engine_extra(self, credentials: Path, watched: str,
                     probe_addresses: str, safety: str = "") -> str:
        """The engine's detector (the fast path), fencing and safety
        settings; its own defaults otherwise."""
        return (f"[safety]\n{safety}service_down_time = "
                f"{SERVICE_DOWN_TIME}\n\n"
                f"[detector]\nenabled = true\nhosts = {watched}\n"
                f"fast_path = true\n"
                f"nova_report_interval = {REPORT_INTERVAL}\n"
                f"liveness_probe = {','.join(map(str, PROBE_PORTS))}\n"
                f"probe_addresses = {probe_addresses}\n\n"
                f"[fencing]\ncredentials_file = {credentials}\n")


class ActiveWatch:
    """When each of the instances was first seen ACTIVE, with no task,
    off the host it was on (the fake Nova's own state, no API request)."""

    def __init__(self, nova: FakeNova, origin: dict[str, str]) -> None:
        self._nova = nova
        self._origin = dict(origin)
        self.done: dict[str, float] = {}
        self._poller = common.Poller(self._look, WATCH_INTERVAL)

    def _look(self) -> bool:
        now = time.time()
        for server in self._nova.servers():
            uuid = server["id"]
            if (uuid in self._origin and uuid not in self.done
                    and server["status"] == "ACTIVE"
                    and server["task_state"] is None
                    and server["host"] != self._origin[uuid]):
                self.done[uuid] = now
        return len(self.done) == len(self._origin)

    def wait(self, timeout: float) -> float | None:
        """When the last one was; None if not all within ``timeout``."""
        try:
            wait_until(lambda: len(self.done) == len(self._origin), timeout,
                       interval=0.2, what="every instance ACTIVE elsewhere")
        except TimeoutError:
            return None
        finally:
            self._poller.stop()
        return max(self.done.values())


def stats(values: list[float | None]) -> dict[str, Any]:
    """n, p50 (the median), p95 (nearest rank) and max of the values
    that are not None."""
    known = [v for v in values if v is not None]
    if not known:
        return {"n": 0, "p50": None, "p95": None, "max": None}
    return {"n": len(known), "p50": common.median(known),
            "p95": common.percentile(known, 95), "max": max(known)}


def load() -> list[float]:
    """The machine's load averages (1, 5, 15 minutes)."""
    return [float(v) for v in Path("/proc/loadavg").read_text().split()[:3]]
