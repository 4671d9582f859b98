"""``[capacity]`` options: how many host failures the cloud can absorb,
and how often the engine looks."""

from oslo_config import cfg

GROUP = "capacity"

OPTS = [
    cfg.IntOpt(
        "failures_to_tolerate",
        default=1,
        min=0,
        mutable=True,
        help="The host failures each failover segment (or the detector's "
             "watched hosts, without segments) must be able to absorb: "
             "with that many of its hosts failed, the most loaded first, "
             "every instance recovery would evacuate still has room, "
             "placed as recovery would place it. Below this, the engine "
             "records a 'capacity-short' event, and "
             "recovery_failures_tolerated{segment} falls under "
             "recovery_failures_to_tolerate (the RecoveryCapacityShort "
             "alert).",
    ),
    cfg.FloatOpt(
        "refresh_interval",
        default=300.0,
        min=0.0,
        mutable=True,
        help="Seconds between two computations of the failures tolerated "
             "by recovery-engine; 0 turns them off. Each costs three "
             "requests to Nova and Placement, and one per 1,000 "
             "instances: 'recovery capacity' shows the same figures.",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(OPTS, group=GROUP)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [(GROUP, OPTS)]
