"""``[notifications]``: recovery's own setting of its publishing on the
message bus. The bus itself is set with oslo.messaging's options
(``[oslo_messaging_notifications] driver``, ``transport_url``: see
recovery/bus/options.py)."""

from oslo_config import cfg

GROUP = "notifications"

OPTS = [
    cfg.IntOpt(
        "queue_size",
        default=10000,
        min=1,
        help="Notifications held for the message bus while it is down or "
             "slow. Beyond this many they are dropped and counted "
             "(recovery_bus_dropped_total, a bus-dropped event): "
             "publishing never waits, so no recovery does either.",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(OPTS, group=GROUP)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [(GROUP, OPTS)]
