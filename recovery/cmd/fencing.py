"""``recovery fencing check HOST``: a dry run of a host's fencing.

Each device of each of the host's levels is asked what it answers
without fencing: ``monitor`` and ``status`` for a fence agent, the power
state for the built-in drivers. Nothing is ever powered off. Loading the
settings checks them first (every parameter against its agent's
metadata), so a mistake in the credentials file is reported here, one
line each, before any device is asked. Run it after every change to the
credentials file.
"""

import argparse
import dataclasses
import json
from typing import Any

import prettytable
from oslo_config import cfg

from recovery.concurrency import Clock
from recovery.exception import ConfigError
from recovery.fencing import load_fencing


def add_parser(commands: Any) -> None:
    """Register ``fencing`` with the top-level parser's subcommands."""
    parser = commands.add_parser(
        "fencing", help="Check a host's fencing devices, without fencing.",
        description="The fencing settings of a host ([fencing] and its "
                    "credentials file).")
    actions = parser.add_subparsers(dest="action", required=True)
    check = actions.add_parser(
        "check", help="Dry-run a host's fencing levels.",
        description="Check the settings, then ask each device of each of "
                    "the host's levels what it answers without fencing "
                    "(fence agents: monitor and status; redfish and ipmi: "
                    "the power state). Never a power-off. Exit status 0 "
                    "when every device answered, 1 when one did not, 2 "
                    "when the settings are wrong or the host has no "
                    "fencing.")
    check.add_argument("host", help="Service host name, as Nova knows it.")
    check.add_argument("--format", choices=("table", "json"),
                       default="table")


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
