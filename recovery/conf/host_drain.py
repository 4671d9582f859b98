"""``[host_drain]`` options: live-migrating every instance off a host
that is still up ('recovery host-drain')."""

from oslo_config import cfg

GROUP = "host_drain"

OPTS = [
    cfg.IntOpt(
        "max_parallel",
        default=4,
        min=1,
        mutable=True,
        help="Live migrations a drain runs at once, at most. Each host, "
             "the drained one and each destination, takes at most "
             "max_per_host of them. As many again are sent to wait in the "
             "drained host's nova-compute queue, which starts the next "
             "one the moment one ends.",
    ),
    cfg.IntOpt(
        "max_per_host",
        default=1,
        min=1,
        mutable=True,
        help="Live migrations a drain runs at once from or to one host. "
             "Keep it at most nova-compute's own [DEFAULT] "
             "max_concurrent_live_migrations (1 by default): Nova runs "
             "that many and queues the others (a drain queues as many "
             "again as it runs), and a queued migration counts against "
             "migration_timeout.",
    ),
    cfg.FloatOpt(
        "migration_timeout",
        default=1800.0,
        min=1.0,
        mutable=True,
        help="Seconds one live migration may take, from the request until "
             "Nova's migration record says it completed, before the drain "
             "reports it failed. The migration is not aborted: it may "
             "still complete, and a later drain sees it.",
    ),
    cfg.StrOpt(
        "block_migration",
        default="auto",
        choices=[("auto", "Nova decides, from whether the instance's disks "
                          "are on storage both hosts share"),
                 ("true", "always copy the local disks"),
                 ("false", "never copy disks, where instance disks are "
                           "not on shared storage and block migration is "
                           "not allowed: instances with an image-backed "
                           "root, ephemeral or swap disk are reported, not "
                           "migrated")],
        mutable=True,
        help="Whether live migrations copy the instances' local disks.",
    ),
    cfg.ListOpt(
        "live_migratable_pci_aliases",
        default=[],
        mutable=True,
        help="The PCI aliases (nova.conf [pci] alias) declared "
             "live_migratable to Nova. An instance whose flavor asks for "
             "any other alias (pci_passthrough:alias) is reported as not "
             "live-migratable, before anything is tried, as Nova's "
             "conductor would refuse it.",
    ),
    cfg.FloatOpt(
        "health_interval",
        default=0.0,
        min=0.0,
        mutable=True,
        help="Seconds between two reads of each host's hardware health "
             "from its Redfish BMC (the System's Status Health and "
             "HealthRollup, the worse of the two), by recovery-engine; 0 "
             "(the default) reads none. A host whose health goes from OK "
             "to a state in drain_on_health is drained, under the "
             "brakes. Only hosts whose fencing has a Redfish device are "
             "read (fence agents and IPMI report no health). Of several "
             "engines on one database, the first live one by name reads.",
    ),
    cfg.ListOpt(
        "drain_on_health",
        default=["Critical"],
        item_type=cfg.types.String(choices=["Warning", "Critical"]),
        mutable=True,
        help="The health states that start a drain of a host that was OK. "
             "Add Warning to drain on the first sign (a lost redundant "
             "power supply, say); at the default a Warning is recorded as "
             "an event and nothing moves.",
    ),
    cfg.IntOpt(
        "max_drains",
        default=1,
        min=1,
        mutable=True,
        help="Drains the engine starts on health that may run at once; "
             "a host that degrades meanwhile waits for the next read.",
    ),
    cfg.FloatOpt(
        "bring_back_after",
        default=0.0,
        min=0.0,
        mutable=True,
        help="With [detector] auto_host_return: once a recovered host has "
             "heartbeated again for this many seconds (and for the "
             "detector's grace_period), its automatic return also "
             "live-migrates back the instances its failure evacuated, as "
             "'recovery host-return --bring-back' does. 0 (the default): "
             "the return brings nothing back; the instances stay where "
             "they were evacuated to.",
    ),
    cfg.StrOpt(
        "disable_reason",
        default="Drained by recovery: live-migrating its instances away",
        mutable=True,
        help="Reason recorded on a drained host's nova-compute service, "
             "which a drain disables before its first migration so that "
             "nothing new lands on it. The host stays disabled; "
             "'openstack compute service set --enable' brings it back.",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(OPTS, group=GROUP)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [(GROUP, OPTS)]
