"""``[engine]`` options: how ``recovery-engine`` runs notifications."""

from oslo_config import cfg

GROUP = "engine"

OPTS = [
    cfg.IntOpt(
        "max_concurrent_host_recoveries",
        default=8,
        min=1,
        mutable=True,
        help="Host recoveries that run at the same time, each with its own "
             "pool of host_failure_recovery_threads. Two recoveries of one "
             "host never run at once, whatever this says.",
    ),
    cfg.FloatOpt(
        "balance_grace",
        default=3.0,
        min=0,
        mutable=True,
        help="Engines that share a database split the host failures "
             "among the live ones: an engine that runs its share (the "
             "host recoveries running and waiting, divided by the live "
             "engines, rounded up) leaves the next host failure to the "
             "others. One left unclaimed for this many seconds is taken "
             "by any engine with a free slot, so the share of an engine "
             "that died or is slow is never stranded. 0 turns the "
             "balancing off: the first engine to look takes all it has "
             "room for. Instance and process failures, and runs resumed "
             "from another engine, are never left.",
    ),
    cfg.IntOpt(
        "retry_max_attempts",
        default=5,
        min=1,
        mutable=True,
        help="Attempts at a notification before it becomes 'failed'. An "
             "attempt that ends in 'error' (a Nova error, an instance that "
             "did not recover, a host Nova still reports up) is retried; "
             "a retry redoes only what is not done.",
    ),
    cfg.FloatOpt(
        "retry_backoff",
        default=15.0,
        min=0,
        mutable=True,
        help="Seconds before the first retry of a notification in "
             "'error'; each later retry waits twice as long.",
    ),
    cfg.FloatOpt(
        "retry_backoff_max",
        default=300.0,
        min=0,
        mutable=True,
        help="Longest wait between two attempts, in seconds.",
    ),
    cfg.FloatOpt(
        "lease_seconds",
        default=60.0,
        min=5,
        help="A running notification is leased to the process running "
             "it, which renews the lease while it lives. When the lease "
             "runs out (or the process is gone from this host), another "
             "engine, or a restart, resumes it from its journal.",
    ),
    cfg.FloatOpt(
        "graceful_shutdown_timeout",
        default=60.0,
        min=0,
        help="On SIGTERM, seconds to let instances in flight reach a "
             "journaled point, then at most as long for the API's "
             "requests in flight, before exiting. Nothing new starts; "
             "what is left is resumed at the next start. A second "
             "SIGTERM exits at once.",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(OPTS, group=GROUP)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [(GROUP, OPTS)]
