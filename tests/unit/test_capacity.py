"""The capacity forecast before evacuating: Placement's room, the
instances' flavors, in recovery order."""

import dataclasses

from recovery.flows import capacity
from recovery.flows.placement import Placement
from recovery.flows.placement import auto
from recovery.models import Need
from recovery.results import InstanceResult
from tests.unit.fakes import MemoryNova
from tests.unit.fakes import make_env

SMALL = Need(1, 2048, 20)
BIG = Need(4, 16384, 80)


def world(room):
    nova = MemoryNova()
    nova.add_service("compute-1", state="down")
    for name in room:
        # A provider is named after its hypervisor: maybe the FQDN.
        nova.add_service(name.split(".")[0], state="up")
    nova.room = dict(room)
    return nova


def selected(nova, *needs):
    """Servers on compute-1 with these needs, in recovery order."""
    out = []
    for n, need in enumerate(needs):
        server = nova.add_server(f"i-{n}", need=need).snapshot()
        out.append((server, InstanceResult(
            uuid=server.id, name=server.name, source_host="compute-1",
            original_state="active")))
    return out


class Methods(Placement):
    """A chain whose reserved hosts are given."""

    def __init__(self, reserved):
        class Reserved:
            name = "reserved_host"

            def destinations(self):
                return list(reserved)
        super().__init__("reserved_host", [Reserved()])


def test_a_shortfall_is_predicted_in_recovery_order():
    nova = world({"compute-2": Need(5, 20480, 100),
                  "compute-3.example.com": Need(2, 4096, 40)})
    env = make_env(nova)
    servers = selected(nova, BIG, SMALL, BIG, SMALL, SMALL)
    forecast = capacity.forecast(env, "compute-1", servers, auto(),
                                 nova.list_services())
    # Each goes to the host with the most memory left (spread): the
    # second BIG finds no room; the SMALLs after it still do.
    assert forecast.destinations == {
        "i-0": "compute-2", "i-1": "compute-3", "i-2": None,
        "i-3": "compute-2", "i-4": "compute-3"}
    assert [r.capacity_warning is not None for _, r in servers] == [
        False, False, True, False, False]
    assert "needs 4 VCPU, 16384 MB, 80 GB" in servers[2][1].capacity_warning
    assert forecast.summary == ("4 of 5 instance(s) fit; no room "
                                "predicted for, in recovery order: vm-i-2")
    assert env.recorder.steps[-1] == ("capacity-check", "SUCCESS")


def test_only_enabled_up_hosts_of_the_zone_count_for_the_scheduler():
    nova = world({"compute-2": Need(8, 32768, 200),
                  "compute-3": Need(8, 32768, 200)})
    nova.add_service("compute-4", state="up", status="disabled")
    nova.room["compute-4"] = Need(64, 10 ** 6, 10 ** 4)
    for host, zone in (("compute-1", "az1"), ("compute-2", "az1"),
                       ("compute-3", "az2")):
        nova.services[host] = dataclasses.replace(nova.services[host],
                                                  zone=zone)
    env = make_env(nova)
    servers = selected(nova, BIG, BIG, BIG)
    forecast = capacity.forecast(env, "compute-1", servers, auto(),
                                 nova.list_services())
    assert list(forecast.destinations.values()) == [
        "compute-2", "compute-2", None]


def test_reserved_hosts_fill_in_the_order_they_are_taken():
    nova = world({"spare-1": Need(4, 16384, 100),
                  "spare-2": Need(8, 32768, 200)})
    env = make_env(nova)
    servers = selected(nova, SMALL, SMALL, BIG, BIG)
    forecast = capacity.forecast(env, "compute-1", servers,
                                 Methods(["spare-1", "spare-2"]),
                                 nova.list_services())
    assert list(forecast.destinations.values()) == [
        "spare-1", "spare-1", "spare-2", "spare-2"]


def test_without_placement_the_run_goes_on_unpredicted():
    nova = world({})
    nova.room = None
    env = make_env(nova)
    servers = selected(nova, SMALL)
    assert capacity.forecast(env, "compute-1", servers, auto(),
                             nova.list_services()) is None
    assert servers[0][1].capacity_warning is None
    assert env.recorder.steps == []
