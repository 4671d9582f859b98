"""``[database]`` options: where notifications and the journal live."""

from oslo_config import cfg

GROUP = "database"

OPTS = [
    cfg.StrOpt(
        "connection",
        default="sqlite:////var/lib/recovery/recovery.sqlite",
        secret=True,
        help="SQLAlchemy URL of the store that holds notifications, step "
             "progress and the per-instance journal. The default SQLite "
             "file suits one engine; its directory must exist and be "
             "writable. The schema is created and upgraded on first use.",
    ),
    cfg.FloatOpt(
        "busy_timeout",
        default=30.0,
        min=0,
        help="Seconds to wait for another process (the engine, or a "
             "'recovery' command) to finish writing to an SQLite store "
             "before giving up.",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(OPTS, group=GROUP)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [(GROUP, OPTS)]
