"""A whole rack fails, at the default brakes, with three
``recovery-engine`` processes on one PostgreSQL and the fake Nova's
latency model: the rack (a failure domain, from Nova's aggregate
metadata) is recovered at once, each instance once, spread over the
engines; the same hosts spread over ten domains, silent together, are
held as a partition and nothing is done to them."""

import collections
import contextlib

from tests.fakenova import FakeNova
from tests.functional.engine_process import start_engines
from tests.functional.engine_process import wait_until

RACK = [f"r7-{n:02}" for n in range(20)]
PER_HOST = 20
# Hosts that stay up, four domains of five: room for the rack.
SPARES = [f"spare-{n:02}" for n in range(20)]
# The engines' defaults but the grace: balance, not liveness, decides
# who claims, however loaded the machine.
EXTRA = "balance_grace = 20\nmax_concurrent_host_recoveries = 20\n"
# And a lease long enough that an engine starved of CPU for a few
# seconds (CI's test workers share two cores) stays live in the registry:
# at start_engines' 5 s, one engine was counted out, the other two took
# a share of 10 each, and the spread was 8, 8 and 4.
LEASE = 15


def _nova() -> FakeNova:
    return FakeNova(evacuation_latency=0.5, evacuation_jitter=0.5,
                    request_latency=(0.001, 0.005), seed=29)


def _cloud(nova: FakeNova, domains: dict[str, list[str]]) -> list[str]:
    """The rack's hosts with ``PER_HOST`` instances each, the spares, and
    the aggregates naming ``domains``; the instances' uuids."""
    for host in RACK + SPARES:
        nova.add_compute(host)
    for n in range(4):
        name = f"spares-{n}"
        nova.add_aggregate(name, SPARES[5 * n:5 * n + 5],
                           metadata={"failure_domain": name})
    for name, hosts in domains.items():
        nova.add_aggregate(name, hosts, metadata={"failure_domain": name})
    return [nova.add_server(f"{host}-vm-{n}", host)
            for host in RACK for n in range(PER_HOST)]


def test_a_whole_rack_is_recovered_once_spread_over_three_engines(
        tmp_path, postgresql_url):
    """20 of 40 hosts at once: over the 50% brake and the 10-per-minute
    cap if they were hosts alone; one domain, they all start."""
    with _nova() as nova:
        servers = _cloud(nova, {"rack-7": RACK})
        for host in RACK:
            nova.fail_host(host)
        engines = start_engines(3, tmp_path, nova.endpoint, postgresql_url,
                                threads=10, extra=EXTRA,
                                lease_seconds=LEASE)
        try:
            uuids = [engines[0].post_host_down(host) for host in RACK]
            for uuid in uuids:
                done = engines[0].wait_status(
                    uuid, "finished", "error", "failed", timeout=240)
                assert done["status"] == "finished", done["message"]
            with contextlib.closing(engines[0].store()) as store:
                claims = [e for uuid in uuids for e in store.events(uuid)
                          if e.kind == "claimed"]
                held = [e for uuid in uuids for e in store.events(uuid)
                        if e.kind == "held"]
        finally:
            for engine in engines:
                engine.close()
        assert not held, held[0].message
        assert sorted(e.notification_uuid for e in claims) == sorted(uuids)
        assert all(e.message.endswith("one of failure domain rack-7, down "
                                      "as a whole") for e in claims)
        spread = collections.Counter(e.actor for e in claims)
        assert max(spread.values()) - min(spread.values()) <= 1, spread
        assert set(spread) == {e.owner for e in engines}
        evacuated = collections.Counter(c["uuid"] for c in
                                        nova.evacuate_calls)
        assert evacuated == {uuid: 1 for uuid in servers}
        states = [nova.server(uuid) for uuid in servers]
        assert not [s["id"] for s in states if s["locked"]]
        assert {s["host"] for s in states} <= set(SPARES)


def test_the_same_hosts_in_ten_domains_silent_together_are_held(
        tmp_path, postgresql_url):
    """20 of 40 hosts is not over the 50% brake, but ten domains down as
    a whole at once is a partition: every run is held, and nothing is
    sent to Nova but reads."""
    with _nova() as nova:
        _cloud(nova, {f"pair-{n}": RACK[2 * n:2 * n + 2]
                      for n in range(10)})
        for host in RACK:
            nova.fail_host(host)
        engines = start_engines(3, tmp_path, nova.endpoint, postgresql_url,
                                extra=EXTRA)
        try:
            uuids = [engines[n % 3].post_host_down(host)
                     for n, host in enumerate(RACK)]

            def held():
                with contextlib.closing(engines[0].store()) as store:
                    events = {uuid: [e.kind for e in store.events(uuid)]
                              for uuid in uuids}
                return all("held" in kinds for kinds in events.values())
            wait_until(held, 60, "every run held")
            with contextlib.closing(engines[0].store()) as store:
                items = [store.get(uuid) for uuid in uuids]
                kinds = {e.kind for uuid in uuids
                         for e in store.events(uuid)}
        finally:
            for engine in engines:
                engine.close()
        assert {item.status.value for item in items} == {"new"}
        assert all("10 failure domains are down as a whole at once"
                   in item.message for item in items)
        assert not kinds & {"claimed", "fenced", "isolated", "evacuating"}
        writes = [r for r in nova.requests if r["method"] != "GET"]
        assert writes == []
