"""What ``recovery-engine`` exports to Prometheus (``/metrics``), through
the prometheus-client library.

The engine's parts report to the one ``METRICS`` of the process as
things happen (a Nova request answered, an instance recovered, a host
fenced); what the store knows (notifications by status, each engine's
runs, the arming switch) is read from it when Prometheus scrapes, so
every engine that shares a database exports the same counts.

Labels stay few: no instance, host or notification ever is one.
"""

import time
from collections.abc import Callable
from collections.abc import Iterator
from typing import Any

import prometheus_client
from prometheus_client import core
from prometheus_client.registry import Collector

from recovery.concurrency import Lock
from recovery.results import InstanceResult
from recovery.results import Outcome
from recovery.results import Phase

PREFIX = "recovery"
# An instance comes back in seconds to minutes; a host, up to an hour.
INSTANCE_BUCKETS = (1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800)
HOST_BUCKETS = (5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600)
NOVA_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
# The brake's reasons: Nova's view (the gates), then the probes' (the
# detector's fast path).
NOVA_BRAKE_REASONS = ("all_down", "too_many_down", "many_domains")
BRAKE_REASONS = (*NOVA_BRAKE_REASONS, "silent_probes")
# From the last heartbeat to the failure stored: a heartbeat interval and
# the fast path's margins, up to Nova's service_down_time and the grace.
DETECTION_BUCKETS = (5, 10, 11, 12, 13, 15, 20, 30, 60, 90, 120, 300)
DETECTOR_HOLDS = ("isolated", "no_agreement")
FENCING_BUCKETS = (0.5, 1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120)


class Metrics:
    """Every metric of the process, in its own registry."""

    def __init__(self) -> None:
        self.registry = prometheus_client.CollectorRegistry()
        # By subject, in the order /metrics lists them.
        self._add_recovery_metrics()
        self._add_nova_metrics()
        self._add_gate_metrics()
        self._add_fencing_metrics()
        self._add_engine_metrics()
        self._add_detector_metrics()
        self._add_capacity_metrics()

    def _counter(self, name: str, doc: str,
                 labels: tuple[str, ...] = ()) -> prometheus_client.Counter:
        return prometheus_client.Counter(f"{PREFIX}_{name}", doc, labels,
                                         registry=self.registry)

    def _gauge(self, name: str, doc: str,
               labels: tuple[str, ...] = ()) -> prometheus_client.Gauge:
        return prometheus_client.Gauge(f"{PREFIX}_{name}", doc, labels,
                                       registry=self.registry)

    def _histogram(self, name: str, doc: str, buckets: tuple[float, ...],
                   labels: tuple[str, ...] = ()
                   ) -> prometheus_client.Histogram:
        return prometheus_client.Histogram(f"{PREFIX}_{name}", doc, labels,
                                           buckets=buckets,
                                           registry=self.registry)

    def _add_recovery_metrics(self) -> None:
        """Instances and hosts recovered."""
        self.instances = self._counter(
            "instances", "Instances that got an outcome, by outcome "
            "(recovered, failed, skipped) and recovery method.",
            ("outcome", "method"))
        self.live_migrations = self._counter(
            "live_migrations", "Live migrations a drain or a bring-back "
            "sent (or followed), by how Nova's migration record ended: "
            "completed, error, failed, cancelled.", ("status",))
        self.instance_seconds = self._histogram(
            "instance_recovery_seconds", "From an instance's lock to its "
            "outcome, for recovered instances.", INSTANCE_BUCKETS)
        self.host_seconds = self._histogram(
            "host_recovery_seconds", "One attempt of a host failure's "
            "recovery by this engine, from its start to its end.",
            HOST_BUCKETS)
        self.bus_dropped = self._counter(
            "bus_dropped", "Notifications for the message bus dropped: "
            "its queue was full (the bus down or slow).")

    def _add_nova_metrics(self) -> None:
        """Nova's API calls and the rate limiter in front of them."""
        self.nova_requests = self._counter(
            "nova_requests", "Nova API calls (each retry counts), by kind "
            "and result.", ("kind", "result"))
        self.nova_seconds = self._histogram(
            "nova_request_seconds", "Latency of Nova API calls, "
            "rate-limiter wait included, by kind.", NOVA_BUCKETS,
            ("kind",))
        self.rate_limited = self._gauge(
            "nova_rate_limiter_waiting", "Nova requests waiting for their "
            "turn under [nova] max_requests_per_second.")
        self.rate_limit_wait = self._counter(
            "nova_rate_limiter_wait_seconds", "Time Nova requests spent "
            "waiting for their turn.")

    def _add_gate_metrics(self) -> None:
        """The safety gates: the per-window cap and the brake."""
        self.holds = self._counter(
            "gate_holds", "Host recoveries held back by a safety gate "
            "(window: the per-window cap; brake: the mass-failure brake), "
            "one per look.", ("gate",))
        self.brake = self._gauge(
            "brake_engaged", "1 while the mass-failure brake holds host "
            "recoveries, by reason (all_down: every compute looks down; "
            "too_many_down: over max_failed_hosts_percent; silent_probes: "
            "over max_failed_hosts_percent of the hosts silent on this "
            "engine's probes, so its fast path holds).", ("reason",))
        for reason in BRAKE_REASONS:
            self.brake.labels(reason).set(0)

    def _add_fencing_metrics(self) -> None:
        self.fencing = self._counter(
            "fencing_attempts", "Host fencing attempts, by driver and "
            "result (off: verified powered off).", ("driver", "result"))
        self.fencing_devices = self._histogram(
            "fencing_device_seconds", "Seconds each fencing device took to "
            "prove a host off or to fail, by level, device (its name in "
            "the credentials file) and result (proved, failed).",
            FENCING_BUCKETS, ("level", "device", "result"))
        self.fencing_device_results = self._counter(
            "fencing_device_results", "Fencing device attempts, by what "
            "the device proves (kind: power, message, storage) and result "
            "(proved; unreachable: it never answered at all, as a BMC "
            "that lost its power with its host; failed: any other "
            "failure).", ("kind", "result"))
        self.fencing_holds = self._counter(
            "fencing_holds", "Host-failure attempts held by fencing: "
            "nothing proved the host off, so nothing moved. One per "
            "attempt, by cause (unreachable: every power device out of "
            "reach; bmc_answered, probe_answered, no_probe, no_agreement, "
            "ceph_talks: the evidence a storage-only fence lacked; "
            "fence_failed: any other failure).", ("cause",))

    def _add_engine_metrics(self) -> None:
        """The engine's runs, their leases and its main loop."""
        self.in_flight = self._gauge(
            "host_recoveries_in_flight", "Runs (host failures, host "
            "returns, instance and process failures) this engine is "
            "running.")
        self.leases = self._gauge(
            "leases_held", "Runs whose lease this engine holds and renews.")
        self.renewals = self._counter(
            "lease_renewals", "Renewals of this engine's run leases (every "
            "third of [engine] lease_seconds), by result (renewed, lost, "
            "store_unavailable).", ("result",))
        self.leases_lost = self._counter(
            "leases_lost", "Run leases this engine lost (one ran out, or "
            "another engine took its run over); it touches Nova no more "
            "for that run.")
        self.heartbeat = self._gauge(
            "engine_loop_heartbeat_timestamp_seconds", "When this engine's "
            "main loop last turned (Unix time).")

    def _add_detector_metrics(self) -> None:
        self.detector_hosts = self._gauge(
            "detector_hosts", "Hosts the detector watches, by state at its "
            "last poll (up; suspect: down within grace_period; down: past "
            "it, failed or left alone).", ("state",))
        self.detection_seconds = self._histogram(
            "detection_seconds", "From a failed host's last heartbeat (on "
            "this engine's clock) to its failure stored by this engine's "
            "detector, by path (fast: stale heartbeat, silent probe and "
            "agreement; slow: Nova's down state and grace_period).",
            DETECTION_BUCKETS, ("path",))
        self.detector_holds = self._counter(
            "detector_holds", "Times the detector's fast path held, by "
            "cause (isolated: this engine sees most hosts silent; "
            "no_agreement: too few engines see a host silent).", ("cause",))
        for cause in DETECTOR_HOLDS:
            self.detector_holds.labels(cause)

    def _add_capacity_metrics(self) -> None:
        self.failures_tolerated = self._gauge(
            "failures_tolerated", "Host failures each failover segment can "
            "absorb (the detector's watched hosts: segment '(watched "
            "hosts)'), the most loaded hosts failing first, at this "
            "engine's last look ([capacity] refresh_interval).",
            ("segment",))
        self.failures_to_tolerate = self._gauge(
            "failures_to_tolerate", "The operator's target: [capacity] "
            "failures_to_tolerate.")

    # -- what the engine's parts report -----------------------------------
    def nova_call(self, kind: str) -> "_Timed":
        """``with METRICS.nova_call("evacuate") as call: ...``; a call
        that raises counts with its error's class name as its result."""
        return _Timed(self, kind)

    def instance_done(self, outcome: str, method: str | None,
                      seconds: float | None) -> None:
        self.instances.labels(outcome, method or "none").inc()
        if seconds is not None:
            self.instance_seconds.observe(seconds)

    def fencing_device_done(self, kind: str, *, proved: bool,
                            reached: bool) -> None:
        """One fencing device's attempt ended: it proved the host off,
        or failed, or never answered at all (not ``reached``). ``kind``:
        what the device proves (power, message, storage)."""
        result = "proved" if proved else "failed" if reached else (
            "unreachable")
        self.fencing_device_results.labels(kind, result).inc()

    def watch_store(self, store: Any) -> None:
        """Export what ``store`` knows at each scrape: notifications by
        type and status, each engine's runs, the arming switch."""
        self.registry.register(_StoreCollector(store))

    def wsgi_app(self) -> Callable[..., Any]:
        return prometheus_client.make_wsgi_app(self.registry)


class InstanceOutcomes:
    """A run's ``Recorder`` listener: counts each instance's outcome,
    once, with the time it took when it was recovered. The run's tasks
    tell it at once: the lock makes "not counted yet" and "counted" one
    step."""

    def __init__(self) -> None:
        self._lock = Lock()
        self._counted: set[str] = set()

    def instance_changed(self, result: InstanceResult) -> None:
        # An evacuated instance has its outcome before its unlock, and
        # its time once done; a skipped one is done where it is.
        uuid, outcome = result.uuid, result.outcome
        done = result.phase is Phase.DONE or outcome is Outcome.SKIPPED
        if not done or outcome is None:
            return
        with self._lock:
            first = uuid not in self._counted
            self._counted.add(uuid)
        if not first:
            return
        seconds = None
        if (outcome is Outcome.RECOVERED and result.started_at
                and result.finished_at):
            seconds = (result.finished_at
                       - result.started_at).total_seconds()
        METRICS.instance_done(outcome.value, result.method, seconds)

    def step_changed(self, step: str, state: str, message: str) -> None:
        """Steps are not counted."""


class _Timed:
    def __init__(self, metrics: Metrics, kind: str):
        self._metrics, self._kind = metrics, kind

    def __enter__(self) -> "_Timed":
        self._start = time.perf_counter()
        return self

    def __exit__(self, kind: Any, error: Any, tb: Any) -> None:
        result = "ok" if error is None else type(error).__name__
        self._metrics.nova_requests.labels(self._kind, result).inc()
        self._metrics.nova_seconds.labels(self._kind).observe(
            time.perf_counter() - self._start)


class _StoreCollector(Collector):
    """Read at each scrape: one query for the notification counts, one
    for the engines, one for the arming switch."""

    def __init__(self, store: Any):
        self._store = store

    def collect(self) -> Iterator[core.Metric]:
        counts = core.GaugeMetricFamily(
            f"{PREFIX}_notifications", "Notifications in the store, by "
            "type and status.", labels=["type", "status"])
        for (type_, status), n in sorted(
                self._store.count_notifications().items()):
            counts.add_metric([type_, status], n)
        yield counts
        runs = core.GaugeMetricFamily(
            f"{PREFIX}_engine_runs", "Runs each engine sharing the store "
            "holds, by engine (host:pid).", labels=["engine"])
        silent = core.GaugeMetricFamily(
            f"{PREFIX}_engine_silent_seconds", "Seconds since each engine "
            "last reported itself alive, by the database's clock; an "
            "engine reports every third of [engine] lease_seconds.",
            labels=["engine"])
        for engine in self._store.engines():
            runs.add_metric([engine.name], len(engine.runs))
            silent.add_metric([engine.name], engine.silent_for)
        yield runs
        yield silent
        yield core.GaugeMetricFamily(
            f"{PREFIX}_armed", "1 while recoveries may start, 0 while "
            "disarmed ('recovery disarm').",
            value=1 if self._store.arming().armed else 0)


#: The process's metrics: recovery-engine serves them.
METRICS = Metrics()
