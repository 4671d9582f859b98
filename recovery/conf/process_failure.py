"""``[process_failure]`` options: a host's nova-compute process stopped
or started again (PROCESS notifications)."""

from oslo_config import cfg

GROUP = "process_failure"

OPTS = [
    cfg.StrOpt(
        "disable_reason",
        mutable=True,
        deprecated_name="service_disable_reason",
        default="Process failure: nova-compute stopped; disabled by "
                "recovery",
        help="Reason recorded on a host's nova-compute service when "
             "recovery disables it because its process stopped. When the "
             "process starts again, recovery enables the service only if "
             "it is still disabled with this reason: a service disabled "
             "for any other reason (an operator's, or [host_failure] "
             "service_disable_reason) stays disabled. Keep it different "
             "from [host_failure] service_disable_reason.",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(OPTS, group=GROUP)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [(GROUP, OPTS)]
