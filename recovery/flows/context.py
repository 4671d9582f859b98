"""What every step of a host recovery shares."""

import dataclasses
import datetime
from collections.abc import Callable

from oslo_config import cfg

from recovery.concurrency import Clock
from recovery.flows.watcher import EvacuationWatcher
from recovery.nova import Nova
from recovery.probe import Probe
from recovery.results import Recorder


@dataclasses.dataclass(frozen=True)
class DrainSettings:
    """A host drain's options ([host_drain])."""

    max_parallel: int
    max_per_host: int
    migration_timeout: float
    # True, False or "auto", as Nova's os-migrateLive takes it.
    block_migration: bool | str
    live_migratable_pci_aliases: frozenset[str]
    disable_reason: str

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts) -> "DrainSettings":
        group = conf.host_drain
        block = {"true": True, "false": False}.get(group.block_migration,
                                                   "auto")
        return cls(max_parallel=group.max_parallel,
                   max_per_host=group.max_per_host,
                   migration_timeout=group.migration_timeout,
                   block_migration=block,
                   live_migratable_pci_aliases=frozenset(
                       group.live_migratable_pci_aliases),
                   disable_reason=group.disable_reason)


@dataclasses.dataclass(frozen=True)
class Settings:
    """The options of one run, read from the config when the run starts.
    The defaults live with the options alone (``recovery.conf``)."""

    threads: int
    evacuate_all_instances: bool
    ha_metadata_key: str
    # Restart priority and its phases ([host_failure] priority_*).
    priority_metadata_key: str
    default_priority: int
    priority_phases: bool
    phase_timeout: float
    ignore_error_instances: bool
    disable_reason: str
    lock_reason: str
    evacuation_timeout: float
    state_change_timeout: float
    poll_interval: float
    # How long after it was sent a request whose outcome is unknown may
    # still reach Nova: [nova] timeout + late_request_margin.
    late_request_window: float
    service_down_time: float
    host_return_timeout: float
    default_recovery_method: str
    add_reserved_host_to_aggregate: bool
    # The instance-failure flow ([instance_failure]).
    process_all_instances: bool
    instance_lock_reason: str
    instance_recovery_timeout: float
    max_restarts_per_window: int
    restart_window: float
    # The process-failure flow ([process_failure]).
    process_disable_reason: str
    # The detector's liveness probe ([detector]), None when not set.
    liveness_probe: Probe | None
    # How the engines' probe views are read, as the fast path reads
    # them: seconds silent ([detector] silence_window), how recent a view
    # must be, and how recently an engine must have been seen to count
    # as live ([engine] lease_seconds). The evidence rule's.
    silence_window: float
    views_fresh: float
    engine_lease: float
    drain: DrainSettings

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts) -> "Settings":
        group = conf.host_failure
        return cls(
            threads=conf.host_failure_recovery_threads,
            evacuate_all_instances=group.evacuate_all_instances,
            ha_metadata_key=group.ha_enabled_instance_metadata_key,
            priority_metadata_key=group.priority_metadata_key,
            default_priority=group.default_priority,
            priority_phases=group.priority_phases,
            phase_timeout=group.phase_timeout,
            ignore_error_instances=group.ignore_instances_in_error_state,
            disable_reason=group.service_disable_reason,
            lock_reason=group.lock_reason,
            evacuation_timeout=group.evacuation_timeout,
            state_change_timeout=group.state_change_timeout,
            poll_interval=group.poll_interval,
            late_request_window=((conf.nova.timeout or 0)
                                 + conf.nova.late_request_margin),
            service_down_time=conf.safety.service_down_time,
            host_return_timeout=conf.safety.host_return_timeout,
            default_recovery_method=group.default_recovery_method,
            add_reserved_host_to_aggregate=(
                group.add_reserved_host_to_aggregate),
            process_all_instances=(
                conf.instance_failure.process_all_instances),
            instance_lock_reason=conf.instance_failure.lock_reason,
            instance_recovery_timeout=conf.instance_failure.recovery_timeout,
            max_restarts_per_window=(
                conf.instance_failure.max_restarts_per_window),
            restart_window=conf.instance_failure.restart_window,
            process_disable_reason=conf.process_failure.disable_reason,
            liveness_probe=Probe.from_conf(conf),
            silence_window=conf.detector.silence_window,
            # As the fast path's look (engine.fast_path: fresh).
            views_fresh=max(conf.detector.silence_window,
                            2 * conf.detector.poll_interval,
                            3 * conf.detector.probe_interval),
            engine_lease=conf.engine.lease_seconds,
            drain=DrainSettings.from_conf(conf))


def _never() -> bool:
    return False


@dataclasses.dataclass(frozen=True)
class Env:
    """The collaborators of a flow: Nova, time, who hears progress, the
    engine's one watcher of evacuations, and whether the process is
    shutting down (no instance starts then)."""

    nova: Nova
    clock: Clock
    settings: Settings
    recorder: Recorder
    watcher: EvacuationWatcher
    stopping: Callable[[], bool] = _never

    def late_request_left(self, sent: datetime.datetime) -> float:
        """Seconds during which a request sent at ``sent``, whose outcome
        is unknown, may still reach Nova (``late_request_window`` after
        it); zero or less once it cannot."""
        return (self.settings.late_request_window
                - (self.clock.now() - sent).total_seconds())
