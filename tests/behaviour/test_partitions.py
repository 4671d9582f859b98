"""The partition suite (issue 26): the detector's fast path against real
networks, failures and partitions, and never a live host fenced.

Each compute host is a network namespace of its own (tests/netlab.py)
that listens on its probe ports, as sshd and libvirtd would; its BMC is
an emulated Redfish one, linked so that powering the host off takes its
link and its nova-compute down. The fake Nova heartbeats as Nova does
(every REPORT_INTERVAL, each compute at its own phase; down after
SERVICE_DOWN_TIME). Three real ``recovery-engine`` processes share one
fresh PostgreSQL database; an engine that needs a network view of its
own runs in a namespace that reaches only the database and Nova.

Where the hosts are fine and a host's management link or an engine is
cut off, some hosts are also fenced by a Ceph blocklist of their storage
address (level 2, on the session's real Ceph) and their BMCs are out of
reach (the emulators stopped): the case where a storage fence alone
could be taken for a proof. None may be (issue 41): no evidence accepts
one, the blocklist stays empty. (The engine cut off reaches neither the
BMCs nor Ceph from its namespace: what is asserted there is its
decision, which comes first.)

Every verdict is read from Nova's own records (its services, servers,
request log and evacuation migrations), the BMCs' power, the Ceph
blocklist and the store's notifications and events. Only the fake Nova:
the hosts are namespaces.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import time
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from recovery.db.store import Store
from recovery.db.store import open_store
from tests.behaviour.storage_world import fencing_sections
from tests.behaviour.storage_world import prepare
from tests.behaviour.storage_world import storage_address
from tests.bmc import write_credentials_file
from tests.bmc import write_sections
from tests.bmc.redfish import RedfishBmc
from tests.fakenova import FakeNova
from tests.fakenova.state import utcnow
from tests.functional.engine_process import EngineProcess
from tests.functional.engine_process import create_schema
from tests.functional.engine_process import wait_until
from tests.netlab import NetLab
from tests.netlab import TestHost
from tests.netlab import netlab  # noqa: F401

HOSTS = tuple(f"compute-{n}" for n in range(1, 8))
SERVERS_PER_HOST = 2
PROBE_PORTS = (22, 16509)
ENGINES = 3

# Nova's heartbeats, and the detector's settings for them.
REPORT_INTERVAL = 1.0
SERVICE_DOWN_TIME = 3.0
HEARTBEAT_MARGIN = 1.0
SILENCE_WINDOW = 2.0
PROBE_INTERVAL = 0.5
POLL_INTERVAL = 0.5
# The slow path (Nova's down, then this) comes well after the fast one.
GRACE_PERIOD = 3.0
FENCING_TIMEOUT = 8.0
# 5 of 7 hosts (71 %) down stays within the brake; all 7 silent does not.
MAX_FAILED_PERCENT = 90

# The fast path fails a dead host once its heartbeat is stale
# (REPORT_INTERVAL + HEARTBEAT_MARGIN after the last one, which comes at
# most REPORT_INTERVAL before the failure) and it has been silent for
# SILENCE_WINDOW, give or take a poll and a probe: about 3 s from the
# failure here. "Nothing happens" is watched for OBSERVE seconds, more
# than twice that, and fails as soon as anything does.
FAST_PATH = (max(REPORT_INTERVAL + HEARTBEAT_MARGIN, SILENCE_WINDOW)
             + POLL_INTERVAL + PROBE_INTERVAL)
OBSERVE = 2.5 * FAST_PATH
# A flap of half the window: the probes' rounds (one each PROBE_INTERVAL)
# can make it look longer by one interval at most.
FLAP = SILENCE_WINDOW / 2
DETECT_TIMEOUT = 30.0
FINISH_TIMEOUT = 60.0
MUTATING = {"POST", "PUT", "DELETE"}


@dataclasses.dataclass
class Cloud:
    """One test's world: Nova, hosts, BMCs, engines and their store."""

    nova: FakeNova
    hosts: dict[str, TestHost]
    bmcs: dict[str, RedfishBmc]
    servers: dict[str, list[str]]       # host -> the uuids it holds
    database: str = ""
    engines: list[EngineProcess] = dataclasses.field(default_factory=list)
    store: Store | None = None
    # The hosts fenced by Ceph too (level 2): their storage addresses.
    storage: dict[str, str] = dataclasses.field(default_factory=dict)
    ceph: Any = None

    # -- what happened, from the records -----------------------------------
    def notifications(self) -> list[Any]:
        return self.store.list_notifications(filters={})

    def events(self, kind: str | None = None) -> list[Any]:
        return [e for e in self.store.events()
                if kind is None or e.kind == kind]

    def silent_views(self) -> set[tuple[str, str]]:
        """(host, engine) of each engine's view of a silent host, as the
        engines share them (the store's probe_views)."""
        database = sa.create_engine(self.database)
        try:
            with database.connect() as conn:
                return {(row.host, row.engine) for row in conn.execute(
                    sa.text("SELECT host, engine FROM probe_views"))}
        finally:
            database.dispose()

    def mutations(self) -> list[dict[str, Any]]:
        return [r for r in self.nova.requests if r["method"] in MUTATING]

    def evacuations(self) -> collections.Counter:
        return collections.Counter(c["uuid"] for c in self.nova.evacuate_calls)

    def blocklisted(self) -> list[str]:
        """The Ceph blocklist's entries for the hosts' storage
        addresses."""
        if not self.storage:
            return []
        addresses = tuple(f"{a}:" for a in self.storage.values())
        return [e for e in self.ceph.blocklist() if e.startswith(addresses)]

    def powered_off(self) -> set[str]:
        return {host for host, bmc in self.bmcs.items()
                if bmc.power_state() != "On"}

    def log(self, engine: EngineProcess) -> str:
        return engine.log.read_text(errors="replace")

    # -- waiting -----------------------------------------------------------
    def wait_finished(self, hosts: set[str], timeout: float = FINISH_TIMEOUT
                      ) -> dict[str, Any]:
        """Each host's one notification, once all are finished (or one
        is failed: the assertions then say why)."""
        def done():
            found = {n.hostname: n for n in self.notifications()}
            if any(n.status.value == "failed" for n in found.values()):
                return found
            return (set(found) >= hosts and all(
                found[h].status.value == "finished" for h in hosts)
                and found)
        try:
            return wait_until(done, timeout, f"{sorted(hosts)} finished")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}\n{self.story()}") from None

    def story(self) -> str:
        """What the records say happened: each notification, every event,
        and each engine's last warnings and errors (a failure's message)."""
        lines = ["notifications:"] + [
            f"  {n.hostname} {n.type} {n.status.value} attempts="
            f"{n.attempts} owner={n.owner}: {n.message}"
            for n in self.notifications()]
        lines += ["events:"] + [
            f"  {e.created_at:%H:%M:%S.%f} {e.actor} {e.subject} {e.kind} "
            f"{e.message}" for e in self.events()]
        for engine in self.engines:
            tail = [line for line in self.log(engine).splitlines()
                    if " WARNING " in line or " ERROR " in line][-40:]
            lines += [f"{engine.owner}'s last warnings and errors:"] + [
                f"  {line}" for line in tail]
        return "\n".join(lines)

    def observe_quiet(self, seconds: float = OBSERVE) -> None:
        """Nothing happens for ``seconds`` (a bounded watch, failing as
        soon as something does): no notification, no change asked of
        Nova, no host fenced or agreed failed, no fencing tried nor
        storage fence weighed, every BMC On, no storage address
        blocklisted."""
        deadline = time.monotonic() + seconds
        while True:
            self.assert_quiet()
            if time.monotonic() >= deadline:
                return
            time.sleep(0.25)

    def assert_quiet(self) -> None:
        assert [(n.hostname, n.type, n.status.value)
                for n in self.notifications()] == []
        assert self.mutations() == []
        assert [(e.subject, e.kind, e.message) for e in self.events()
                if e.kind in ("agreed", "fenced", "fence-failed",
                              "fence-attempt", "evidence")] == []
        assert self.powered_off() == set()
        assert self.blocklisted() == []

    # -- checks ------------------------------------------------------------
    def assert_recovered(self, host: str, notification: Any) -> None:
        """Fenced, every instance moved once, by the detector's own
        notification (nobody posted one), on the fast path."""
        assert (notification.origin, notification.type,
                notification.status.value) == (
            "detector", "COMPUTE_HOST", "finished"), notification.message
        assert self.bmcs[host].power_state() == "Off"
        uuids = self.servers[host]
        evacuated = self.evacuations()
        assert {uuid: evacuated[uuid] for uuid in uuids} == {
            uuid: 1 for uuid in uuids}
        migrations = [m for m in self.nova.migrations()
                      if m["source_compute"] == host
                      and m["migration_type"] == "evacuation"]
        assert sorted(m["instance_uuid"] for m in migrations) == sorted(uuids)
        for uuid in uuids:
            server = self.nova.server(uuid)
            assert server["host"] != host and server["status"] == "ACTIVE", (
                server)
        service = self.nova.service(host)
        assert service["forced_down"] and service["status"] == "disabled"
        events = self.store.events(host=host)
        kinds = [e.kind for e in events]
        assert "agreed" in kinds and "fenced" in kinds, "\n".join(
            f"{e.created_at:%H:%M:%S.%f} {e.actor} {e.kind} {e.message}"
            for e in events)
        agreed = [e for e in self.store.events(host=host)
                  if e.kind == "agreed"]
        assert "live engine(s)" in agreed[0].message


# -- the world -------------------------------------------------------------
def start_bmcs(root: Path) -> dict[str, RedfishBmc]:
    bmcs = {host: RedfishBmc(root / f"bmc-{host}", fast=True)
            for host in HOSTS}
    with concurrent.futures.ThreadPoolExecutor(len(bmcs)) as pool:
        started = {host: pool.submit(bmc.start) for host, bmc in bmcs.items()}
    failed = [host for host, future in started.items() if future.exception()]
    if failed:
        for bmc in bmcs.values():
            bmc.stop()
        raise started[failed[0]].exception()
    return bmcs


def credentials(cloud: Cloud, root: Path) -> Path:
    """Each host's BMC; and for those fenced by Ceph too, level 1 the
    BMC and level 2 the blocklist."""
    if not cloud.storage:
        return write_credentials_file(root / "bmc.conf", cloud.bmcs)
    keyring, _ = prepare(cloud.ceph)
    return write_sections(root / "fencing.ini", fencing_sections(
        cloud.bmcs, cloud.storage, cloud.ceph, keyring))


def detector_config(lab: NetLab, credentials: Path) -> str:
    ports = ",".join(str(port) for port in PROBE_PORTS)
    return (
        f"[detector]\nenabled = true\nhosts = compute-*\n"
        f"poll_interval = {POLL_INTERVAL:g}\n"
        f"grace_period = {GRACE_PERIOD:g}\n"
        f"nova_report_interval = {REPORT_INTERVAL:g}\n"
        f"heartbeat_margin = {HEARTBEAT_MARGIN:g}\n"
        f"probe_interval = {PROBE_INTERVAL:g}\n"
        f"probe_timeout = {PROBE_INTERVAL:g}\n"
        f"silence_window = {SILENCE_WINDOW:g}\n"
        f"liveness_probe = {ports}\n"
        f"probe_addresses = {lab.probe_addresses()}\n\n"
        f"[fencing]\ncredentials_file = {credentials}\n"
        f"poll_interval = 0.2\ntimeout = {FENCING_TIMEOUT:g}\n\n"
        f"[safety]\nservice_down_time = {SERVICE_DOWN_TIME:g}\n"
        f"max_failed_hosts_percent = {MAX_FAILED_PERCENT}\n"
        f"max_host_recoveries_per_window = 100\n")


def start_engines(cloud: Cloud, lab: NetLab, database: str, root: Path,
                  extra: str, isolated: int) -> None:
    """ENGINES engines on ``database``, the last ``isolated`` of them
    each in a namespace of its own, cut off from every host; started
    together, then ready, then past their first look at Nova."""
    for n in range(1, ENGINES + 1):
        workdir = root / f"engine-{n}"
        workdir.mkdir()
        options: dict[str, Any] = {}
        endpoint, url = cloud.nova.endpoint, database
        if n > ENGINES - isolated:
            namespace = lab.engine_namespace()
            endpoint = namespace.endpoint(endpoint)
            url = namespace.database_url(database)
            options["netns"] = namespace.name
        cloud.engines.append(EngineProcess(
            workdir, endpoint, threads=3, extra=extra, poll_interval=0.2,
            database=url, lease_seconds=5, **options))
    create_schema(cloud.engines[0].config)
    for engine in cloud.engines:
        engine.start(ready_timeout=None)
    for engine in cloud.engines:
        engine.wait_ready()
    first_look = f"detector: {len(HOSTS)} hosts"
    for engine in cloud.engines:
        wait_until(lambda e=engine: first_look in cloud.log(e), 30,
                   f"{engine.owner}'s first look at Nova")


@pytest.fixture
def world(netlab, postgresql_url, tmp_path, request  # noqa: F811
          ) -> Iterator[Callable[..., Cloud]]:
    """``world(isolated=0, storage=())``: the cloud, its hosts in
    namespaces with their BMCs, and three engines watching it
    (``isolated`` of them cut off from every host). The hosts named in
    ``storage`` are fenced by a Ceph blocklist too (the session's Ceph),
    and their BMCs are out of reach once the engines watch."""
    clouds: list[Cloud] = []

    def build(isolated: int = 0, storage: Iterable[str] = ()) -> Cloud:
        nova = FakeNova(evacuation_latency=0.3,
                        report_interval=REPORT_INTERVAL,
                        service_down_time=SERVICE_DOWN_TIME).start()
        cloud = Cloud(nova, {}, {}, {}, database=postgresql_url)
        clouds.append(cloud)
        cloud.storage = {host: storage_address() for host in storage}
        if cloud.storage:
            cloud.ceph = request.getfixturevalue("ceph")
        for host in HOSTS:
            nova.add_compute(host)
            cloud.servers[host] = [
                nova.add_server(f"{host}-vm{n}", host,
                                metadata={"HA_Enabled": "True"})
                for n in range(SERVERS_PER_HOST)]
        cloud.bmcs = start_bmcs(tmp_path)
        for host in HOSTS:
            cloud.hosts[host] = netlab.add_host(
                host, ports=PROBE_PORTS, stop_compute=nova.fail_host,
                start_compute=nova.restore_host)
            cloud.hosts[host].link_bmc(cloud.bmcs[host])
        start_engines(cloud, netlab, postgresql_url, tmp_path,
                      detector_config(netlab, credentials(cloud, tmp_path)),
                      isolated)
        for host in cloud.storage:
            cloud.bmcs[host].stop()
        cloud.store = open_store(postgresql_url)
        return cloud

    yield build
    for cloud in clouds:
        for engine in cloud.engines:
            engine.close()
        if cloud.store is not None:
            cloud.store.close()
        for bmc in cloud.bmcs.values():
            bmc.stop()
        cloud.nova.stop()


def heartbeat_age(cloud: Cloud, host: str) -> float:
    """How old Nova's last heartbeat of ``host`` is, by Nova's clock."""
    updated = cloud.nova.service(host)["updated_at"]
    return (utcnow() - updated).total_seconds()


# -- the cases -------------------------------------------------------------
def test_a_host_that_loses_power_is_fenced_and_recovered(world):
    cloud = world()
    host = "compute-1"
    lost_at = time.monotonic()
    cloud.hosts[host].power_loss()
    assert cloud.bmcs[host].power_state() == "On"   # fencing's to do
    found = cloud.wait_finished({host})
    print(f"power loss -> recovered: {time.monotonic() - lost_at:.1f} s")
    assert list(found) == [host] and len(cloud.notifications()) == 1
    cloud.assert_recovered(host, found[host])
    assert cloud.powered_off() == {host}
    others = [uuid for h in HOSTS if h != host for uuid in cloud.servers[h]]
    assert not set(cloud.evacuations()) & set(others)


def test_a_crashed_nova_compute_on_a_live_host_is_a_process_failure(world):
    cloud = world()
    host = "compute-2"
    cloud.hosts[host].crash_compute()
    found = cloud.wait_finished({host}, timeout=DETECT_TIMEOUT
                                + FINISH_TIMEOUT)
    item = found[host]
    assert (item.origin, item.type, item.status.value) == (
        "detector", "PROCESS", "finished"), item.message
    assert item.message.startswith("ALARM: "), item.message
    service = cloud.nova.service(host)
    assert service["status"] == "disabled" and not service["forced_down"]
    assert "Process failure" in service["disabled_reason"]
    assert [r["path"] for r in cloud.mutations()] == [
        f"/v2.1/os-services/{service['id']}"]
    assert cloud.evacuations() == {}
    assert cloud.powered_off() == set()
    assert [e for e in cloud.events() if e.kind in ("agreed", "fenced")] == []
    assert {cloud.nova.server(uuid)["host"]
            for uuid in cloud.servers[host]} == {host}


def test_a_cut_management_link_fences_nothing(world):
    """Two hosts' links are cut: one whose BMC answers, and one fenced
    by Ceph too whose BMC is out of reach."""
    cloud = world(storage=["compute-4"])
    hosts = [cloud.hosts["compute-3"], cloud.hosts["compute-4"]]
    for host in hosts:
        host.cut_link()
        assert host.compute_running      # it heartbeats on: it is alive
        assert not host.answers()        # and it is silent
    # Every engine sees them silent (and shares that), yet fences nothing.
    wait_until(lambda: {(h, e) for h, e in cloud.silent_views()} >= {
                   (h.name, e.owner) for h in hosts for e in cloud.engines},
               DETECT_TIMEOUT, "every engine's view of the silent hosts")
    cloud.observe_quiet()
    for host in hosts:
        assert heartbeat_age(cloud, host.name) < REPORT_INTERVAL + 0.1
        host.restore()


def test_an_engine_cut_off_from_every_host_holds_and_alarms(world):
    """Four of the hosts are fenced by Ceph too, their BMCs out of
    reach."""
    cloud = world(isolated=1, storage=HOSTS[3:])
    cut_off = cloud.engines[-1]
    others = {e.owner for e in cloud.engines[:-1]}
    wait_until(lambda: "ALARM detector:" in cloud.log(cut_off),
               DETECT_TIMEOUT, "the cut-off engine's alarm")
    held = wait_until(lambda: cloud.events("held"), 10, "a held event")
    assert [(e.actor, e.subject) for e in held] == [
        (cut_off.owner, "all hosts")], held
    assert "cut off" in held[0].message, held[0].message
    cloud.observe_quiet()
    assert not {e.actor for e in cloud.events("held")} & others
    # The others see every host alive: no view of a silent host is
    # theirs (the cut-off engine withdrew its own).
    viewers = {engine for _, engine in cloud.silent_views()}
    assert not viewers & others, viewers
    assert [e for e in cloud.events() if e.kind == "suspect"] == []
    assert all(engine.proc.poll() is None for engine in cloud.engines)


def test_five_hosts_that_lose_power_together_are_each_recovered_once(world):
    cloud = world()
    failed = set(HOSTS[:5])
    for host in sorted(failed):
        cloud.hosts[host].power_loss()
    found = cloud.wait_finished(failed)
    assert set(found) == failed
    assert len(cloud.notifications()) == len(failed)
    for host in sorted(failed):
        cloud.assert_recovered(host, found[host])
    assert cloud.powered_off() == failed
    assert sum(cloud.evacuations().values()) == (
        len(failed) * SERVERS_PER_HOST)
    # Only "no agreement" holds, while the other engines' views catch up:
    # no engine took the five for its own network.
    assert [e.message for e in cloud.events("held")
            if e.subject not in failed] == []


def test_a_dead_host_whose_bmc_hangs_is_not_evacuated(world):
    cloud = world()
    host = "compute-6"
    cloud.bmcs[host].hang()
    cloud.hosts[host].power_loss()
    failed = wait_until(lambda: [e for e in cloud.store.events(host=host)
                                 if e.kind == "fence-failed"],
                        DETECT_TIMEOUT + FENCING_TIMEOUT + 10,
                        f"{host}'s fencing to fail")
    assert failed[0].subject == host
    assert "not verified Off" in failed[0].message, failed[0].message
    [item] = wait_until(
        lambda: [n for n in cloud.notifications()
                 if n.status.value in ("error", "failed")],
        FINISH_TIMEOUT, f"{host}'s run to end in error")
    assert (item.origin, item.type, item.hostname) == (
        "detector", "COMPUTE_HOST", host)
    assert "not verified Off" in item.message, item.message
    # The alarm: the host, and what could not be proved. The engine
    # raises it once the run's end is recorded, so it may come just after.
    alarm = f"ALARM: {host} could not be proved off"
    wait_until(lambda: any(alarm in cloud.log(e) for e in cloud.engines),
               10, f"an engine to raise the ALARM for {host}")
    # Nothing proved it off: nothing moved, nothing changed in Nova.
    assert cloud.evacuations() == {}
    assert cloud.mutations() == []
    service = cloud.nova.service(host)
    assert not service["forced_down"] and service["status"] == "enabled"
    assert {cloud.nova.server(uuid)["host"]
            for uuid in cloud.servers[host]} == {host}
    assert cloud.bmcs[host].power_state() == "On"


def test_a_host_that_flaps_for_less_than_the_window_is_left_alone(world):
    cloud = world()
    host = cloud.hosts["compute-7"]
    # Its heartbeat goes stale first (nova-compute hiccups), so that only
    # the silence window stands between the flap and a fence.
    # The engines see it as a suspect (stale, answering) before it flaps.
    host.crash_compute()
    wait_until(lambda: len([e for e in cloud.store.events(host=host.name)
                            if e.kind == "suspect"]) >= ENGINES,
               10, "every engine to see the heartbeat stale")
    outage = host.flap(FLAP)
    assert outage < SILENCE_WINDOW - PROBE_INTERVAL, outage
    host.restore()
    assert host.answers()
    cloud.observe_quiet()
    assert heartbeat_age(cloud, host.name) < REPORT_INTERVAL + 0.1
