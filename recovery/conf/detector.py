"""``[detector]`` options: recovery-engine watching Nova's compute
services by itself, with no monitor on the computes."""

from oslo_config import cfg

GROUP = "detector"

OPTS = [
    cfg.BoolOpt(
        "enabled",
        default=False,
        mutable=True,
        help="Watch Nova's nova-compute services and recover a host whose "
             "service stays down, with no notification from a monitor. "
             "Only the hosts of a failover segment, or matching 'hosts', "
             "are watched; a host is evacuated only once it is proved "
             "off (fencing, or 'liveness_probe'), unless "
             "trust_nova_heartbeat is set. Switched at SIGHUP.",
    ),
    cfg.FloatOpt(
        "poll_interval",
        default=1.0,
        min=0.1,
        mutable=True,
        help="Seconds between two looks at Nova's compute services (one "
             "request for every host, the census). The fast path judges "
             "a heartbeat's age at each look, so it is one look late at "
             "most.",
    ),
    cfg.FloatOpt(
        "grace_period",
        default=30.0,
        min=0,
        mutable=True,
        help="Seconds a host must stay down, without one heartbeat in "
             "between, before it is failed. Nova already waits its "
             "service_down_time before it reports a service down; this "
             "is on top, so that a host that flaps is never recovered.",
    ),
    cfg.BoolOpt(
        "fast_path",
        default=True,
        mutable=True,
        help="Fail a watched host within seconds, without waiting for "
             "Nova to report it down: when its nova-compute's last "
             "heartbeat is older than nova_report_interval + "
             "heartbeat_margin, it has been silent on the liveness probe "
             "for silence_window, and a majority of the live engines see "
             "it silent too. It is then fenced (powered off and read "
             "back Off) before anything moves. Only for hosts with a "
             "fencing driver, and with liveness_probe set; other hosts "
             "take the slow path (Nova's down state, then grace_period).",
    ),
    cfg.FloatOpt(
        "nova_report_interval",
        default=10.0,
        min=1,
        mutable=True,
        help="Nova's [DEFAULT] report_interval: how often each "
             "nova-compute writes its heartbeat. Set it as Nova's is.",
    ),
    cfg.FloatOpt(
        "heartbeat_margin",
        default=1.0,
        min=0,
        mutable=True,
        help="Seconds past nova_report_interval after which a heartbeat "
             "is stale, for the fast path: room for a late report and "
             "for timestamps that Nova's database keeps to the second.",
    ),
    cfg.FloatOpt(
        "probe_interval",
        default=1.0,
        min=0.1,
        mutable=True,
        help="For the fast path, seconds between two liveness probes of "
             "each watched host (each probe tries every liveness_probe "
             "port at once, for at most probe_timeout or probe_interval, "
             "whichever is shorter).",
    ),
    cfg.FloatOpt(
        "silence_window",
        default=3.0,
        min=0,
        mutable=True,
        help="For the fast path, seconds a host must have been silent on "
             "every probe before it may be failed; a host whose link "
             "flaps for less is never failed.",
    ),
    cfg.ListOpt(
        "hosts",
        default=[],
        mutable=True,
        help="fnmatch patterns (compute-*) of the hosts to watch besides "
             "the hosts of failover segments. An operator says which "
             "hosts may be recovered automatically; by default, only "
             "segment hosts.",
    ),
    cfg.ListOpt(
        "liveness_probe",
        default=[],
        mutable=True,
        item_type=cfg.types.Integer(min=1, max=65535),
        help="TCP ports (for example 22,16509) tried on a failed host's "
             "address. A host that answers on any of them (a connection "
             "accepted or refused: its network stack runs) is alive: it "
             "is not evacuated, and its nova-compute service is disabled "
             "as in a process failure. A host with no fencing driver is "
             "evacuated only when none answers. Empty: no probe.",
    ),
    cfg.FloatOpt(
        "probe_timeout",
        default=2.0,
        min=0.1,
        mutable=True,
        help="Seconds to wait for each port of the liveness probe.",
    ),
    cfg.DictOpt(
        "probe_addresses",
        default={},
        mutable=True,
        help="host:address pairs for the liveness probe, for hosts whose "
             "name does not resolve to the address to probe (the "
             "management network). A host on several networks may have "
             "several addresses, joined by '+' "
             "(compute-1:10.0.0.5+10.1.0.5): it is silent only when it "
             "is silent on every one of them. Other hosts are probed at "
             "the address their name resolves to.",
    ),
    cfg.BoolOpt(
        "auto_host_return",
        default=False,
        mutable=True,
        help="Bring a recovered host back (the host-return flow, as for a "
             "COMPUTE_HOST STARTED notification) once its nova-compute "
             "has heartbeated again for grace_period. Off: an operator or "
             "a monitor says when a repaired host returns.",
    ),
    cfg.BoolOpt(
        "trust_nova_heartbeat",
        default=False,
        mutable=True,
        help="Evacuate a detected host with neither fencing nor a liveness "
             "probe, on Nova's word alone. Nova's heartbeat is one "
             "process's: if only nova-compute died, the guests still run, "
             "and evacuating them runs them twice (on shared storage, "
             "their disks are corrupted). Set it only if you accept that.",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(OPTS, group=GROUP)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [(GROUP, OPTS)]
