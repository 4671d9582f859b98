"""``recovery fencing check HOST``: a dry run of a host's fencing.

Each device of each of the host's levels is asked what it answers
without fencing: ``monitor`` and ``status`` for a fence agent, the power
state for the built-in drivers; for a Ceph storage fence, only reads:
its addresses resolve, its keyring, a monitor answers, its caps allow
blocklisting, the blocklist and its pools can be read. Nothing is ever
powered off or blocklisted. Loading the
settings checks them first (every parameter against its agent's
metadata), so a mistake in the credentials file is reported here, one
line each, before any device is asked. Run it after every change to the
credentials file.

``recovery fencing confirm HOST --reason TEXT``: the operator's word
that a failed host is off, when no device can prove it
(``recovery.confirming``), recorded with the local user as its author.
"""

import argparse
import dataclasses
import getpass
import json
from typing import Any

import prettytable
from oslo_config import cfg

from recovery import confirming
from recovery.api import validation
from recovery.concurrency import Clock
from recovery.confirming import Liveness
from recovery.db.store import open_conf_store
from recovery.exception import ConfigError
from recovery.fencing import load_fencing
from recovery.identity import this_process
from recovery.notification import Notification
from recovery.notification import Status
from recovery.nova import load_nova


def add_parser(commands: Any) -> None:
    """Register ``fencing`` with the top-level parser's subcommands."""
    parser = commands.add_parser(
        "fencing", help="Check a host's fencing devices, without fencing; "
                        "confirm a failed host off.",
        description="The fencing settings of a host ([fencing] and its "
                    "credentials file), and an operator's confirmation "
                    "that a host is off.")
    actions = parser.add_subparsers(dest="action", required=True)
    check = actions.add_parser(
        "check", help="Dry-run a host's fencing levels.",
        description="Check the settings, then ask each device of each of "
                    "the host's levels what it answers without fencing "
                    "(fence agents: monitor and status; redfish and ipmi: "
                    "the power state; ceph: its addresses, keyring, "
                    "monitors, caps, blocklist and pools, read only). Never "
                    "a power-off or a blocklisting. Exit status 0 "
                    "when every device answered, 1 when one did not, 2 "
                    "when the settings are wrong or the host has no "
                    "fencing.")
    check.add_argument("host", help="Service host name, as Nova knows it.")
    check.add_argument("--format", choices=("table", "json"),
                       default="table")
    confirm = actions.add_parser(
        "confirm", help="Confirm that a failed host is off.",
        description="Your word, after checking, that the host is "
                    "powered off, for its current failure only, when no "
                    "fencing device can prove it: the held recovery then "
                    "goes on at once, without the fencing proof it waits "
                    "for. Refused while Nova hears from the host or it "
                    "answers the liveness probe ([detector] "
                    "liveness_probe). Recorded as an event, with you as "
                    "its author. Exit status 0 when recorded, 2 when no "
                    "recovery of the host waits for a proof, 3 when "
                    "refused.")
    confirm.add_argument("host", help="Service host name, as Nova knows "
                                      "it.")
    confirm.add_argument("--reason", required=True,
                         help="What you checked, for the record (one "
                              "line, e.g. 'PDU B7 dead, host dark; ticket "
                              "4711').")


def check(conf: cfg.ConfigOpts, args: argparse.Namespace) -> bool:
    """Print what each device answered; whether every one did."""
    fence = load_fencing(conf).for_host(args.host)
    if fence is None:
        raise ConfigError(f"host {args.host} has no fencing: its driver is "
                          f"none ([fencing] driver, credentials_file)")
    checks = fence.check(Clock())
    if args.format == "json":
        print(json.dumps({"host": args.host, "fencing": fence.describe(),
                          "checks": [dataclasses.asdict(c) for c in checks]},
                         indent=2))
    else:
        table = prettytable.PrettyTable(
            ["Level", "Device", "Kind", "Action", "Answered", "Seconds",
             "Answer"])
        table.align = "l"
        for c in checks:
            table.add_row([c.level, c.device, c.kind, c.action,
                           "yes" if c.ok else "NO", f"{c.seconds:.1f}",
                           c.answer])
        print(f"Fencing of {args.host}: {fence.describe()}\n"
              f"{table.get_string()}")
    return all(c.ok for c in checks)


def confirm(conf: cfg.ConfigOpts, args: argparse.Namespace) -> None:
    """Check that the host may be off, record the local user's
    confirmation, and print it."""
    reason = validation.reason(args.reason, "--reason")
    clock = Clock()
    user = getpass.getuser()
    nova = load_nova(conf, clock, user_agent=f"recovery ({this_process()})")
    liveness = Liveness.from_conf(conf, nova)
    store = open_conf_store(conf)
    try:
        done = confirming.confirm(store, liveness, args.host, user, reason,
                                  clock)
        print(_confirmed(done, store.get(done.confirmation.notification_uuid)))
    finally:
        store.close()


def _confirmed(done: confirming.Confirmed, item: Notification) -> str:
    confirmation = done.confirmation
    if item.status is Status.RUNNING:
        goes_on = (f"Its run is in progress on {item.owner}: its Fence "
                   f"step takes the confirmation when its fencing fails")
    else:
        goes_on = (f"The held run goes on at once: recovery-engine takes it "
                   f"up at its next poll ('recovery notifications watch "
                   f"{item.uuid}'), or run it now: 'recovery host-failure "
                   f"{item.hostname}'")
    return (f"Confirmed {confirmation.host} off, for notification "
            f"{item.uuid}\n"
            f"  by:      local user {confirmation.user}\n"
            f"  at:      {confirmation.at:%Y-%m-%d %H:%M:%S} UTC\n"
            f"  reason:  {confirmation.reason}\n"
            f"  checked: {done.checked}\n{goes_on}.")
