"""The drain flow in-process, on the real Nova facade over HTTP to the
fake Nova: a run resumed from its journal follows the migration an
earlier run sent, and each migration's end is counted in the metrics."""

import dataclasses

import pytest

from recovery import exception
from recovery.concurrency import Clock
from recovery.concurrency import ThreadTaskPool
from recovery.flows import drain_host
from recovery.metrics import METRICS
from recovery.nova import load_nova
from recovery.results import LIVE_MIGRATION
from recovery.results import InstanceResult
from recovery.results import Phase
from tests.fakenova import FakeNova
from tests.functional.test_nova_facade import admin_token_conf
from tests.unit.fakes import ListRecorder
from tests.unit.fakes import make_env

HOST = "compute-1"


def env_for(fake):
    clock = Clock()
    return make_env(load_nova(admin_token_conf(fake), clock), clock,
                    ListRecorder(), poll_interval=0.05,
                    state_change_timeout=10.0)


def counted(status):
    return METRICS.registry.get_sample_value(
        "recovery_live_migrations_total", {"status": status}) or 0.0


def test_a_resumed_drain_follows_what_the_last_one_sent():
    # Migrations slow enough to be running still when the drain resumes.
    with FakeNova(evacuation_latency=1.0) as fake:
        for host in (HOST, "compute-2"):
            fake.add_compute(host)
        uuid = fake.add_server("vm", HOST)
        env = env_for(fake)
        # The earlier run journaled the instance, sent its request, and
        # stopped before it saw the migration end.
        env.nova.live_migrate(uuid, None, "auto")
        earlier = InstanceResult(uuid=uuid, name="vm", source_host=HOST,
                                 original_state="active",
                                 method=LIVE_MIGRATION,
                                 phase=Phase.MIGRATING, migration_floor=0)
        report = drain_host(env, HOST, journal=[earlier],
                            pool_factory=ThreadTaskPool)
        assert report.succeeded, report.to_dict()
        # Not even a request Nova would refuse (the task is taken): one.
        assert [r["path"] for r in fake.requests
                if r["action"] == "os-migrateLive"] == [
            f"/v2.1/servers/{uuid}/action"]
        assert fake.server(uuid)["host"] == "compute-2"


def test_each_migration_s_end_is_counted(fake_nova):
    for host in (HOST, "compute-2"):
        fake_nova.add_compute(host)
    fine = fake_nova.add_server("fine", HOST)
    bad = fake_nova.add_server("bad", HOST)
    fake_nova.set_live_migration_outcome(bad, "failed")
    before = {s: counted(s) for s in ("completed", "failed")}
    report = drain_host(env_for(fake_nova), HOST,
                        pool_factory=ThreadTaskPool)
    outcomes = {r.uuid: r.outcome.value for r in report.instances}
    assert outcomes == {fine: "recovered", bad: "failed"}
    assert counted("completed") - before["completed"] == 1
    assert counted("failed") - before["failed"] == 2


def test_a_drain_that_stops_before_its_migrations_is_interrupted(fake_nova):
    """The process is shutting down: no migration starts, and the run
    ends interrupted (it resumes from its journal), not finished."""
    for host in (HOST, "compute-2"):
        fake_nova.add_compute(host)
    fake_nova.add_server("vm", HOST)
    env = dataclasses.replace(env_for(fake_nova), stopping=lambda: True)
    with pytest.raises(exception.Interrupted, match="stopped while "
                       "draining compute-1; the rest resumes"):
        drain_host(env, HOST, pool_factory=ThreadTaskPool)
    assert fake_nova.live_migrate_calls == []
