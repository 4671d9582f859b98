"""The ``recovery`` command end to end: a real subprocess (green, as in
production) driving the fake Nova over real HTTP."""

import collections
import json

import pytest

from tests.fakekeystone import TOKEN as FAKE_TOKEN
from tests.fakekeystone import FakeKeystone
from tests.fakenova import FakeNova
from tests.functional.cli_process import LOCK_REASON
from tests.functional.cli_process import run_cli
from tests.functional.cli_process import start_cli
from tests.functional.cli_process import write_config

FAILED = "compute-1"
MUTATING = {"POST", "PUT", "DELETE"}


def max_concurrent_locks(fake):
    held, peak = set(), 0
    for event in fake.lock_events:
        if event["reason"] == LOCK_REASON and event["event"] == "lock":
            held.add(event["uuid"])
        elif event["event"] == "unlock":
            held.discard(event["uuid"])
        peak = max(peak, len(held))
    return peak


def mutations(fake):
    return [r for r in fake.requests if r["method"] in MUTATING]


@pytest.fixture
def cloud(fake_nova):
    """20 instances on compute-1: one evacuation ends in ERROR, one is
    locked by its owner, one is stopped and one is in error."""
    fake = fake_nova
    for host in ("compute-1", "compute-2", "compute-3"):
        fake.add_compute(host)
    uuids = {}
    for n in range(16):
        uuids[f"vm-{n}"] = fake.add_server(f"vm-{n}", FAILED)
    uuids["doomed"] = fake.add_server("doomed", FAILED)
    uuids["owner-locked"] = fake.add_server(
        "owner-locked", FAILED, locked_by="owner", locked_reason="mine")
    uuids["stopped"] = fake.add_server("stopped", FAILED, vm_state="stopped")
    uuids["broken"] = fake.add_server("broken", FAILED, vm_state="error")
    fake.set_evacuation_outcome(uuids["doomed"], "error")
    return fake, uuids


def test_host_failure_scenario(cloud, tmp_path):
    fake, uuids = cloud
    fake.fail_host(FAILED)
    proc = run_cli(write_config(tmp_path, fake), "host-failure", FAILED,
                   "--format", "json")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    results = {r["name"]: r for r in report["instances"]}
    assert len(results) == 20
    assert report["summary"]["recovered"] == 19
    assert report["summary"]["failed"] == 1
    assert results["doomed"]["outcome"] == "failed"
    assert "evacuation" in results["doomed"]["reason"]
    for name, result in results.items():
        if name == "doomed":
            continue
        assert result["outcome"] == "recovered", result
        server = fake.server(uuids[name])
        assert server["host"] != FAILED
        assert result["dest_host"] == server["host"]
        assert server["vm_state"] == result["original_state"]
        assert result["final_state"] == result["original_state"]
    assert fake.server(uuids["stopped"])["vm_state"] == "stopped"
    assert fake.server(uuids["broken"])["vm_state"] == "error"
    # The owner's lock is still there; nothing is left locked by us.
    owner = fake.server(uuids["owner-locked"])
    assert owner["locked"] and owner["locked_reason"] == "mine"
    for uuid in uuids.values():
        assert fake.server(uuid)["locked_reason"] != LOCK_REASON
    assert not any(e["uuid"] == uuids["owner-locked"]
                   for e in fake.lock_events)
    # The host is out of scheduling, with our reason.
    service = fake.service(FAILED)
    assert service["forced_down"] and service["status"] == "disabled"
    # Every instance evacuated once; never more than 3 at a time.
    assert sorted(c["uuid"] for c in fake.evacuate_calls) == sorted(
        uuids.values())
    assert max_concurrent_locks(fake) == 3


def test_table_and_progress(cloud, tmp_path):
    fake, uuids = cloud
    fake.fail_host(FAILED)
    proc = run_cli(write_config(tmp_path, fake, threads=5), "host-failure",
                   FAILED)
    assert proc.returncode == 1
    assert proc.stdout.startswith(f"Results for host {FAILED}: 19 recovered,"
                                  f" 1 failed")
    assert "| doomed" in proc.stdout
    assert "vm-0 (" in proc.stderr and " evacuating" in proc.stderr
    assert "recovered -> compute-" in proc.stderr
    assert max_concurrent_locks(fake) == 5


def test_dry_run_changes_nothing(cloud, tmp_path):
    fake, _ = cloud
    fake.fail_host(FAILED)
    proc = run_cli(write_config(tmp_path, fake), "host-failure", FAILED,
                   "--dry-run", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["dry_run"] is True
    assert plan["summary"]["planned"] == 20
    assert mutations(fake) == []


def test_priorities_in_the_plan_the_table_and_the_json(fake_nova,
                                                      tmp_path):
    fake = fake_nova
    for host in ("compute-1", "compute-2"):
        fake.add_compute(host)
    for name, priority in (("low", "1"), ("high", "10"), ("odd", "soon")):
        fake.add_server(name, FAILED, metadata={"HA_Priority": priority})
    fake.fail_host(FAILED)
    config = write_config(tmp_path, fake)
    plan = run_cli(config, "host-failure", FAILED, "--dry-run")
    assert plan.returncode == 0, plan.stderr
    rows = {line.split("|")[1].strip(): line
            for line in plan.stdout.splitlines() if line.startswith("| ")}
    assert "| Priority " in rows["Instance"]
    assert "| 10 (phase 1) " in rows["high"]
    assert "phase 1 (priority 10), evacuate (auto)" in rows["high"]
    assert "| 1 (phase 2) " in rows["low"]
    assert "| 0 (phase 3) " in rows["odd"]
    assert "HA_Priority='soon' is not an integer" in rows["odd"]
    proc = run_cli(config, "host-failure", FAILED, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [(r["name"], r["priority"], r["priority_phase"], r["outcome"])
            for r in report["instances"]] == [
        ("high", 10, 1, "recovered"), ("low", 1, 2, "recovered"),
        ("odd", 0, 3, "recovered")]
    assert all("capacity_warning" in r for r in report["instances"])


def test_nothing_to_do(fake_nova, tmp_path):
    fake_nova.add_compute(FAILED)
    fake_nova.fail_host(FAILED)
    proc = run_cli(write_config(tmp_path, fake_nova), "host-failure", FAILED)
    assert proc.returncode == 0
    assert "no instances" in proc.stdout


@pytest.mark.parametrize("case,code,message", [
    ("unknown-host", 2, "compute service list"),
    ("bad-config", 2, "host_failure_recovery_threads"),
    ("unreachable", 1, "Check [nova] endpoint_override or auth_url"),
])
def test_one_line_errors_name_the_fix(fake_nova, tmp_path, case, code,
                                      message):
    fake_nova.add_compute(FAILED)
    config = write_config(tmp_path, fake_nova, retries=0,
                          threads=0 if case == "bad-config" else 3)
    if case == "unreachable":
        fake_nova.stop()
    host = "nope" if case == "unknown-host" else FAILED
    proc = run_cli(config, "host-failure", host)
    assert proc.returncode == code
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_bad_usage_exits_2(tmp_path, fake_nova):
    proc = run_cli(write_config(tmp_path, fake_nova), "host-failure")
    assert proc.returncode == 2


def test_secrets_never_reach_logs(fake_nova, tmp_path):
    fake_nova.add_compute(FAILED)
    fake_nova.add_compute("compute-2")
    fake_nova.add_server("vm", FAILED)
    fake_nova.fail_host(FAILED)
    with FakeKeystone(fake_nova.endpoint) as keystone:
        config = tmp_path / "recovery.conf"
        config.write_text(
            f"[nova]\nauth_type = password\nauth_url = {keystone.url}\n"
            f"username = recovery\npassword = sup3r-s3cret\n"
            f"project_name = admin\nuser_domain_id = default\n"
            f"project_domain_id = default\n\n[database]\n"
            f"connection = sqlite:///{tmp_path}/recovery.sqlite\n")
        proc = run_cli(str(config), "--debug", "host-failure", FAILED)
    assert proc.returncode == 0, proc.stderr
    assert "DEBUG" in proc.stderr
    for secret in ("sup3r-s3cret", FAKE_TOKEN):
        assert secret not in proc.stdout + proc.stderr


def test_missing_auth_option_names_the_fix(tmp_path):
    config = tmp_path / "recovery.conf"
    config.write_text("[nova]\nauth_type = password\n")
    proc = run_cli(str(config), "host-failure", FAILED)
    assert proc.returncode == 2
    assert "[nova] auth options are invalid" in proc.stderr
    assert "auth-url" in proc.stderr or "auth_url" in proc.stderr


def test_runs_are_recorded_and_shown(cloud, tmp_path):
    fake, uuids = cloud
    fake.fail_host(FAILED)
    config = write_config(tmp_path, fake)
    run = run_cli(config, "host-failure", FAILED)
    assert "Recorded as notification" in run.stderr
    listing = run_cli(config, "notifications", "list", "--format", "json")
    [item] = json.loads(listing.stdout)
    assert item["hostname"] == FAILED and item["origin"] == "cli"
    assert item["status"] == "failed"     # "doomed" did not recover
    shown = run_cli(config, "notifications", "show",
                    item["notification_uuid"], "--format", "json")
    body = json.loads(shown.stdout)
    outcomes = {i["uuid"]: i["outcome"] for i in body["instances"]}
    assert outcomes[uuids["doomed"]] == "failed"
    assert outcomes[uuids["vm-0"]] == "recovered"
    assert len(outcomes) == 20
    # The operator's decisions: the claim, the isolation, each instance,
    # the end.
    events = body["events"]
    operator = {e["actor"] for e in events}
    assert len(operator) == 1 and "@" in operator.pop()
    kinds = collections.Counter(e["kind"] for e in events)
    # Every instance is evacuated ("doomed" fails); the run fails too.
    assert kinds == {"claimed": 1, "isolated": 1, "capacity": 1,
                     "evacuating": 20, "recovered": 19, "failed": 2}
    assert events[0]["message"].startswith(
        f"run by hand ('recovery host-failure {FAILED}'): attempt 1")
    assert (events[-1]["subject"], events[-1]["kind"]) == (FAILED, "failed")
    table = run_cli(config, "notifications", "show",
                    item["notification_uuid"])
    assert "step recover-instances: FAILURE" in table.stdout
    missing = run_cli(config, "notifications", "show", "nope")
    assert missing.returncode == 2
    assert "no notification nope" in missing.stderr


def test_host_another_live_process_recovers_is_refused(fake_nova, tmp_path):
    fake = fake_nova
    for host in (FAILED, "compute-2"):
        fake.add_compute(host)
    stuck = fake.add_server("stuck", FAILED)
    fake.set_evacuation_outcome(stuck, "hang")
    fake.fail_host(FAILED)
    config = write_config(tmp_path, fake)
    first = start_cli(config, "host-failure", FAILED)
    try:
        fake.wait_for(lambda: fake.evacuate_calls, timeout=30)
        second = run_cli(config, "host-failure", FAILED)
    finally:
        first.kill()
        first.wait()
    assert second.returncode == 3
    assert f"{FAILED} is being recovered by" in second.stderr


def test_requests_queue_behind_the_rate_cap(fake_nova, tmp_path):
    """8 instances at once would send 16 requests within a few ms; with
    a cap of 10 per second no second sees more than that, and nothing
    fails because of it."""
    fake = fake_nova
    for host in (FAILED, "compute-2"):
        fake.add_compute(host)
    uuids = [fake.add_server(f"vm-{n}", FAILED) for n in range(8)]
    fake.fail_host(FAILED)
    config = write_config(tmp_path, fake, threads=8,
                          extra="[nova]\nmax_requests_per_second = 10\n")
    proc = run_cli(config, "host-failure", FAILED)
    assert proc.returncode == 0, proc.stderr
    assert all(fake.server(u)["host"] == "compute-2" for u in uuids)
    times = sorted(r["time"] for r in fake.requests)
    busiest = max(sum(1 for t in times if start <= t < start + 1.0)
                  for start in times)
    assert busiest <= 11        # 10, and one for the clocks' jitter


def test_confirmation_cost_does_not_grow_per_instance(tmp_path):
    """50 instances in flight at once: one os-migrations request per
    interval serves them all, and confirms them: no instance evacuated
    ACTIVE is read on its own."""
    interval = 0.1
    with FakeNova(evacuation_latency=1.0) as fake:
        for host in (FAILED, "compute-2"):
            fake.add_compute(host)
        uuids = [fake.add_server(f"vm-{n}", FAILED) for n in range(50)]
        fake.fail_host(FAILED)
        config = write_config(tmp_path, fake, threads=50,
                              poll_interval=interval,
                              extra="[nova]\nmax_requests_per_second = 0\n")
        proc = run_cli(config, "host-failure", FAILED)
        requests = fake.requests
    assert proc.returncode == 0, proc.stderr
    evacuates = [r["time"] for r in requests if r["action"] == "evacuate"]
    unlocks = [r["time"] for r in requests if r["action"] == "unlock"]
    start, end = min(evacuates), max(unlocks)
    polls = [r for r in requests if r["path"].endswith("/os-migrations")
             and start <= r["time"] <= end]
    # Polls start an interval apart; when they reach Nova also depends on
    # the machine's load, which can bring two a little closer: a margin
    # of a few, where one poll per instance would be fifty a round.
    assert len(polls) <= (end - start) / interval + 4
    reads = collections.Counter(r["path"].rsplit("/", 1)[1]
                                for r in requests
                                if r["method"] == "GET"
                                and "/servers/" in r["path"]
                                and not r["path"].endswith("/detail"))
    assert len(unlocks) == len(uuids)
    assert reads == {}, proc.stderr
