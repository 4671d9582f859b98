"""``[instance_failure]`` options: restarting an instance whose guest
died (VM notifications)."""

from oslo_config import cfg

GROUP = "instance_failure"

OPTS = [
    cfg.BoolOpt(
        "process_all_instances",
        mutable=True,
        default=False,
        help="Restart every instance whose guest failed. When false, only "
             "instances whose metadata has the key named by [host_failure] "
             "ha_enabled_instance_metadata_key set to 'True' are "
             "restarted; the notifications of the others are recorded as "
             "ignored, with the reason.",
    ),
    cfg.StrOpt(
        "lock_reason",
        mutable=True,
        default="Locked by recovery: instance-failure restart",
        help="Reason recorded on an instance recovery locks while it "
             "restarts it. An instance still locked with this reason after "
             "a crash is treated as recovery's own lock and released by "
             "the next run. An instance locked with any other reason keeps "
             "its lock. Keep it different from [host_failure] lock_reason.",
    ),
    cfg.FloatOpt(
        "recovery_timeout",
        mutable=True,
        default=300.0,
        min=1.0,
        help="Seconds to wait for each state change of a restart: for "
             "Nova's own task on the instance to end, for the instance to "
             "stop (a clean shutdown alone may take Nova's "
             "shutdown_timeout, 60 s by default, or an image's "
             "os_shutdown_timeout), and for it to be ACTIVE again after "
             "the start. On expiry the notification ends in error and is "
             "retried.",
    ),
    cfg.IntOpt(
        "max_restarts_per_window",
        mutable=True,
        default=3,
        min=1,
        help="Crash-loop brake: when an instance has already been "
             "restarted this many times within restart_window seconds, "
             "its next failure is not restarted (the notification ends "
             "failed, Nova is not called): a guest that keeps dying needs "
             "a person, not another restart.",
    ),
    cfg.FloatOpt(
        "restart_window",
        mutable=True,
        default=3600.0,
        min=0.0,
        help="Seconds over which max_restarts_per_window counts the "
             "restarts of one instance (when each restart started). 0 "
             "turns the crash-loop brake off.",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(OPTS, group=GROUP)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [(GROUP, OPTS)]
