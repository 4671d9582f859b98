"""Three ``recovery-engine`` processes on one PostgreSQL share a rack:
twenty host failures, all posted to one engine's API (the one woken at
once), are claimed within one host of even, each once."""

import collections
import contextlib

from tests.fakenova import FakeNova
from tests.functional.engine_process import start_engines

HOSTS = [f"rack-{n:02}" for n in range(20)]
# Each run outlasts the engines' next looks (every second), so none ends
# before the rack is shared out.
LATENCY = 2.0


def test_a_rack_posted_to_one_engine_spreads_over_three(tmp_path,
                                                        postgresql_url):
    with FakeNova(evacuation_latency=LATENCY) as nova:
        nova.add_compute("target-1")
        servers = []
        for host in HOSTS:
            nova.add_compute(host)
            servers.append(nova.add_server(f"{host}-vm", host))
            nova.fail_host(host)
        # The grace is long enough here that balance, not liveness,
        # decides, however loaded the machine.
        engines = start_engines(3, tmp_path, nova.endpoint, postgresql_url,
                                extra=("balance_grace = 20\n\n[safety]\n"
                                       "max_failed_hosts_percent = 100\n"
                                       "max_host_recoveries_per_window = "
                                       "100\n"))
        try:
            woken = engines[0]
            uuids = [woken.post_host_down(host) for host in HOSTS]
            for uuid in uuids:
                done = woken.wait_status(uuid, "finished", "error", "failed",
                                         timeout=90)
                assert done["status"] == "finished", done["message"]
            with contextlib.closing(woken.store()) as store:
                claims = [e for uuid in uuids for e in store.events(uuid)
                          if e.kind == "claimed"]
            assert sorted(e.notification_uuid for e in claims) == sorted(
                uuids)
            spread = collections.Counter(e.actor for e in claims)
            assert sorted(spread.values()) == [6, 7, 7], spread
            assert set(spread) == {e.owner for e in engines}
            evacuated = collections.Counter(
                c["uuid"] for c in nova.evacuate_calls)
            assert evacuated == {uuid: 1 for uuid in servers}
        finally:
            for engine in engines:
                engine.close()
