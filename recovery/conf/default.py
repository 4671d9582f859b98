"""``[DEFAULT]`` options."""

from oslo_config import cfg

OPTS = [
    cfg.StrOpt(
        "concurrency_backend",
        default="eventlet",
        choices=[("eventlet", "green threads on a monkey-patched process; "
                              "the instance pool is a GreenPool"),
                 ("threading", "native threads; eventlet is never "
                               "imported")],
        help="What recovery and recovery-engine run their tasks on. Read "
             "at start, before anything else is imported (a restart "
             "changes it); the environment variable "
             "RECOVERY_CONCURRENCY_BACKEND wins over it.",
    ),
    cfg.IntOpt(
        "host_failure_recovery_threads",
        mutable=True,
        default=3,
        min=1,
        help="Number of instances of one failed host recovered at the same "
             "time. Each runs lock, evacuate, confirm, restore and unlock on "
             "its own task of a pool of this size. Raise it to recover large "
             "hosts faster; Nova's conductor and scheduler bear the load.",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(OPTS)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [("DEFAULT", OPTS)]
