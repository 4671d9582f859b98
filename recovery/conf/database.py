"""``[database]`` options: where notifications and the journal live.

The options of server databases are oslo.db's own, under the names every
OpenStack service uses; only those recovery honours are registered.
"""

import copy

from oslo_config import cfg
from oslo_db import options as oslo_db_options

GROUP = "database"

# oslo.db's options that shape recovery's connections (recovery/db/
# connection.py); its others do not apply here.
_OSLO_DB = ("mysql_sql_mode", "mysql_wsrep_sync_wait",
            "connection_recycle_time", "max_pool_size", "max_overflow",
            "pool_timeout", "max_retries", "retry_interval")

OPTS = [
    cfg.StrOpt(
        "connection",
        default="sqlite:////var/lib/recovery/recovery.sqlite",
        secret=True,
        help="SQLAlchemy URL of the store that holds notifications, step "
             "progress and the per-instance journal. The default SQLite "
             "file suits one engine; its directory must exist and be "
             "writable, and its schema is created and upgraded on first "
             "use. Several engines share a server database: "
             "postgresql+psycopg://user:password@host/recovery "
             "(PostgreSQL 13 or newer) or "
             "mysql+pymysql://user:password@host/recovery (MariaDB 10.6+, "
             "MySQL 8). Its schema is created and upgraded only by "
             "'recovery db upgrade'.",
    ),
    cfg.FloatOpt(
        "busy_timeout",
        default=30.0,
        min=0,
        help="Seconds to wait for another process (the engine, or a "
             "'recovery' command) to finish writing to an SQLite store "
             "before giving up.",
    ),
    cfg.FloatOpt(
        "statement_timeout",
        default=10.0,
        min=1,
        help="Server databases: the longest wait, in seconds, to connect, "
             "for one statement, or for a row lock; and, on PostgreSQL "
             "and MariaDB (not MySQL 8, which has no such limit), how "
             "long the server keeps a transaction that its client left "
             "idle (an engine that froze) before ending it and releasing "
             "its locks. Recovery's transactions take milliseconds.",
    ),
] + [copy.deepcopy(opt) for opt in oslo_db_options.database_opts
     if opt.name in _OSLO_DB]
# An engine started before its database waits for it, its API answering
# 503, rather than exit after oslo.db's 10 attempts: an operator's reboot
# brings the database and the engines up in any order.
_RETRIES = next(opt for opt in OPTS if opt.name == "max_retries")
_RETRIES.default = -1


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(OPTS, group=GROUP)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [(GROUP, OPTS)]
