"""``[metrics]`` options: Prometheus metrics of ``recovery-engine``."""

from oslo_config import cfg

GROUP = "metrics"

OPTS = [
    cfg.BoolOpt(
        "enabled",
        default=True,
        help="Serve Prometheus metrics at /metrics.",
    ),
    cfg.HostAddressOpt(
        "host",
        help="Serve /metrics on this address (with port) instead of the "
             "notification API's. Either way, /metrics is readable "
             "without a token only when its address is loopback; "
             "otherwise it takes the API's auth_strategy (keystone or "
             "token).",
    ),
    cfg.PortOpt(
        "port",
        default=9468,
        help="Port of /metrics when host is set.",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(OPTS, group=GROUP)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [(GROUP, OPTS)]
