"""``recovery segment ...`` and ``recovery host ...``: failover segments
and their hosts, edited in the store directly (recovery-engine need not
run), with the same rules as the API.

Input is checked with the API's schemas, so both accept the same; a host
is added only once Nova knows it; an edit that would change a recovery in
flight is refused (``InUse``).
"""

import argparse
from collections.abc import Callable
from typing import Any

from oslo_config import cfg

from recovery.api import validation
from recovery.api.catalog import SegmentCatalog
from recovery.cmd import output
from recovery.concurrency import Clock
from recovery.db.segments import RECOVERY_METHODS
from recovery.db.store import open_conf_store
from recovery.nova import load_nova

Action = Callable[[cfg.ConfigOpts, SegmentCatalog, argparse.Namespace],
                  None]


def _format(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("table", "json"),
                        default="table",
                        help="Output format (default: table).")


def add_parsers(commands: Any) -> None:
    """Register ``segment`` and ``host`` with the top-level parser's
    subcommands."""
    _segment_parsers(commands)
    _host_parsers(commands)


def _segment_parsers(commands: Any) -> None:
    parser = commands.add_parser(
        "segment", help="Failover segments: groups of hosts and how their "
                        "failures are recovered (Masakari's).")
    actions = parser.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", help="Create a segment.")
    create.add_argument("name")
    create.add_argument("--recovery-method", required=True,
                        choices=RECOVERY_METHODS)
    create.add_argument("--description")
    create.add_argument("--service-type", default="compute",
                        help="Default: compute.")
    create.add_argument("--disabled", action="store_true",
                        help="Record its hosts' notifications without "
                             "acting on them.")
    _format(create)
    _format(actions.add_parser("list", help="List segments, newest first."))
    show = actions.add_parser("show", help="One segment.")
    show.add_argument("segment", help="Name or uuid.")
    _format(show)
    update = actions.add_parser(
        "update", help="Change a segment; refused while one of its hosts "
                       "is being recovered.")
    update.add_argument("segment", help="Name or uuid.")
    update.add_argument("--name")
    update.add_argument("--description")
    update.add_argument("--recovery-method", choices=RECOVERY_METHODS)
    update.add_argument("--service-type")
    enabled = update.add_mutually_exclusive_group()
    enabled.add_argument("--enable", dest="enabled", action="store_const",
                         const=True, help="Act on its hosts' failures.")
    enabled.add_argument("--disable", dest="enabled", action="store_const",
                         const=False, help="Record its hosts' "
                                           "notifications only.")
    _format(update)
    delete = actions.add_parser(
        "delete", help="Delete a segment and its hosts; refused while one "
                       "of its hosts is being recovered.")
    delete.add_argument("segment", help="Name or uuid.")


def _host_parsers(commands: Any) -> None:
    parser = commands.add_parser(
        "host", help="The hosts of a failover segment.")
    actions = parser.add_subparsers(dest="action", required=True)
    create = actions.add_parser(
        "create", help="Add a compute host to a segment (Nova must know "
                       "it).")
    _segment_and_host(create)
    create.add_argument("--reserved", action="store_true",
                        help="A spare that reserved_host recoveries "
                             "evacuate to.")
    create.add_argument("--on-maintenance", action="store_true",
                        help="Record its notifications without acting on "
                             "them.")
    create.add_argument("--type", default="COMPUTE",
                        help="Default: COMPUTE.")
    create.add_argument("--control-attributes", default="")
    _format(create)
    listing = actions.add_parser("list", help="The hosts of a segment.")
    listing.add_argument("segment", help="Name or uuid.")
    _format(listing)
    show = actions.add_parser("show", help="One host.")
    _segment_and_host(show)
    _format(show)
    update = actions.add_parser(
        "update", help="Change a host; refused while a host of its segment "
                       "is being recovered.")
    _segment_and_host(update)
    update.add_argument("--reserved", action=argparse.BooleanOptionalAction,
                        help="A spare for reserved_host recoveries, or "
                             "not.")
    update.add_argument("--maintenance", dest="on_maintenance",
                        action=argparse.BooleanOptionalAction,
                        help="On maintenance (its notifications are "
                             "recorded, not acted on), or not.")
    _format(update)
    delete = actions.add_parser(
        "delete", help="Remove a host from its segment; refused while a "
                       "host of the segment is being recovered.")
    _segment_and_host(delete)


def _segment_and_host(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("segment", help="Segment name or uuid.")
    parser.add_argument("host", help="Host name (as in 'openstack compute "
                                     "service list') or uuid.")


def run(conf: cfg.ConfigOpts, args: argparse.Namespace) -> None:
    ACTIONS[args.command, args.action](conf, open_conf_store(conf), args)


def _changes(args: argparse.Namespace, names: tuple[str, ...],
             options: str) -> dict[str, Any]:
    """The fields given on the command line: at least one (``options``
    names them for the error)."""
    changes = {n: getattr(args, n) for n in names
               if getattr(args, n) is not None}
    if not changes:
        raise validation.Invalid(f"nothing to change: give {options}")
    return changes


# -- segments ----------------------------------------------------------------
def segment_create(conf: cfg.ConfigOpts, store: SegmentCatalog,
                   args: argparse.Namespace) -> None:
    data = validation.segment({"segment": {
        "name": args.name, "recovery_method": args.recovery_method,
        "description": args.description, "service_type": args.service_type,
        "enabled": not args.disabled}}, create=True)
    item = store.create_segment(now=Clock().now(), **data)
    print(output.render_segment(item, args.format))


def segment_list(conf: cfg.ConfigOpts, store: SegmentCatalog,
                 args: argparse.Namespace) -> None:
    print(output.render_segments(store.list_segments(), args.format))


def segment_show(conf: cfg.ConfigOpts, store: SegmentCatalog,
                 args: argparse.Namespace) -> None:
    print(output.render_segment(store.get_segment(args.segment),
                                args.format))


def segment_update(conf: cfg.ConfigOpts, store: SegmentCatalog,
                   args: argparse.Namespace) -> None:
    changes = validation.segment({"segment": _changes(
        args, ("name", "description", "recovery_method", "service_type",
               "enabled"),
        "--name, --description, --recovery-method, --service-type, "
        "--enable or --disable")}, create=False)
    item = store.update_segment(args.segment, changes, Clock().now())
    print(output.render_segment(item, args.format))


def segment_delete(conf: cfg.ConfigOpts, store: SegmentCatalog,
                   args: argparse.Namespace) -> None:
    item = store.get_segment(args.segment)
    store.delete_segment(item.uuid)
    print(f"Deleted failover segment {item.name} ({item.uuid}) and its "
          f"hosts")


# -- hosts -------------------------------------------------------------------
def host_create(conf: cfg.ConfigOpts, store: SegmentCatalog,
                args: argparse.Namespace) -> None:
    data = validation.host({"host": {
        "name": args.host, "type": args.type,
        "control_attributes": args.control_attributes,
        "reserved": args.reserved, "on_maintenance": args.on_maintenance}},
        create=True)
    segment = store.get_segment(args.segment)
    clock = Clock()
    # Raises UnknownHost for a name Nova does not know.
    load_nova(conf, clock).get_compute_service(data["name"])
    item = store.create_host(segment.uuid, now=clock.now(), **data)
    print(output.render_host(item, segment, args.format))


def host_list(conf: cfg.ConfigOpts, store: SegmentCatalog,
              args: argparse.Namespace) -> None:
    segment = store.get_segment(args.segment)
    print(output.render_hosts(store.list_hosts(segment.uuid), segment,
                              args.format))


def host_show(conf: cfg.ConfigOpts, store: SegmentCatalog,
              args: argparse.Namespace) -> None:
    segment = store.get_segment(args.segment)
    print(output.render_host(store.get_host(segment.uuid, args.host),
                             segment, args.format))


def host_update(conf: cfg.ConfigOpts, store: SegmentCatalog,
                args: argparse.Namespace) -> None:
    changes = _changes(args, ("reserved", "on_maintenance"),
                       "--[no-]reserved or --[no-]maintenance")
    segment = store.get_segment(args.segment)
    item = store.update_host(segment.uuid, args.host, changes, Clock().now())
    print(output.render_host(item, segment, args.format))


def host_delete(conf: cfg.ConfigOpts, store: SegmentCatalog,
                args: argparse.Namespace) -> None:
    segment = store.get_segment(args.segment)
    item = store.get_host(segment.uuid, args.host)
    store.delete_host(segment.uuid, item.uuid)
    print(f"Removed host {item.name} from failover segment {segment.name}")


ACTIONS: dict[tuple[str, str], Action] = {
    ("segment", "create"): segment_create,
    ("segment", "list"): segment_list,
    ("segment", "show"): segment_show,
    ("segment", "update"): segment_update,
    ("segment", "delete"): segment_delete,
    ("host", "create"): host_create,
    ("host", "list"): host_list,
    ("host", "show"): host_show,
    ("host", "update"): host_update,
    ("host", "delete"): host_delete,
}
