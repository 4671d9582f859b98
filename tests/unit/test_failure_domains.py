"""Failure domains: the brake's rule per domain, the per-window cap
counting a domain once, and where the domains come from (Nova's host
aggregates)."""

import logging

import pytest

from recovery import exception
from recovery.domains import REFRESH_SECONDS
from recovery.domains import FailureDomains
from recovery.domains import assess
from recovery.engine.gates import Gates
from recovery.engine.silence import silence_verdict
from recovery.events import Decision
from recovery.events import EventKind
from recovery.models import Aggregate
from tests.unit.fakes import MemoryNova
from tests.unit.test_gates import fail
from tests.unit.test_gates import notify

# Two racks of six hosts, and four hosts in no domain.
RACK1 = [f"r1-{n}" for n in range(6)]
RACK2 = [f"r2-{n}" for n in range(6)]
ALONE = [f"compute-{n}" for n in range(4)]


def rule(failed, *, max_percent=50, max_domains=1):
    domains = {h: "rack-1" for h in RACK1} | {h: "rack-2" for h in RACK2}
    return assess(failed, RACK1 + RACK2 + ALONE, domains,
                  max_percent=max_percent, max_domains=max_domains,
                  noun="compute services")


# -- the rule ----------------------------------------------------------------
def test_a_whole_domain_down_is_one_event_out_of_the_percentage():
    """Six of sixteen hosts (a whole rack) and one more alone: 1 of the
    10 hosts outside the rack, well under the brake."""
    verdict = rule(RACK1 + ALONE[:1])
    assert verdict.reason is None
    assert dict(verdict.whole) == {"rack-1": frozenset(RACK1)}
    assert verdict.domain_of("r1-3") == "rack-1"
    assert verdict.domain_of("compute-0") is None


def test_a_whole_domain_down_passes_where_hosts_alone_would_not():
    """The same share of hosts in no domain trips the brake."""
    assert rule(RACK1 + RACK2[:3]).reason is None
    hosts = [f"h-{n}" for n in range(16)]
    alone = assess(hosts[:9], hosts, {}, max_percent=50, max_domains=1,
                   noun="compute services")
    assert alone.reason == "too_many_down"


def test_many_domains_silent_at_once_hold_as_a_partition():
    verdict = rule(RACK1 + RACK2)
    assert verdict.reason == "many_domains"
    assert verdict.verdict == (
        "2 failure domains are down as a whole at once (rack-1, rack-2; "
        "max_failed_domains 1): more likely a network partition than 2 "
        "independent losses")
    assert rule(RACK1 + RACK2, max_domains=2).reason is None


def test_one_host_alone_is_treated_as_before():
    assert rule(["compute-0"]).reason is None
    assert rule(["compute-0"]).whole == {}
    verdict = rule(ALONE + RACK2[:5])
    assert verdict.reason == "too_many_down"
    assert verdict.verdict.startswith("9 of 16 compute services are down")


def test_a_domain_partly_down_counts_its_hosts_alone():
    """Five of rack-1's six: no whole domain, five hosts of sixteen."""
    verdict = rule(RACK1[:5])
    assert verdict.whole == {}
    assert verdict.reason is None
    held = rule(RACK1[:5] + RACK2[:4])
    assert held.reason == "too_many_down" and held.whole == {}


def test_the_percentage_is_of_the_hosts_outside_whole_domains():
    """With rack-1 down, six of the ten other hosts down is 60%."""
    verdict = rule(RACK1 + ALONE + RACK2[:2])
    assert verdict.reason == "too_many_down"
    assert verdict.verdict.startswith(
        "6 of 10 compute services outside the failure domains down as a "
        "whole are down or in recovery (60% > ")


def test_a_domain_of_one_host_is_a_host():
    verdict = assess(["solo"], ["solo", "a", "b"], {"solo": "rack-9"},
                     max_percent=50, max_domains=1, noun="hosts")
    assert verdict.whole == {}


# -- the gates ---------------------------------------------------------------
@pytest.fixture
def nova():
    nova = MemoryNova()
    for host in RACK1 + RACK2 + ALONE:
        nova.add_service(host, state="up")
    for ident, (name, hosts) in enumerate(
            (("rack-1", RACK1), ("rack-2", RACK2)), start=1):
        nova.aggregates.append(Aggregate(ident, name))
        nova.aggregate_hosts[ident] = list(hosts)
        nova.aggregate_metadata[ident] = {"failure_domain": name}
    return nova


def start(gates, store, item):
    """What the engine does with what the gates pass."""
    assert gates.check(item) is None
    return store.take(item, "me:1", 60, window=gates.window(item))


def test_a_whole_rack_starts_at_once_past_the_window(conf, store, nova,
                                                     clock, caplog):
    """A window of two: the rack takes one slot, all six start, and the
    next host alone takes the other."""
    conf.set_override("max_host_recoveries_per_window", 2, "safety")
    fail(nova, *RACK1, "compute-0", "compute-1")
    gates = Gates(conf, store, nova, clock)
    with caplog.at_level(logging.WARNING):
        taken = [start(gates, store, notify(store, clock, host))
                 for host in RACK1]
    assert [t.failure_domain for t in taken] == ["rack-1"] * 6
    lines = [r.message for r in caplog.records
             if "Failure domain rack-1 is down as a whole" in r.message]
    assert len(lines) == 1
    start(gates, store, notify(store, clock, "compute-0"))
    hold = gates.check(notify(store, clock, "compute-1"))
    assert hold is not None
    assert "2 host recoveries started in the last 60 s" in hold.cause


def test_only_a_host_failure_is_part_of_its_domain(conf, store, nova,
                                                   clock):
    fail(nova, *RACK1)
    gates = Gates(conf, store, nova, clock)
    failure = notify(store, clock, "r1-0")
    assert gates.check(failure) is None
    assert gates.window(failure).domain == "rack-1"
    back = notify(store, clock, "r1-1", event="STARTED")
    assert gates.check(back) is None
    assert gates.window(back).domain is None


def test_two_racks_at_once_hold_every_host(conf, store, nova, clock):
    fail(nova, *RACK1, *RACK2)
    gates = Gates(conf, store, nova, clock)
    hold = gates.check(notify(store, clock, "r1-0"))
    assert hold is not None
    assert hold.cause.startswith(
        "held by the mass-failure brake: 2 failure domains are down as a "
        "whole at once")


def test_a_release_after_a_hold_says_why(conf, store, nova, clock):
    fail(nova, *RACK1, *RACK2)
    gates = Gates(conf, store, nova, clock)
    item = notify(store, clock, "r1-0")
    hold = gates.check(item)
    store.hold(item, hold.message, hold.delay, event=_held(item, hold))
    for host in RACK2:
        nova.add_service(host, state="up")
    clock.sleep(hold.delay)
    item = store.get(item.uuid)
    start(gates, store, item)
    events = [(e.kind, e.message) for e in store.events(item.uuid)]
    assert events[-2] == (
        "released", "failure domain rack-1 is down as a whole (6 hosts): "
        "one event, out of the percentage brake; its failure domain "
        "rack-1 counts as one start of the per-window cap")


def _held(item, hold):
    return Decision("me:1", item.hostname, EventKind.HELD, hold.cause)


def test_no_key_means_no_domains(conf, store, nova, clock):
    conf.set_override("max_failed_hosts_percent", 25, "safety")
    fail(nova, *RACK1)
    item = notify(store, clock, "r1-0")
    assert Gates(conf, store, nova, clock).check(item) is None
    conf.set_override("failure_domain_key", "", "safety")
    nova.calls.clear()
    hold = Gates(conf, store, nova, clock).check(item)
    assert hold is not None and "6 of 16" in hold.cause
    assert "list_aggregates" not in nova.names()


# -- where the domains come from --------------------------------------------
def test_the_aggregates_are_read_once_a_refresh(conf, nova, clock):
    domains = FailureDomains(conf, nova, clock)
    assert domains.of_hosts()["r2-5"] == "rack-2"
    clock.sleep(REFRESH_SECONDS - 1)
    domains.of_hosts()
    assert nova.names().count("list_aggregates") == 1
    clock.sleep(1)
    domains.of_hosts()
    assert nova.names().count("list_aggregates") == 2


def test_a_host_in_two_domains_counts_alone(conf, nova, clock, caplog):
    nova.aggregates.append(Aggregate(3, "feed-b"))
    nova.aggregate_hosts[3] = ["r1-0"]
    nova.aggregate_metadata[3] = {"failure_domain": "feed-b"}
    with caplog.at_level(logging.WARNING):
        found = FailureDomains(conf, nova, clock).of_hosts()
    assert "r1-0" not in found and found["r1-1"] == "rack-1"
    assert "Host r1-0 is in aggregates of different failure domains" \
        in caplog.text


def test_no_domains_while_nova_cannot_list_them(conf, nova, clock, caplog):
    """A domain only relaxes a brake: in doubt, none."""
    nova.errors[("list_aggregates", "")] = [exception.NovaError("503")]
    with caplog.at_level(logging.WARNING):
        assert FailureDomains(conf, nova, clock).of_hosts() == {}
    assert "Failure domains unknown" in caplog.text


# -- the detector's probes ---------------------------------------------------
def test_a_silent_rack_does_not_isolate_the_prober(conf):
    """Six of ten probed hosts silent, all of one rack: no verdict; the
    same six in no domain: the engine suspects its own network."""
    probed = RACK1 + ALONE
    domains = {h: "rack-1" for h in RACK1}
    assert silence_verdict(RACK1, probed, domains, conf.safety) is None
    verdict = silence_verdict(RACK1, probed, {}, conf.safety)
    assert verdict.startswith("6 of 10 watched hosts are silent on its "
                              "liveness probe at once (60% > ")
    both = {h: "rack-1" for h in RACK1} | {h: "rack-2" for h in RACK2}
    assert "2 failure domains" in silence_verdict(
        RACK1 + RACK2, RACK1 + RACK2 + ALONE, both, conf.safety)
