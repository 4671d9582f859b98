"""``[host_failure]`` options: what the flow does and waits for."""

from oslo_config import cfg

GROUP = "host_failure"

OPTS = [
    cfg.BoolOpt(
        "evacuate_all_instances",
        mutable=True,
        default=True,
        help="Evacuate every instance of a failed host. When false, only "
             "instances whose metadata has the key named by "
             "ha_enabled_instance_metadata_key set to 'True' are evacuated "
             "and the others are skipped with a reason. When true, "
             "HA-enabled instances are still evacuated first.",
    ),
    cfg.StrOpt(
        "ha_enabled_instance_metadata_key",
        mutable=True,
        default="HA_Enabled",
        help="Instance metadata key that marks an instance as HA-enabled "
             "(value 'True', case-insensitive).",
    ),
    cfg.BoolOpt(
        "ignore_instances_in_error_state",
        mutable=True,
        default=False,
        help="Skip instances in vm_state error instead of evacuating them. "
             "An evacuated error instance is reset to error afterwards.",
    ),
    cfg.StrOpt(
        "service_disable_reason",
        mutable=True,
        default="Host failure: disabled by recovery",
        help="Reason recorded on the nova-compute service of a failed host "
             "when recovery disables it. Operators see it in "
             "'openstack compute service list --long'.",
    ),
    cfg.StrOpt(
        "lock_reason",
        mutable=True,
        default="Locked by recovery: host-failure evacuation",
        help="Reason recorded on each instance recovery locks while it moves "
             "it. An instance still locked with this reason after a crash "
             "is treated as recovery's own lock and released by the next "
             "run.",
    ),
    cfg.StrOpt(
        "priority_metadata_key",
        mutable=True,
        default="HA_Priority",
        help="Instance metadata key that holds an instance's restart "
             "priority: an integer, higher is recovered first. Instances "
             "without it, or whose value is not an integer, get "
             "default_priority (and their result says why).",
    ),
    cfg.IntOpt(
        "default_priority",
        mutable=True,
        default=0,
        help="Restart priority of an instance whose metadata has no "
             "integer under priority_metadata_key.",
    ),
    cfg.BoolOpt(
        "priority_phases",
        mutable=True,
        default=True,
        help="Recover the instances of one priority as a phase, and start "
             "a phase only when the one before it has finished (each of "
             "its instances recovered or failed), or after phase_timeout. "
             "When false, one pool recovers every instance, highest "
             "priority first, without waiting.",
    ),
    cfg.FloatOpt(
        "phase_timeout",
        mutable=True,
        default=600.0,
        min=1.0,
        help="Seconds a priority phase may run before the next phase "
             "starts anyway (with a warning); the late phase's instances "
             "keep running. The default is two evacuation_timeouts: a "
             "phase slower than that is stuck on a few instances, and "
             "holding every lower priority for them costs more than it "
             "protects.",
    ),
    cfg.StrOpt(
        "default_recovery_method",
        mutable=True,
        default="auto",
        choices=[
            ("auto", "the scheduler picks each destination"),
            ("reserved_host", "evacuate to the segment's reserved hosts"),
            ("auto_priority", "auto, then reserved hosts for the rest"),
            ("rh_priority", "reserved hosts, then auto for the rest"),
        ],
        help="Recovery method of a failed host that is in no failover "
             "segment ('recovery segment ...'). A host in a segment uses "
             "its segment's recovery_method. A host in no segment has no "
             "reserved hosts, so only auto (or the auto part of "
             "auto_priority and rh_priority) can recover its instances.",
    ),
    cfg.BoolOpt(
        "add_reserved_host_to_aggregate",
        mutable=True,
        default=False,
        help="Before evacuating to a reserved host, add it to every host "
             "aggregate of the failed host, so that instances whose "
             "flavors or images need those aggregates fit on it.",
    ),
    cfg.FloatOpt(
        "evacuation_timeout",
        mutable=True,
        deprecated_opts=[cfg.DeprecatedOpt("wait_period_after_evacuation",
                                           group="DEFAULT")],
        default=300.0,
        min=1.0,
        help="Seconds to wait, per instance, from the evacuate call until "
             "Nova shows it on another host in a settled state. The "
             "instance is reported failed when this expires.",
    ),
    cfg.FloatOpt(
        "state_change_timeout",
        mutable=True,
        default=60.0,
        min=1.0,
        help="Seconds to wait for any other Nova state change recovery "
             "makes: a service going down after force-down, an instance "
             "stopping, starting or being reset.",
    ),
    cfg.FloatOpt(
        "poll_interval",
        mutable=True,
        deprecated_opts=[cfg.DeprecatedOpt("verify_interval",
                                           group="DEFAULT")],
        default=0.5,
        min=0.05,
        help="Seconds between two polls of Nova while waiting for a state "
             "change. One poll of the evacuation migrations serves every "
             "instance in flight on every host the process recovers (it "
             "confirms an instance evacuated ACTIVE with no read of its "
             "own), so this does not multiply by the number of instances "
             "or hosts. Polls start this far apart, whatever a request "
             "takes. The default was chosen by measurement on a real "
             "Nova (README, Performance): 1 s took a fifth longer to "
             "recover 30 instances, 0.25 s was no faster than 0.5 s.",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(OPTS, group=GROUP)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [(GROUP, OPTS)]
