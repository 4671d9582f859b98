"""The metrics' own rules, and the dashboard and alert rules shipped in
etc/ against the metrics that exist."""

import datetime
import json
import pathlib
import re

import prometheus_client
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from recovery.db.store import open_store
from recovery.fencing.fencer import DeviceKind
from recovery.metrics import METRICS
from recovery.metrics import InstanceOutcomes
from recovery.metrics import Metrics
from recovery.notification import Kind
from recovery.notification import Status
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import Phase

ETC = pathlib.Path(__file__).resolve().parents[2] / "etc"
NOW = datetime.datetime(2026, 11, 25, 10, 0, tzinfo=datetime.timezone.utc)


def sample(name: str, **labels: str) -> float:
    return METRICS.registry.get_sample_value(name, labels) or 0.0


def result(uuid: str, outcome: Outcome | None, phase: Phase,
           seconds: float | None = None) -> InstanceResult:
    done = None if seconds is None else NOW + datetime.timedelta(
        seconds=seconds)
    return InstanceResult(uuid=uuid, name=uuid, source_host="compute-1",
                          original_state="active", outcome=outcome,
                          phase=phase, method="auto", started_at=NOW,
                          finished_at=done)


def test_each_outcome_counts_once_when_the_instance_is_done():
    def recovered() -> float:
        return sample("recovery_instances_total", outcome="recovered",
                      method="auto")

    before = recovered()
    timed = sample("recovery_instance_recovery_seconds_count")
    listener = InstanceOutcomes()
    # The outcome is known before the unlock: not yet done.
    listener.instance_changed(result("i-1", Outcome.RECOVERED,
                                     Phase.UNLOCKING))
    assert recovered() == before
    for _ in range(2):
        listener.instance_changed(result("i-1", Outcome.RECOVERED,
                                         Phase.DONE, seconds=12.5))
    assert recovered() == before + 1
    assert sample("recovery_instance_recovery_seconds_count") == timed + 1
    # Skipped where it is; failed: counted, not timed.
    skipped = sample("recovery_instances_total", outcome="skipped",
                     method="auto")
    listener.instance_changed(result("i-2", Outcome.SKIPPED,
                                     Phase.PENDING))
    listener.instance_changed(result("i-3", Outcome.FAILED, Phase.DONE,
                                     seconds=3))
    assert sample("recovery_instances_total", outcome="skipped",
                  method="auto") == skipped + 1
    assert sample("recovery_instance_recovery_seconds_count") == timed + 1


def test_a_fencing_device_s_attempt_counts_by_kind_and_result():
    def count(kind, result):
        return sample("recovery_fencing_device_results_total", kind=kind,
                      result=result)

    cases = [(DeviceKind.POWER, False, False, "unreachable"),
             (DeviceKind.POWER, False, True, "failed"),
             (DeviceKind.STORAGE, True, True, "proved"),
             (DeviceKind.MESSAGE, False, True, "failed")]
    before = [count(kind, result) for kind, _, _, result in cases]
    for kind, proved, reached, _ in cases:
        METRICS.fencing_device_done(kind, proved=proved, reached=reached)
    assert [count(kind, result) for kind, _, _, result in cases] == [
        n + 1 for n in before]


def exposition(tmp_path) -> list:
    """Every sample a process exports once each metric has been used,
    the store's included."""
    metrics = Metrics()
    store = open_store(f"sqlite:///{tmp_path}/m.sqlite")
    try:
        store.add(type="COMPUTE_HOST", kind=Kind.HOST_FAILURE,
                  hostname="compute-1", generated_time=NOW,
                  payload={"event": "STOPPED"}, origin="api",
                  status=Status.NEW, now=NOW)
        store.engine_seen("engine-1:1", "engine-1", 1)
        metrics.watch_store(store)
        # A labelled metric shows only once it has a child.
        metrics.instance_done("recovered", "auto", 1.0)
        with metrics.nova_call("server.evacuate"):
            pass
        metrics.holds.labels("window").inc()
        metrics.fencing.labels("redfish", "off").inc()
        metrics.fencing_device_results.labels("storage", "proved").inc()
        metrics.fencing_holds.labels("unreachable").inc()
        metrics.renewals.labels("renewed").inc()
        metrics.detector_hosts.labels("up").set(1)
        metrics.failures_tolerated.labels("segment-1").set(1)
        text = prometheus_client.generate_latest(metrics.registry).decode()
    finally:
        store.close()
    return [s for family in text_string_to_metric_families(text)
            for s in family.samples]


def exposed(tmp_path) -> set[str]:
    return {s.name for s in exposition(tmp_path)}


def used_in(text: str) -> set[str]:
    return set(re.findall(r"\brecovery_[a-z_]+", text))


@pytest.mark.parametrize("path", ["grafana/recovery-dashboard.json",
                                  "prometheus/recovery-alerts.yml"])
def test_the_shipped_dashboard_and_alerts_use_metrics_that_exist(
        tmp_path, path):
    text = (ETC / path).read_text()
    parsed = json.loads(text) if path.endswith(".json") else (
        yaml.safe_load(text))
    assert parsed
    names = used_in(text)
    assert names, f"{path} uses no metric"
    assert names <= exposed(tmp_path), names - exposed(tmp_path)


def test_the_alerts_cover_what_the_operator_must_hear():
    rules = yaml.safe_load(
        (ETC / "prometheus/recovery-alerts.yml").read_text())
    alerts = {r["alert"]: r["expr"] for group in rules["groups"]
              for r in group["rules"]}
    assert "recovery_instances_total" in alerts["RecoveryInstanceFailed"]
    assert "recovery_brake_engaged" in alerts["RecoveryBrakeEngaged"]
    assert "recovery_engine_silent_seconds" in alerts[
        "RecoveryEngineNotSeen"]


def test_no_metric_has_a_per_instance_label(tmp_path):
    labels = {name for s in exposition(tmp_path) for name in s.labels}
    assert labels <= {"outcome", "method", "kind", "result", "gate",
                      "reason", "driver", "state", "type", "status",
                      "engine", "le", "cause", "path", "segment"}, labels
