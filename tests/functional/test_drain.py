"""``recovery host-drain`` as a real process against the fake Nova over
HTTP: live migrations in priority order within their bounds, confirmed
from Nova's records; a refusal for lack of room; a restart in the middle;
a failed migration; a host that dies during its drain."""

import collections
import json

from tests.fakenova import FakeNova
from tests.functional.cli_process import run_cli
from tests.functional.cli_process import start_cli
from tests.functional.cli_process import write_config

HOST = "compute-1"
OTHERS = ("compute-2", "compute-3", "compute-4")
DRAIN = "[host_drain]\nmax_parallel = 4\nmax_per_host = {per_host}\n"


def cloud(latency=0.2):
    fake = FakeNova(evacuation_latency=latency).start()
    for host in (HOST, *OTHERS):
        fake.add_compute(host)
    return fake


def drain_config(tmp_path, fake, per_host=2, extra=""):
    return write_config(tmp_path, fake, extra=DRAIN.format(
        per_host=per_host) + extra)


def calls_per_instance(fake):
    return collections.Counter(c["uuid"] for c in fake.live_migrate_calls)


def drained(fake, uuids):
    return all(fake.server(u)["host"] in OTHERS for u in uuids)


def report(proc):
    return {r["uuid"]: r for r in json.loads(proc.stdout)["instances"]}


def test_fifty_instances_go_in_priority_order_within_the_bounds(tmp_path):
    with cloud() as fake:
        # nova-compute's own limit on the drained host, as recovery's.
        fake.set_max_concurrent_live_migrations(HOST, 2)
        urgent = [fake.add_server(f"db-{n}", HOST,
                                  metadata={"HA_Priority": "100"})
                  for n in range(10)]
        rest = [fake.add_server(f"web-{n}", HOST) for n in range(40)]
        config = drain_config(tmp_path, fake, per_host=2)
        proc = run_cli(config, "host-drain", HOST, "--format", "json")
        assert proc.returncode == 0, proc.stderr
        assert calls_per_instance(fake) == {u: 1 for u in urgent + rest}
        assert drained(fake, urgent + rest)
        order = [c["uuid"] for c in fake.live_migrate_calls]
        assert set(order[:10]) == set(urgent)
        peaks = fake.peak_live_migrations()
        assert max(peaks["source"].values()) <= 2
        assert max(peaks["dest"].values()) <= 2
        assert fake.evacuate_calls == []
        service = fake.service(HOST)
        assert service["status"] == "disabled"
        assert service["disabled_reason"].startswith("Drained by recovery")
        results = report(proc)
        assert {r["outcome"] for r in results.values()} == {"recovered"}
        assert all(r["reason"].startswith(f"live-migrated from {HOST} to ")
                   for r in results.values())


def test_a_drain_without_room_is_refused_before_anything_changes(tmp_path):
    with cloud() as fake:
        for host in OTHERS:
            fake.set_capacity(host, 2)
        uuids = [fake.add_server(f"vm-{n}", HOST) for n in range(8)]
        config = drain_config(tmp_path, fake)
        refused = run_cli(config, "host-drain", HOST)
        assert refused.returncode == 3, refused.stderr
        assert "no room predicted for 2 instance(s)" in refused.stderr
        # Named, the last in drain order (as Nova lists them, newest
        # first, at one priority).
        assert "in recovery order: vm-1, vm-0. Nothing was changed" in (
            refused.stderr)
        assert fake.live_migrate_calls == []
        assert fake.service(HOST)["status"] == "enabled"

        partial = run_cli(config, "host-drain", HOST, "--allow-partial",
                          "--format", "json")
        assert partial.returncode == 0, partial.stderr
        results = report(partial)
        left = [u for u in uuids if results[u]["outcome"] == "skipped"]
        assert len(left) == 2
        assert all(fake.server(u)["host"] == HOST for u in left)
        assert all("--allow-partial" in results[u]["reason"] for u in left)
        assert drained(fake, set(uuids) - set(left))


def test_a_dry_run_predicts_and_changes_nothing(tmp_path):
    with cloud() as fake:
        for n in range(3):
            fake.add_server(f"vm-{n}", HOST)
        shut = fake.add_server("off", HOST, vm_state="stopped")
        config = drain_config(tmp_path, fake)
        proc = run_cli(config, "host-drain", HOST, "--dry-run", "--format",
                       "json")
        assert proc.returncode == 0, proc.stderr
        results = report(proc)
        planned = [r for r in results.values() if r["outcome"] == "planned"]
        assert len(planned) == 3
        assert all(r["dest_host"] in OTHERS for r in planned)
        assert "live-migrates only active and paused" in (
            results[shut]["reason"])
        assert fake.live_migrate_calls == []
        assert fake.service(HOST)["status"] == "enabled"


def test_what_nova_would_refuse_is_reported_before_anything(tmp_path):
    with cloud() as fake:
        vtpm = fake.add_server("tpm", HOST,
                               extra_specs={"hw:tpm_version": "2.0"})
        host_tpm = fake.add_server("tpm-host", HOST, extra_specs={
            "hw:tpm_version": "2.0", "hw:tpm_secret_security": "host"})
        gpu = fake.add_server("gpu", HOST,
                              extra_specs={"pci_passthrough:alias": "a1:1"})
        nic = fake.add_server("nic", HOST,
                              extra_specs={"pci_passthrough:alias": "vf:1"})
        plain = fake.add_server("plain", HOST)
        config = drain_config(
            tmp_path, fake, extra="live_migratable_pci_aliases = vf\n")
        proc = run_cli(config, "host-drain", HOST, "--format", "json")
        assert proc.returncode == 0, proc.stderr
        results = report(proc)
        assert "vTPM" in results[vtpm]["reason"]
        assert "alias a1" in results[gpu]["reason"]
        assert results[vtpm]["outcome"] == results[gpu]["outcome"] == (
            "skipped")
        assert set(calls_per_instance(fake)) == {host_tpm, nic, plain}


def test_a_failed_migration_is_tried_once_more_then_reported(tmp_path):
    with cloud() as fake:
        bad = fake.add_server("bad", HOST)
        good = fake.add_server("good", HOST)
        fake.set_live_migration_outcome(bad, "failed")
        config = drain_config(tmp_path, fake)
        proc = run_cli(config, "host-drain", HOST, "--format", "json")
        assert proc.returncode == 1
        results = report(proc)
        assert results[bad]["outcome"] == "failed"
        assert "ended failed" in results[bad]["reason"]
        assert "tried 2 times" in results[bad]["reason"]
        assert calls_per_instance(fake) == {bad: 2, good: 1}
        assert fake.server(bad)["host"] == HOST
        assert fake.evacuate_calls == []


def test_a_drain_stopped_midway_resumes_without_migrating_twice(tmp_path):
    with cloud(latency=0.5) as fake:
        uuids = [fake.add_server(f"vm-{n}", HOST) for n in range(12)]
        config = drain_config(tmp_path, fake)
        first = start_cli(config, "host-drain", HOST)
        try:
            fake.wait_for(lambda: len(fake.live_migrate_calls) >= 3,
                          timeout=60)
        finally:
            first.kill()
            first.wait()
        started = len(fake.live_migrate_calls)
        assert started < 12
        again = run_cli(config, "host-drain", HOST)
        assert again.returncode == 0, again.stderr
        assert "Resuming the interrupted run" in again.stderr
        assert calls_per_instance(fake) == {u: 1 for u in uuids}
        assert drained(fake, uuids)


def test_a_host_that_dies_during_its_drain_ends_it(tmp_path):
    with cloud() as fake:
        stuck = fake.add_server("stuck", HOST)
        fake.set_live_migration_outcome(stuck, "hang")
        config = drain_config(tmp_path, fake)
        drain = start_cli(config, "host-drain", HOST)
        try:
            fake.wait_for(lambda: fake.live_migrate_calls, timeout=60)
            fake.fail_host(HOST)
            assert drain.wait(timeout=60) == 1
        finally:
            drain.kill()
            drain.wait()
        # The drain holds back no recovery of the failure.
        failure = run_cli(config, "host-failure", HOST)
        assert failure.returncode != 3, failure.stderr


def test_a_host_that_is_down_is_not_drained(tmp_path):
    with cloud() as fake:
        fake.add_server("vm", HOST)
        fake.fail_host(HOST)
        config = drain_config(tmp_path, fake)
        proc = run_cli(config, "host-drain", HOST)
        assert proc.returncode == 3
        assert f"recovery host-failure {HOST}" in proc.stderr
        assert fake.live_migrate_calls == []


def test_a_lost_answer_is_followed_not_sent_again(tmp_path):
    """Nova took the request and the connection dropped before its
    answer: its record is found, and followed."""
    with cloud() as fake:
        uuid = fake.add_server("vm", HOST)
        fake.inject("POST", rf"/servers/{uuid}/action$",
                    action="os-migrateLive", reset=True, after=True)
        proc = run_cli(drain_config(tmp_path, fake), "host-drain", HOST)
        assert proc.returncode == 0, proc.stderr
        assert calls_per_instance(fake) == {uuid: 1}
        assert drained(fake, [uuid])


def test_a_request_nova_never_saw_is_sent_again(tmp_path):
    """The connection dropped before Nova saw the request: no record
    shows within the window a late request could arrive in, so it is
    sent once more."""
    with cloud() as fake:
        uuid = fake.add_server("vm", HOST)
        fake.inject("POST", rf"/servers/{uuid}/action$",
                    action="os-migrateLive", reset=True)
        proc = run_cli(drain_config(tmp_path, fake), "host-drain", HOST)
        assert proc.returncode == 0, proc.stderr
        assert calls_per_instance(fake) == {uuid: 1}
        assert "request lost" in proc.stderr
        assert drained(fake, [uuid])
