"""Failures tolerated and the simulation, on hand-built clouds whose
answer is known: Placement's room, the instances' flavors, the recovery
methods (reserved hosts), availability zones and priorities."""

import dataclasses

import pytest

from recovery import evacuable
from recovery.evacuable import ListedServer
from recovery.evacuable import Specs
from recovery.flows import Cloud
from recovery.flows import Group
from recovery.flows import failures_tolerated
from recovery.flows import if_each_failed
from recovery.flows import simulate
from recovery.flows.placement import ReservedHosts
from recovery.flows.placement import auto
from recovery.flows.placement import for_host
from recovery.models import Need
from recovery.results import Outcome
from tests.unit.fakes import MemoryNova
from tests.unit.fakes import SegmentRecord
from tests.unit.fakes import make_env

# One "slot": a host of room R holds R // SLOT instances.
SLOT = Need(1, 1024, 10)


def slots(n: int) -> Need:
    return Need(n * SLOT.vcpus, n * SLOT.ram_mb, n * SLOT.disk_gb)


class Cloudlet:
    """Hosts with free room (in slots) and instances of one slot each."""

    def __init__(self, **overrides):
        self.nova = MemoryNova()
        self.nova.room = {}
        self.servers = []
        self.env = make_env(self.nova, **overrides)

    def host(self, name, free, zone=None, status="enabled",
             instances=0, **fields):
        self.nova.add_service(name, state="up", status=status)
        if zone:
            self.nova.services[name] = dataclasses.replace(
                self.nova.services[name], zone=zone)
        self.nova.room[name] = slots(free)
        for n in range(instances):
            self.server(f"{name}-vm{n}", name, **fields)

    def server(self, uuid, host, need=SLOT, **fields):
        self.servers.append(self.nova.add_server(
            uuid, host=host, need=need, **fields).snapshot())

    def cloud(self):
        return Cloud.of(self.nova.list_services(), self.nova.room,
                        self.servers)

    def tolerated(self, hosts, methods=lambda host: auto()):
        return failures_tolerated(self.env, self.cloud(),
                                  Group("seg", tuple(hosts)), methods)


@pytest.mark.parametrize("free, last, expected", [
    # Three hosts of four instances each, with this many slots free (the
    # last host: ``last``).
    (1, 1, 0),    # 4 instances, 2 slots left on the others
    (2, 2, 1),    # 4 fit on the other two (2 + 2); then 8 on 2: no
    (4, 8, 2),    # 4 fit; then 8 on the last host's 8: yes
])
def test_the_known_answers(free, last, expected):
    c = Cloudlet()
    for name in ("compute-1", "compute-2"):
        c.host(name, free, instances=4)
    c.host("compute-3", last, instances=4)
    found = c.tolerated(["compute-1", "compute-2", "compute-3"])
    assert found.tolerated == expected
    assert found.free == slots(2 * free + last)


def test_what_breaks_is_said():
    c = Cloudlet()
    for name in ("compute-1", "compute-2", "compute-3", "compute-4"):
        c.host(name, 4, instances=1)
    found = c.tolerated(["compute-1", "compute-2", "compute-3", "compute-4"])
    # Every host but one may fail; with all four, no host is left.
    assert found.tolerated == 3
    assert found.breaks.startswith("with compute-1, compute-2, compute-3, "
                                   "compute-4 failed, no room for ")
    c.nova.room["compute-4"] = slots(2)
    c.nova.room["compute-3"] = slots(1)
    c.nova.room["compute-2"] = slots(1)
    found = c.tolerated(["compute-1", "compute-2", "compute-3", "compute-4"])
    assert found.tolerated == 2
    assert found.breaks.startswith(
        "with compute-1, compute-2, compute-3 failed, no room for ")


def test_the_worst_case_is_chosen_not_the_average():
    """One heavily loaded host among light ones: the cloud tolerates
    what losing that host leaves, however easily the others fit."""
    c = Cloudlet()
    c.host("compute-1", 3, instances=6)
    for name in ("compute-2", "compute-3", "compute-4"):
        c.host(name, 1, instances=1)
    found = c.tolerated(["compute-1", "compute-2", "compute-3", "compute-4"])
    # compute-1 (6 instances) fails first: 3 slots free elsewhere.
    assert [h.host for h in found.order][0] == "compute-1"
    assert found.order[0].load == slots(6)
    assert found.tolerated == 0
    assert "with compute-1 failed, no room for" in found.breaks
    # Alone, each light host would fit (3 slots on compute-1).
    plans = if_each_failed(c.env, c.cloud(), Group("seg", (
        "compute-2", "compute-3", "compute-4")), lambda h: auto())
    assert all(not p.forecast.short for p in plans)


def test_what_a_failed_host_moved_moves_again_when_its_host_fails():
    c = Cloudlet()
    c.host("compute-1", 0, instances=2)
    c.host("compute-2", 2)
    c.host("compute-3", 2)
    # compute-1's two go to compute-2 and 3 (spread); when compute-2
    # fails too, its new one moves to compute-3 (one slot left): fits.
    found = c.tolerated(["compute-1", "compute-2"])
    assert found.tolerated == 2


def test_only_the_failed_hosts_zone_takes_its_instances():
    c = Cloudlet()
    c.host("compute-1", 0, zone="az1", instances=2)
    c.host("compute-2", 1, zone="az1")
    c.host("compute-3", 8, zone="az2")
    assert c.tolerated(["compute-1"]).tolerated == 0
    c.nova.room["compute-2"] = slots(2)
    assert c.tolerated(["compute-1"]).tolerated == 1


def test_skipped_instances_are_no_load():
    c = Cloudlet(evacuate_all_instances=False)
    c.host("compute-1", 0)
    c.host("compute-2", 1)
    c.server("ha", "compute-1", metadata={"HA_Enabled": "True"})
    c.server("not-ha", "compute-1")
    found = c.tolerated(["compute-1"])
    assert found.order[0].instances == 1
    assert found.tolerated == 1


class Segment:
    """A store of one reserved_host segment (the protocol of
    ``placement.for_host``)."""

    def __init__(self, members, reserved, method="reserved_host"):
        self.segment = SegmentRecord("seg", "seg", recovery_method=method)
        self.members = set(members)
        self.reserved = [SegmentRecord(f"r-{n}", n) for n in reserved]

    def host_record(self, name):
        if name in self.members:
            return SegmentRecord(name, name), self.segment
        return None

    def reserved_hosts(self, segment_uuid, notification_uuid):
        return list(self.reserved)


def test_reserved_hosts_take_the_instances_first_of_rh_priority():
    c = Cloudlet()
    c.host("compute-1", 0, instances=3)
    c.host("compute-2", 0, instances=3)
    c.host("spare-1", 3, status="disabled")
    c.host("compute-3", 2)
    store = Segment({"compute-1", "compute-2"}, ["spare-1"],
                    method="rh_priority")

    def methods(host):
        return for_host(c.env, store, host, "")

    assert isinstance(methods("compute-1").methods[0], ReservedHosts)
    found = c.tolerated(["compute-1", "compute-2"], methods)
    # compute-1's 3 fill spare-1; compute-2's 3 get compute-3's 2 only.
    assert found.tolerated == 1
    only_auto = c.tolerated(["compute-1", "compute-2"])
    # Without the reserved host (disabled: the scheduler skips it).
    assert only_auto.tolerated == 0


def test_a_reserved_host_one_failure_took_is_no_other_s():
    """A run claims the reserved host it evacuates to: the next failure
    cannot use it, whatever room is left on it (as the store hides a
    claimed reserved host from every other recovery)."""
    c = Cloudlet()
    c.host("compute-1", 0, instances=3)
    c.host("compute-2", 0, instances=3)
    c.host("spare-1", 6, status="disabled")
    store = Segment({"compute-1", "compute-2"}, ["spare-1"])

    def methods(host):
        return for_host(c.env, store, host, "")

    found = c.tolerated(["compute-1", "compute-2"], methods)
    assert found.tolerated == 1
    assert "with compute-1, compute-2 failed, no room for" in found.breaks
    # At once, too: the second host's three find no reserved host.
    plans = simulate(c.env, c.cloud(), ["compute-1", "compute-2"], methods)
    assert [sorted(set(p.forecast.destinations.values()), key=str)
            for p in plans] == [["spare-1"], [None]]


def test_priorities_decide_who_gets_the_room():
    c = Cloudlet(priority_phases=True)
    c.host("compute-1", 0)
    c.host("compute-2", 1)
    c.server("low", "compute-1")
    c.server("high", "compute-1", metadata={"HA_Priority": "10"})
    c.env = make_env(c.nova, priority_phases=True,
                     priority_metadata_key="HA_Priority")
    [plan] = simulate(c.env, c.cloud(), ["compute-1"], lambda h: auto())
    assert plan.forecast.destinations == {"high": "compute-2", "low": None}
    planned = {r.uuid: r for r in plan.report.instances}
    assert "to compute-2 (predicted)" in planned["high"].reason
    assert "predicted no room" in planned["low"].reason


def test_hosts_failing_at_once_share_the_room_left():
    c = Cloudlet()
    c.host("compute-1", 5, instances=2)
    c.host("compute-2", 5, instances=2)
    c.host("compute-3", 3)
    plans = simulate(c.env, c.cloud(), ["compute-1", "compute-2"],
                     lambda h: auto())
    # Neither failed host takes instances; compute-3 has room for 3.
    assert [list(p.forecast.destinations.values()) for p in plans] == [
        ["compute-3", "compute-3"], ["compute-3", None]]
    assert all(r.outcome is Outcome.PLANNED
               for p in plans for r in p.report.instances)


def vtpm(uuid, host, specs):
    return ListedServer(id=uuid, name=uuid, host=host, vm_state="active",
                        task_state=None, status="ACTIVE", locked=False,
                        locked_reason=None, metadata={}, need=SLOT,
                        specs=specs)


@pytest.mark.parametrize("specs", [
    Specs(flavor={"hw:tpm_version": "2.0"}),
    Specs(flavor={"hw:tpm_version": "2.0", "hw:tpm_model": "tpm-crb"}),
    Specs(image_id="i-1", image={"hw_tpm_version": "2.0"}),
])
def test_an_instance_nova_cannot_evacuate_is_skipped_and_no_load(specs):
    c = Cloudlet()
    c.host("compute-1", 0)
    c.host("compute-2", 0)
    c.servers.append(vtpm("tpm", "compute-1", specs))
    c.servers.append(vtpm("plain", "compute-1", Specs()))
    # A model without a version asks for no vTPM (Nova's rule): evacuated.
    c.servers.append(vtpm("model-only", "compute-1",
                          Specs(flavor={"hw:tpm_model": "tpm-crb"},
                                image={"hw_tpm_model": "tpm-crb"})))
    found = c.tolerated(["compute-1"])
    assert found.order[0].instances == 2
    [plan] = simulate(c.env, c.cloud(), ["compute-1"], lambda h: auto())
    results = {r.uuid: r for r in plan.report.instances}
    assert results["tpm"].outcome is Outcome.SKIPPED
    assert results["tpm"].reason.startswith("Nova cannot evacuate it: it "
                                            "has a vTPM")
    assert "to recover it: bring the host back" in results["tpm"].reason
    assert results["plain"].outcome is Outcome.PLANNED
    assert results["model-only"].outcome is Outcome.PLANNED


def test_the_flavors_extra_specs_are_read_from_novas_server():
    server = ListedServer.from_nova({
        "id": "i-1", "name": "tpm", "OS-EXT-STS:vm_state": "active",
        "flavor": {"vcpus": 1, "ram": 512, "disk": 1,
                   "extra_specs": {"hw:tpm_version": "2.0"}}})
    assert server.specs == Specs(flavor={"hw:tpm_version": "2.0"})
    booted = ListedServer.from_nova({
        "id": "i-2", "name": "booted", "image": {"id": "img-1"},
        "flavor": {"vcpus": 1, "ram": 512, "disk": 1, "extra_specs": {}}})
    assert booted.specs.image_id == "img-1"
    # From a volume: Nova shows "" for its image.
    assert ListedServer.from_nova({"id": "i-3", "name": "volume",
                                   "image": ""}).specs.image_id == ""
    assert server.need == Need(1, 512, 0)
    assert evacuable.blocking(server) is evacuable.RULES[0]
    # Before 2.47, or from a facade that lists no specs: no rule applies.
    assert ListedServer.from_nova({"id": "i-2"}).specs == Specs()
    plain = MemoryNova().add_server("i-3").snapshot()
    assert evacuable.blocking(plain) is None
