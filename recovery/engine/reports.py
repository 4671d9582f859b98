"""What a failure the detector sees becomes: a notification of origin
``detector``, stored through the API's intake, and what the detector
needs of the store to decide and write it (``DetectorStore``).

A host failure is named by the host and the last heartbeat Nova holds
for it (``failure_name``), the same for every engine; the store keeps
one notification per name, so one failure gives one notification
whichever engines see it."""

import datetime
import logging
from collections.abc import Mapping
from typing import Protocol

from oslo_config import cfg

from recovery import concurrency
from recovery import exception
from recovery import intake
from recovery import probe
from recovery.census import Census
from recovery.db.control import ProbeViews
from recovery.events import Decision
from recovery.fencing import Fencing
from recovery.metrics import METRICS
from recovery.models import ComputeService
from recovery.notification import DETECTOR
from recovery.notification import Kind

LOG = logging.getLogger(__name__)

HOST_DOWN = {"event": "STOPPED", "host_status": "NORMAL",
             "cluster_status": "OFFLINE"}
PROCESS_DOWN = {"event": "STOPPED", "process_name": "nova-compute"}
HOST_UP = {"event": "STARTED", "host_status": "NORMAL",
           "cluster_status": "ONLINE"}


class DetectorStore(intake.AcceptStore, Protocol):
    """What the detector needs of the store: which hosts are in segments,
    its events, the engines' probe views, and the notifications it
    stores (``intake.accept``)."""

    def segment_host_names(self) -> set[str]: ...

    def add_event(self, decision: Decision,
                  now: datetime.datetime) -> None: ...

    def last_host_failure(self, hostname: str) -> str | None: ...

    def record_probe_views(self, engine: str,
                           silent: Mapping[str, float]) -> None: ...

    def probe_views(self, hosts: list[str], *, window: float,
                    fresh: float, live_within: float) -> ProbeViews: ...


class Reporter:
    """Stores the failures (and returns) the detector decides, once each
    by this engine."""

    def __init__(self, conf: cfg.ConfigOpts, store: DetectorStore,
                 fencing: Fencing, clock: concurrency.Clock,
                 connect: probe.Connect):
        self.conf, self.store, self.fencing = conf, store, fencing
        self.clock, self.connect = clock, connect
        # Failures this engine has dealt with (stored, or found stored).
        self.handled: set[str] = set()

    def returned(self, host: str, waited: float, *,
                 bring_back: bool = False) -> list[str]:
        """A recovered host has heartbeated again for ``waited`` seconds,
        the grace period at least: its host return, if recovery
        recovered it; ``bring_back``: one that brings its instances
        home."""
        failure = self.store.last_host_failure(host)
        if failure is None:
            return []       # not recovered by recovery: not its to return
        detection = f"{host}@return-after@{failure}"
        if detection in self.handled:
            return []
        home = "; its instances are brought back" if bring_back else ""
        return [self.store_one(
            host, Kind.HOST_RETURN,
            {**HOST_UP, "bring_back": True} if bring_back else HOST_UP,
            detection,
            note=f"detected: nova-compute on {host}, recovered by "
                 f"notification {failure}, heartbeats again for "
                 f"{waited:.0f} s{home}")]

    def report(self, census: Census, service: ComputeService,
               detection: str, seconds: float, age: float | None) -> str:
        """Store what the failure of ``service``'s host becomes; return
        the decision."""
        host = service.host
        seen = (f"detected: nova-compute on {host} down for {seconds:.0f} s "
                f"past Nova's service_down_time ({census.describe(service)})")
        liveness = probe.Probe.from_conf(self.conf, self.connect)
        answer = unprobed = None
        if liveness is not None:
            try:
                answer = liveness.answer(host)
            except exception.ProbeFailed as exc:
                LOG.warning("detector: %s", exc)
                unprobed = str(exc)
        if answer is not None:
            return self._alive(service, detection, seen, answer)
        silent = liveness is not None and unprobed is None
        missing = self._missing_proof(host, silent, unprobed)
        if age is not None and missing is None:
            METRICS.detection_seconds.labels("slow").observe(age)
        return self.store_one(host, Kind.HOST_FAILURE, host_down(service),
                              detection, note=seen,
                              ignore=missing and f"{seen}; {missing}")

    def _alive(self, service: ComputeService, detection: str, seen: str,
               answer: str) -> str:
        """nova-compute is down but the host answers its probe: a process
        failure, never a host to evacuate."""
        host = service.host
        # Its own name: the host failure that may follow is another.
        alive = f"{detection}@answers"
        if alive in self.handled or (
                service.is_disabled and service.disabled_reason
                == self.conf.process_failure.disable_reason):
            # A process failure already, and alive still: probed again
            # at each poll, until it falls silent.
            return f"{host} still answers: a process failure"
        LOG.error("ALARM detector: nova-compute on %s is down but the "
                  "host answers (%s): its guests run unmanaged. Not "
                  "evacuated; nova-compute is disabled as a process "
                  "failure. Repair nova-compute on %s", host, answer, host)
        return self.store_one(
            host, Kind.PROCESS, {**PROCESS_DOWN, "liveness": answer}, alive,
            note=f"{seen}; but {answer}: not a dead host, so it is not "
                 f"evacuated; its nova-compute is disabled as a process "
                 f"failure")

    def _missing_proof(self, host: str, silent: bool,
                       unprobed: str | None) -> str | None:
        """Why nothing proves ``host`` off, or None when something does:
        fencing, the probe's silence (``silent``), or trust in Nova."""
        if silent or self.conf.detector.trust_nova_heartbeat:
            return None
        try:
            if self.fencing.for_host(host) is not None:
                return None
        except exception.ConfigError as exc:
            return f"not evacuated: its fencing is misconfigured: {exc}"
        if unprobed is not None:
            return f"not evacuated: {unprobed}"
        return (f"not evacuated: nothing proves {host} is off, and Nova's "
                f"heartbeat is one process's, not the host's. Configure "
                f"fencing for it ([fencing], credentials_file) or [detector] "
                f"liveness_probe; or check that it is off and run "
                f"'recovery host-failure {host}'")

    def store_one(self, host: str, kind: Kind, payload: dict,
                  detection: str, *, note: str,
                  ignore: str | None = None) -> str:
        """Store what ``host``'s failure (or return) is, as a notification
        of ``kind`` (``payload`` says its event); return the decision."""
        try:
            stored = intake.accept(
                self.store, type=kind.type, hostname=host,
                generated_time=self.clock.now(), payload=payload,
                origin=DETECTOR, now=self.clock.now(), note=note,
                detection=detection, ignore=ignore)
        except exception.Duplicate as exc:
            # Another engine stored it, or a monitor reported it.
            self.handled.add(detection)
            return f"{host}: {exc}"
        self.handled.add(detection)
        LOG.warning("detector: %s: notification %s (%s %s, %s): %s",
                    host, stored.uuid, stored.type, payload["event"],
                    stored.status.value, stored.message)
        return f"{host}: notification {stored.uuid} ({stored.status.value})"


def host_down(service: ComputeService) -> dict:
    """A host failure's payload: with the heartbeat it was judged on, so
    that the run refuses to fence a host that heartbeated since."""
    if service.updated_at is None:
        return HOST_DOWN
    return {**HOST_DOWN, "heartbeat": service.updated_at.isoformat()}


def failure_name(service: ComputeService) -> str:
    """The failure's name: the host and the last heartbeat Nova holds for
    it, the same for every engine that sees it."""
    heartbeat = (service.updated_at.isoformat() if service.updated_at
                 else "never")
    return f"{service.host}@{heartbeat}"
