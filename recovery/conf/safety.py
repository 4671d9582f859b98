"""``[safety]`` options: the gates before any evacuation.

A host that Nova still hears from is never evacuated unless it was just
fenced; these options add the engine-wide brakes on top.
"""

from oslo_config import cfg

GROUP = "safety"

OPTS = [
    cfg.FloatOpt(
        "service_down_time",
        default=60.0,
        min=1.0,
        mutable=True,
        help="Set this to Nova's [DEFAULT] service_down_time. A compute "
             "service that is forced down hides its heartbeats from its "
             "'state'; recovery still treats it as alive while its last "
             "heartbeat (updated_at) is younger than this, measured "
             "against the newest heartbeat of any Nova service, so the "
             "clocks of recovery and Nova need not agree.",
    ),
    cfg.IntOpt(
        "max_failed_hosts_percent",
        default=50,
        min=0,
        max=100,
        mutable=True,
        help="Mass-failure brake. When more than this percentage of the "
             "nova-compute services are down or in recovery at once (not "
             "counting the failure domains down as a whole, see "
             "failure_domain_key), the engine starts no host recovery: "
             "that many failures at once is more likely a network "
             "partition or a control-plane fault than dead hosts. Held "
             "notifications wait, with the verdict as their message, and "
             "run once the share drops. 100 turns the brake off (not "
             "recommended).",
    ),
    cfg.StrOpt(
        "failure_domain_key",
        default="failure_domain",
        mutable=True,
        help="The metadata key on Nova host aggregates that names a "
             "host's failure domain: a rack or a power feed, e.g. "
             "'openstack aggregate set --property failure_domain=rack-12 "
             "rack-12'. A domain of two hosts or more whose every host "
             "is down or in recovery is one event: its hosts leave the "
             "percentage brake, and the per-window cap counts the domain "
             "once. A host in no such aggregate is a domain of its own. "
             "Empty: no domains; every host counts alone.",
    ),
    cfg.IntOpt(
        "max_failed_domains",
        default=1,
        min=0,
        mutable=True,
        help="With more than this many failure domains down as a whole at "
             "once, the mass-failure brake holds every host recovery: "
             "silence across many domains is more likely a network "
             "partition than as many independent losses. 0 holds as soon "
             "as any domain is down as a whole.",
    ),
    cfg.IntOpt(
        "max_host_recoveries_per_window",
        default=10,
        min=1,
        mutable=True,
        help="At most this many host recoveries start in any "
             "window_seconds; a failure domain down as a whole counts "
             "once, however many hosts it has. The rest wait in the order "
             "they arrived; none is dropped.",
    ),
    cfg.FloatOpt(
        "window_seconds",
        default=60.0,
        min=1.0,
        mutable=True,
        help="The window of max_host_recoveries_per_window, in seconds.",
    ),
    cfg.FloatOpt(
        "recheck_interval",
        default=30.0,
        min=1.0,
        mutable=True,
        help="Seconds before a notification held by the mass-failure "
             "brake is looked at again.",
    ),
    cfg.FloatOpt(
        "host_return_timeout",
        default=600.0,
        min=1.0,
        mutable=True,
        help="Seconds a host return waits for the host's nova-compute to "
             "heartbeat again and to complete the evacuations away from "
             "it. Restart nova-compute on the repaired host first.",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(OPTS, group=GROUP)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [(GROUP, OPTS)]
