"""``recovery events``: the decision log across notifications, oldest
first. Who decided what, about which host or instance, when and why:
notifications received or ignored, held by a gate, claimed or taken
over, hosts fenced and isolated, instances evacuated, recovered, failed
or skipped, runs ended, the detector's suspects, arming and disarming.
"""

import argparse
import datetime
import re
from typing import Any

from oslo_config import cfg

from recovery.api import validation
from recovery.cmd import output
from recovery.concurrency import Clock
from recovery.db.store import open_conf_store

# A time ago: 90s, 30m, 1h, 2d.
_AGO = re.compile(r"(\d+)([smhd])")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _count(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive "
                                         f"whole number")
    return int(value)


def add_parser(commands: Any) -> None:
    """Register ``events`` with the top-level parser's subcommands."""
    what = ("The decision log: who decided what, about which host or "
            "instance, when and why, across notifications, oldest first.")
    parser = commands.add_parser("events", help=what, description=what)
    parser.add_argument(
        "--since", help="Only events from then on: a time ago (90s, 30m, "
                        "1h, 2d) or an ISO 8601 time (UTC unless it has "
                        "an offset).")
    parser.add_argument("--host", help="Only events about this host: its "
                                       "own, and its notifications'.")
    parser.add_argument("--limit", type=_count,
                        help="Only the last this many.")
    parser.add_argument("--format", choices=("table", "json"),
                        default="table",
                        help="Output format (default: table).")


def since(value: str, now: datetime.datetime) -> datetime.datetime:
    """The time ``--since`` names: ``value`` ago from ``now``, or an ISO
    8601 time (``Invalid`` otherwise)."""
    ago = _AGO.fullmatch(value.strip())
    if ago is None:
        return validation.parse_time(value, "--since")
    return now - datetime.timedelta(
        seconds=int(ago[1]) * _SECONDS[ago[2]])


def run(conf: cfg.ConfigOpts, args: argparse.Namespace) -> int:
    """Print the events; 0, as there is no failure to report."""
    start = None if args.since is None else since(args.since, Clock().now())
    store = open_conf_store(conf)
    try:
        items = store.events(since=start, limit=args.limit, host=args.host)
    finally:
        store.close()
    print(output.render_events(items, args.format))
    return 0
