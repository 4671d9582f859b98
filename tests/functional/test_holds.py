"""Hosts held by fencing, told by two ``recovery-engine`` processes that
share one database, against the fake Nova: a rack (a failure domain,
from Nova's aggregate metadata) whose BMCs are all out of reach is one
ALARM and one event, whichever engine runs each host and however often
each is retried; a host in no domain has an ALARM of its own; nothing
moves."""

import contextlib
import re
import urllib.request

from tests.bmc import free_port
from tests.bmc import write_sections
from tests.fakenova import FakeNova
from tests.functional.engine_process import start_engines

RACK = ["r1-0", "r1-1", "r1-2"]
ALONE = "compute-1"
SPARES = ["compute-2", "compute-3", "compute-4"]
ATTEMPTS = 3


def credentials(path):
    """A BMC for each failed host that no one answers at: a closed
    port, refused at once."""
    return write_sections(path, {host: {
        "driver": "redfish", "address": f"http://127.0.0.1:{free_port()}",
        "username": "admin", "password": "secret"}
        for host in [*RACK, ALONE]})


def alarms(engines):
    return [line for engine in engines
            for line in engine.log.read_text().splitlines()
            if "ALARM" in line]


def holds_counted(engine):
    url = f"http://127.0.0.1:{engine.port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    return sum(float(n) for n in re.findall(
        r"^recovery_fencing_holds_total\{[^}]*\} (\S+)$", text, re.M))


def test_a_rack_whose_bmcs_are_out_of_reach_is_one_alarm(tmp_path):
    with FakeNova(evacuation_latency=0.05) as nova:
        for host in [*RACK, ALONE, *SPARES]:
            nova.add_compute(host)
            nova.add_server(f"{host}-vm", host)
        nova.add_aggregate("rack-1", RACK,
                           metadata={"failure_domain": "rack-1"})
        for host in [*RACK, ALONE]:
            nova.fail_host(host)
        config = credentials(tmp_path / "fencing.ini")
        engines = start_engines(
            2, tmp_path, nova.endpoint, f"sqlite:///{tmp_path}/s.sqlite",
            extra=f"retry_max_attempts = {ATTEMPTS}\n\n"
                  f"[fencing]\ncredentials_file = {config}\n"
                  f"timeout = 1\nattempts = 1\npoll_interval = 0.2\n")
        try:
            uuids = [engines[0].post_host_down(host)
                     for host in [*RACK, ALONE]]
            ended = [engines[0].wait_status(uuid, "failed", "finished",
                                             timeout=120)
                     for uuid in uuids]
            assert {n["status"] for n in ended} == {"failed"}
            with contextlib.closing(engines[0].store()) as store:
                held = [e for e in store.events(kinds=["held"])
                        if e.notification_uuid is None]
            counted = sum(holds_counted(engine) for engine in engines)
            told = alarms(engines)
        finally:
            for engine in engines:
                engine.close()
        assert nova.evacuate_calls == []
    # One ALARM for the rack, naming its three hosts, and one for the
    # host alone: not one per host, nor one per attempt or engine.
    assert len(told) == 2, told
    [rack] = [line for line in told if "failure domain rack-1" in line]
    assert "its hosts whose failure is being recovered: r1-0, r1-1, " \
           "r1-2." in rack
    [alone] = [line for line in told if "failure domain" not in line]
    assert f"ALARM: {ALONE} could not be proved off: " in alone
    [domain] = [e for e in held if e.subject == "rack-1"]
    assert domain.message in rack
    # Each host's hold recorded once, for every engine to read.
    assert sorted(e.subject for e in held) == sorted(
        [*RACK, ALONE, "rack-1"])
    assert counted == 4 * ATTEMPTS
