"""The world of the storage-fence behaviour tests: a cloud (fake or real
Nova) whose compute hosts are network namespaces (tests/netlab.py), each
with an emulated Redfish BMC, some fenced by a Ceph blocklist as well, on
the session's real Ceph (tests/ceph.py); and ``recovery-engine``
processes watching it with the detector's fast path.

A host's management address (the one probed) is its namespace's; its
storage address is a loopback address of its own (127.0.0.N), from
which its "guest" writes (tests/ceph_guest.py). An instance booted on a
covered host has its root disk ``<uuid>_disk`` in the ephemeral pool,
as Nova's ``images_type = rbd`` makes it.

A power loss with the BMC gone stops the BMC's emulator (nothing answers
at its address), takes the host's link down and stops its nova-compute.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import itertools
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tests.behaviour.clouds import Cloud
from tests.behaviour.clouds import Spec
from tests.bmc import write_sections
from tests.bmc.redfish import RedfishBmc
from tests.ceph import COMPUTE_CAPS
from tests.ceph import recovery_caps
from tests.ceph_guest import Guest
from tests.functional.engine_process import EngineProcess
from tests.functional.engine_process import wait_until
from tests.netlab import NetLab
from tests.netlab import TestHost

POOL = "behaviour-vms"       # Nova's images_type = rbd pool
RECOVERY_USER = "recovery-behaviour"
PROBE_PORTS = (22, 16509)
# Nova's heartbeats (both Novas here: a report each second), and the
# detector's fast path over them: a dead host fails about 3 s after its
# last heartbeat; the slow path (Nova's down, then GRACE_PERIOD) well
# after it.
REPORT_INTERVAL = 1.0
SILENCE_WINDOW = 2.0
PROBE_INTERVAL = 0.5
GRACE_PERIOD = 10.0
FENCING_TIMEOUT = 2.0
CEPH_TIMEOUT = 10.0
FINISH_TIMEOUT = 90.0
# Storage addresses, one per host and guest, never used twice in a
# session: the blocklist is the session's Ceph's.
_ADDRESSES = (f"127.0.0.{n}" for n in itertools.count(60))
_prepared: set[int] = set()


def storage_address() -> str:
    return next(_ADDRESSES)


def prepare(ceph: Any) -> tuple[Path, Path]:
    """The pool and the cephx users, made once per Ceph: the keyrings of
    recovery's user (the documented caps) and of a compute host's."""
    if id(ceph) not in _prepared:
        ceph.pools(POOL)
        _prepared.add(id(ceph))
    return (ceph.user(RECOVERY_USER, recovery_caps(POOL)),
            ceph.user("compute", COMPUTE_CAPS))


def fencing_sections(bmcs: dict[str, RedfishBmc], storage: dict[str, str],
                     ceph: Any, keyring: Path) -> dict[str, dict[str, str]]:
    """A credentials file's sections: each host's level 1 its BMC, and
    level 2 a Ceph blocklist of its storage address if ``storage`` gives
    it one."""
    sections: dict[str, dict[str, str]] = {}
    for host, bmc in bmcs.items():
        sections[host] = {"level1": f"bmc-{host}"}
        sections[f"device:bmc-{host}"] = bmc.credentials()
        if host in storage:
            sections[host]["level2"] = f"ceph-{host}"
            sections[f"device:ceph-{host}"] = {
                "driver": "ceph", "ceph_conf": str(ceph.conf),
                "ceph_user": RECOVERY_USER, "keyring": str(keyring),
                "storage_address": storage[host], "ephemeral_pool": POOL,
                "timeout": f"{CEPH_TIMEOUT:g}"}
    return sections


def detector_config(lab: NetLab, credentials: Path, extra: str = "") -> str:
    ports = ",".join(str(port) for port in PROBE_PORTS)
    return (
        f"[detector]\nenabled = true\nhosts = compute-*\n"
        f"poll_interval = 0.5\ngrace_period = {GRACE_PERIOD:g}\n"
        f"nova_report_interval = {REPORT_INTERVAL:g}\n"
        f"heartbeat_margin = 1\n"
        f"probe_interval = {PROBE_INTERVAL:g}\n"
        f"probe_timeout = {PROBE_INTERVAL:g}\n"
        f"silence_window = {SILENCE_WINDOW:g}\n"
        f"liveness_probe = {ports}\n"
        f"probe_addresses = {lab.probe_addresses()}\n\n"
        f"[fencing]\ncredentials_file = {credentials}\n"
        f"poll_interval = 0.2\ntimeout = {FENCING_TIMEOUT:g}\n"
        f"attempts = 1\n\n{extra}")


@dataclasses.dataclass
class World:
    """One test's cloud, hosts, BMCs, Ceph fences and engines."""

    cloud: Cloud
    lab: NetLab
    ceph: Any
    root: Path
    hosts: dict[str, TestHost] = dataclasses.field(default_factory=dict)
    bmcs: dict[str, RedfishBmc] = dataclasses.field(default_factory=dict)
    # Each host fenced by Ceph: its storage address.
    storage: dict[str, str] = dataclasses.field(default_factory=dict)
    engines: list[EngineProcess] = dataclasses.field(default_factory=list)
    guests: list[Guest] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        self.recovery_keyring, self.compute_keyring = prepare(self.ceph)

    # -- building -------------------------------------------------------------
    def add_hosts(self, names: Iterable[str]) -> None:
        """Each host a namespace listening on its probe ports, its
        nova-compute the cloud's."""
        nova = self.cloud.nova
        for name in names:
            self.hosts[name] = self.lab.add_host(
                name, ports=PROBE_PORTS, stop_compute=nova.fail_host,
                start_compute=nova.restore_host)

    def add_bmcs(self, names: Iterable[str], **options: Any) -> None:
        """A Redfish BMC for each host, started together."""
        bmcs = {name: RedfishBmc(self.root / f"bmc-{name}", fast=True,
                                 **options) for name in names}
        self.bmcs.update(bmcs)
        with concurrent.futures.ThreadPoolExecutor(len(bmcs)) as pool:
            list(pool.map(RedfishBmc.start, bmcs.values()))

    def fence_with_ceph(self, names: Iterable[str]) -> None:
        for name in names:
            self.storage[name] = storage_address()

    def boot(self, host: str, names: Iterable[str],
             local: Iterable[str] = ()) -> dict[str, str]:
        """HA instances on ``host``, their ids by name; each has its root
        disk in the ephemeral pool but those named in ``local``."""
        local = set(local)
        ids = self.cloud.boot(host, [Spec(name) for name in names])
        for name, uuid in ids.items():
            if name not in local:
                self.ceph.image(POOL, f"{uuid}_disk")
        return ids

    def credentials(self) -> Path:
        """Each host: level 1 its BMC, level 2 its Ceph fence if it has
        one."""
        return write_sections(self.root / "fencing.ini", fencing_sections(
            self.bmcs, self.storage, self.ceph, self.recovery_keyring))

    def config(self, extra: str = "") -> str:
        return detector_config(self.lab, self.credentials(), extra)

    def watched(self, engines: list[EngineProcess]) -> None:
        """Wait until each engine has had its first look at Nova."""
        self.engines.extend(engines)
        first_look = f"detector: {len(self.hosts)} hosts"
        for engine in engines:
            wait_until(lambda e=engine: first_look in log(e), 30,
                       f"{engine.owner}'s first look at Nova")

    def guest(self, host_or_address: str, uuid: str) -> Guest:
        """A guest writing to the root disk of ``uuid``, from the host's
        storage address (or from an address given)."""
        address = self.storage.get(host_or_address, host_or_address)
        guest = Guest(self.ceph, address, self.compute_keyring, POOL,
                      f"{uuid}_disk")
        self.guests.append(guest)
        return guest

    # -- breaking -------------------------------------------------------------
    def lose_power(self, names: Iterable[str]) -> None:
        """Each host loses its power with its BMC: the emulators stop
        first (nothing answers at their addresses), then the hosts go
        dark (link down, nova-compute stopped)."""
        names = list(names)
        for name in names:
            self.bmcs[name].stop()
        for name in names:
            self.hosts[name].power_loss()

    # -- reading --------------------------------------------------------------
    def store(self) -> Any:
        return self.engines[0].store()

    def notifications(self) -> dict[str, Any]:
        """Each host's latest host-failure notification."""
        with contextlib.closing(self.store()) as store:
            found = store.list_notifications(filters={})
        latest: dict[str, Any] = {}
        for item in sorted(found, key=lambda n: n.id):
            if item.type == "COMPUTE_HOST":
                latest[item.hostname] = item
        return latest

    def events(self, host: str | None = None,
               kind: str | None = None) -> list[Any]:
        with contextlib.closing(self.store()) as store:
            found = store.events(host=host) if host else store.events()
        return sorted((e for e in found if kind is None or e.kind == kind),
                      key=lambda e: e.id)

    def blocklisted(self, host: str) -> list[str]:
        """The blocklist's entries for the host's storage address."""
        address = self.storage[host]
        return sorted(e for e in self.ceph.blocklist()
                      if e.startswith(f"{address}:"))

    def wait_ended(self, hosts: Iterable[str], *statuses: str,
                   timeout: float = FINISH_TIMEOUT) -> dict[str, Any]:
        """Each host's notification once it is in ``statuses``."""
        hosts = set(hosts)

        def ended():
            found = self.notifications()
            return (all(h in found and found[h].status.value in statuses
                        for h in hosts) and found)
        try:
            return wait_until(ended, timeout, f"{sorted(hosts)} {statuses}")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}\n{self.story()}") from None

    def story(self) -> str:
        """What the records say happened, for a failure's message."""
        lines = ["notifications:"] + [
            f"  {n.hostname} {n.type} {n.status.value} attempts="
            f"{n.attempts}: {n.message}" for n in self.notifications(
            ).values()]
        lines += ["events:"] + [
            f"  {e.created_at:%H:%M:%S.%f} {e.actor} {e.subject} {e.kind} "
            f"{e.message}" for e in self.events()]
        for engine in self.engines:
            tail = [line for line in log(engine).splitlines()
                    if " WARNING " in line or " ERROR " in line][-30:]
            lines += [f"{engine.owner}'s last warnings and errors:"] + [
                f"  {line}" for line in tail]
        return "\n".join(lines)

    def close(self) -> None:
        for guest in self.guests:
            guest.stop()
        for bmc in self.bmcs.values():
            bmc.stop()
        for address in self.storage.values():
            entries = [e for e in self.ceph.blocklist()
                       if e.startswith(f"{address}:")]
            if entries:
                self.ceph.block("rm", *entries)


def log(engine: EngineProcess) -> str:
    return engine.log.read_text(errors="replace")
