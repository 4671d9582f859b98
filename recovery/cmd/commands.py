"""``recovery``: the operator's command line, run by ``cli.main`` once the
process is green.

Exit codes: 0 every instance recovered (or nothing to do, or the edit
made, or every fencing device answered 'fencing check', or the
confirmation recorded), 1 recovery
failed (an instance failed, fencing failed, or Nova failed or could not
be reached) or a fencing device did not answer 'fencing check', 2 bad
usage or config, an unknown host, segment or notification, invalid
input, a name already taken, or a live entry 'db import-masakari'
left behind, or no recovery waiting for 'fencing confirm', 3
refused for safety (a host that heartbeats, or answers the liveness
probe when confirmed off, one that another live
process is recovering, a drain of a host that is not up or whose
instances would not all find room, a host return while guests still
move away,
recovery disarmed, a segment or host edit while one of the segment's
hosts is being recovered, or 'db contract' while an engine of an older
release is alive), 4 the run 'notifications watch' follows had not
ended within its --timeout.
"""

import argparse
import getpass
import logging
import socket
import sys
from typing import Any

import sqlalchemy as sa
from oslo_config import cfg
from oslo_log import log

from recovery import conf as recovery_conf
from recovery import exception
from recovery.api import validation
from recovery.cmd import capacity
from recovery.cmd import database
from recovery.cmd import events
from recovery.cmd import fencing
from recovery.cmd import live
from recovery.cmd import output
from recovery.cmd import segments
from recovery.cmd import watch
from recovery.cmd.database import MASAKARI_URL_VARIABLE
from recovery.concurrency import Clock
from recovery.db import connection
from recovery.db import masakari_import
from recovery.db import migrate
from recovery.db import revisions
from recovery.db.store import Store
from recovery.db.store import open_conf_store
from recovery.engine import capacity as capacity_check
from recovery.engine import holds
from recovery.engine import runner
from recovery.engine import simulation as game_day
from recovery.notification import Kind
from recovery.notification import Status
from recovery.results import Outcome
from recovery.results import Recorder

LOG = logging.getLogger(__name__)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_REFUSED = 0, 1, 2, 3
EXIT_TIMEOUT = 4
# In --help and in the CLI reference and man page (doc/ext/cli.py), which
# a test holds to the EXIT_* codes above.
EXIT_CODES = f"""exit codes:
  {EXIT_OK}  every selected instance recovered, or there was nothing to do
     (fencing confirm: the confirmation is recorded)
  {EXIT_FAILED}  recovery failed: an instance failed, fencing failed, a wait
     timed out, or Nova failed or could not be reached
  {EXIT_USAGE}  bad usage or configuration, an unknown host, segment or name
     already taken, a live entry db import-masakari left behind, or no
     recovery of the host waiting for fencing confirm
  {EXIT_REFUSED}  refused for safety: Nova still hears from the host (and it
     has no fencing driver; fencing confirm: or it answers the liveness
     probe), another process is recovering it, host-drain: the host
     is not up, or some instances would find no room (without
     --allow-partial), guests
     are still moving away from it (host-return), recovery is
     disarmed, a segment edit would change a recovery in flight, or db
     contract while an engine of an older release is alive
  {EXIT_TIMEOUT}  notifications watch: the run had not ended within --timeout
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="recovery",
        description="Recover the instances of failed Nova compute hosts.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--config-file", action="append", default=None,
        help="Configuration file; may be repeated. Default: oslo.config's "
             "search path (e.g. /etc/recovery/recovery.conf).")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="Log INFO messages on stderr.")
    parser.add_argument("--debug", action="store_true",
                        help="Log DEBUG messages on stderr.")
    commands = parser.add_subparsers(dest="command", required=True)
    # The order here is the order of --help and of the CLI reference.
    _add_host_commands(commands)
    _add_arming_commands(commands)
    _add_notifications_commands(commands)
    segments.add_parsers(commands)
    events.add_parser(commands)
    fencing.add_parser(commands)
    capacity.add_parsers(commands)
    database.add_parsers(commands)
    return parser


def _add_host_commands(commands: argparse._SubParsersAction) -> None:
    """host-failure, host-drain and host-return."""
    host = commands.add_parser(
        "host-failure", help="Evacuate every instance of a failed host.",
        description="Isolate a failed compute host (force-down, disable) "
                    "and evacuate its instances to other hosts.")
    host.add_argument("host", help="Service host name of the failed host, "
                                   "as in 'openstack compute service list'.")
    host.add_argument("--dry-run", action="store_true",
                      help="Print what would be evacuated or skipped, and "
                           "why; change nothing in Nova.")
    host.add_argument("--format", choices=("table", "json"), default="table",
                      help="Result format on stdout (default: table).")
    drain = commands.add_parser(
        "host-drain", help="Live-migrate every instance off a host that is "
                           "still up, and leave it disabled.",
        description="Check that the host is up and that the other hosts "
                    "have room, disable the host, then live-migrate its "
                    "instances, highest restart priority first, at most "
                    "[host_drain] max_parallel at once and max_per_host "
                    "from or to one host. Each migration is confirmed "
                    "from Nova's migration record; one that fails is "
                    "tried once more, then reported. Nothing is ever "
                    "evacuated: the host is alive. An interrupted drain "
                    "resumes where it stopped when run again.")
    drain.add_argument("host", help="Service host name of the host.")
    drain.add_argument("--allow-partial", action="store_true",
                       help="Drain what fits even when some instances are "
                            "predicted to find no room (they stay, "
                            "reported). Without it, a shortfall refuses "
                            "the drain before anything changes.")
    drain.add_argument("--dry-run", action="store_true",
                       help="Print what would be migrated, where to, and "
                            "what would stay and why; change nothing.")
    drain.add_argument("--format", choices=("table", "json"),
                       default="table",
                       help="Result format on stdout (default: table).")
    back = commands.add_parser(
        "host-return", help="Bring a repaired host back into scheduling.",
        description="Wait for the host's restarted nova-compute to "
                    "heartbeat and complete its evacuations, then clear "
                    "force-down, then enable it. Refused while guests "
                    "are still moving away from it.")
    back.add_argument("host", help="Service host name of the host.")
    back.add_argument("--bring-back", action="store_true",
                      help="Then live-migrate back to it the instances its "
                           "last host failure evacuated, those still where "
                           "recovery put them, in priority order within "
                           "the [host_drain] bounds.")
    back.add_argument("--dry-run", action="store_true",
                      help="With --bring-back: print what would come back "
                           "and what would stay, and why; change nothing "
                           "(the host is not returned either).")
    back.add_argument("--format", choices=("table", "json"),
                      default="table",
                      help="Format of the bring-back's results on stdout "
                           "(default: table).")


def _add_arming_commands(commands: argparse._SubParsersAction) -> None:
    """disarm, arm and status."""
    disarm = commands.add_parser(
        "disarm", help="Stop recovery-engine from starting recoveries.",
        description="Notifications are still accepted and recorded, and "
                    "recoveries already running finish; nothing new "
                    "starts until 'recovery arm'.")
    disarm.add_argument("--reason", required=True,
                        help="Why, for the colleagues who will see it in "
                             "'recovery status'.")
    commands.add_parser("arm", help="Let recoveries start again; what "
                                    "waited runs if it is still valid.")
    commands.add_parser("status", help="Armed or disarmed, and the "
                                       "notifications in flight or "
                                       "waiting.")


def _add_notifications_commands(commands: argparse._SubParsersAction
                                ) -> None:
    """notifications list, show and watch."""
    notes = commands.add_parser(
        "notifications", help="Show recorded runs: notifications received "
                              "by recovery-engine and host-failure runs.")
    actions = notes.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="List notifications, newest "
                                              "first.")
    listing.add_argument("--status", help="Only this status (new, running, "
                                          "finished, error, failed, "
                                          "ignored).")
    listing.add_argument("--host", help="Only this host.")
    listing.add_argument("--limit", type=int, default=50,
                         help="At most this many (default: 50).")
    listing.add_argument("--format", choices=("table", "json"),
                         default="table")
    show = actions.add_parser("show", help="One notification with its "
                                           "steps, per-instance results "
                                           "and events.")
    show.add_argument("uuid")
    show.add_argument("--format", choices=("table", "json"),
                      default="table")
    watch.add_parser(actions)


def load_conf(args: argparse.Namespace) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    log.register_options(conf)
    # stdout carries the results; every log line goes to stderr.
    conf.set_default("use_stderr", True)
    conf(args=[], project="recovery", default_config_files=args.config_file)
    if args.debug:
        conf.set_override("debug", True)
    log.setup(conf, "recovery")
    if not (args.verbose or args.debug):
        logging.getLogger().setLevel(logging.WARNING)
    return conf


def host_failure(conf: cfg.ConfigOpts, args: argparse.Namespace) -> int:
    means = runner.Means.load(conf, Clock(), "recovery")
    if args.dry_run:
        report = runner.plan(means, open_conf_store(conf), args.host,
                             output.ProgressPrinter())
    else:
        # The live view on a terminal; a script gets the lines.
        with live.progress(f"host-failure {args.host}", means.clock,
                           sys.stderr,
                           wanted=args.format == "table") as listener:
            report = _recorded_run(conf, means, Kind.HOST_FAILURE,
                                   args.host, listener).report
    render = output.render_json if args.format == "json" else (
        output.render_table)
    print(render(report))
    return EXIT_OK if report.succeeded else EXIT_FAILED


def host_drain(conf: cfg.ConfigOpts, args: argparse.Namespace) -> int:
    means = runner.Means.load(conf, Clock(), "recovery")
    if args.dry_run:
        report = runner.plan_drain(means, args.host,
                                   output.ProgressPrinter())
    else:
        with live.progress(f"host-drain {args.host}", means.clock,
                           sys.stderr,
                           wanted=args.format == "table") as listener:
            report = _recorded_run(
                conf, means, Kind.HOST_DRAIN, args.host, listener,
                options={"allow_partial": args.allow_partial}).report
    render = output.render_json if args.format == "json" else (
        output.render_table)
    print(render(report))
    return EXIT_OK if report.succeeded else EXIT_FAILED


def host_return(conf: cfg.ConfigOpts, args: argparse.Namespace) -> int:
    means = runner.Means.load(conf, Clock(), "recovery")
    if args.dry_run and not args.bring_back:
        raise validation.Invalid("--dry-run is for --bring-back: a host "
                                 "return itself has no dry run")
    render = output.render_json if args.format == "json" else (
        output.render_table)
    if args.dry_run:
        print(render(runner.plan_bring_back(
            means, open_conf_store(conf), args.host,
            output.ProgressPrinter())))
        return EXIT_OK
    if args.bring_back:
        # The live view on a terminal, as a drain's; a script gets lines.
        with live.progress(f"host-return {args.host} --bring-back",
                           means.clock, sys.stderr,
                           wanted=args.format == "table") as listener:
            result = _recorded_run(conf, means, Kind.HOST_RETURN, args.host,
                                   listener, options={"bring_back": True})
    else:
        result = _recorded_run(conf, means, Kind.HOST_RETURN, args.host,
                               output.ProgressPrinter())
    if result.report is not None:
        print(render(result.report))
    print(result.message, file=sys.stderr if result.report else sys.stdout)
    return EXIT_OK if result.status is Status.FINISHED else EXIT_FAILED


def _recorded_run(conf: cfg.ConfigOpts, means: runner.Means, kind: Kind,
                  host: str, listener: Recorder,
                  options: dict[str, Any] | None = None) -> runner.Attempt:
    """Run ``kind`` for ``host`` as a notification in the store,
    journaled like the engine's: an interrupted run is resumed by the next
    one (or by recovery-engine), and shows in 'recovery notifications'.
    Refused while recovery is disarmed."""
    store = open_conf_store(conf)
    arming = store.arming()
    if not arming.armed:
        raise exception.Disarmed(
            f"recovery is disarmed (by {arming.changed_by} at "
            f"{arming.changed_at:%Y-%m-%d %H:%M:%S} UTC: {arming.reason}); "
            f"run 'recovery arm' first")
    # Who decides, in the events: the operator.
    with runner.by_hand(store, kind, host, seconds=conf.engine.lease_seconds,
                        clock=means.clock, actor=_operator(),
                        options=options) as run:
        if run.resumed:
            print(f"Resuming the interrupted run {run.notification.uuid}",
                  file=sys.stderr)
        result = run.attempt(means, listener)
    # The command is the operator's retry: it records no 'error' for the
    # engine to retry on its own.
    run.finish(Status.FINISHED if result.status is Status.FINISHED
               else Status.FAILED, result.message)
    if result.error is not None:
        if (kind is Kind.HOST_FAILURE
                and isinstance(result.error, exception.FencingError)):
            # The operator's run: one alarm line, as the engine's first.
            LOG.error("%s", holds.alarm(host, result.error, retried=False))
        raise result.error
    uuid = run.notification.uuid
    print(f"Recorded as notification {uuid}: 'recovery notifications show "
          f"{uuid}'", file=sys.stderr)
    return result


def capacity_view(conf: cfg.ConfigOpts, args: argparse.Namespace) -> int:
    nova = runner.Means.load(conf, Clock(), "recovery").nova
    view = capacity_check.capacity_view(conf, open_conf_store(conf), nova,
                                        Clock())
    print(capacity.render_view(view, args.format))
    return EXIT_OK


def simulate(conf: cfg.ConfigOpts, args: argparse.Namespace) -> int:
    nova = runner.Means.load(conf, Clock(), "recovery").nova
    simulation = game_day.simulate(conf, open_conf_store(conf), nova,
                                   Clock(), args.fail, _operator())
    print(capacity.render_simulation(simulation, args.format))
    return EXIT_OK


def _operator() -> str:
    """The operator running this command: user@host."""
    return f"{getpass.getuser()}@{socket.gethostname()}"


def set_arming(conf: cfg.ConfigOpts, args: argparse.Namespace) -> int:
    armed = args.command == "arm"
    arming = open_conf_store(conf).set_arming(
        armed, _operator(),
        None if armed else args.reason, Clock().now())
    print(output.render_arming(arming))
    return EXIT_OK


def status(conf: cfg.ConfigOpts, args: argparse.Namespace) -> int:
    store = open_conf_store(conf)
    print(output.render_arming(store.arming()))
    print(f"\n{output.render_engines(store.engines())}")
    for state in (Status.RUNNING, Status.NEW, Status.ERROR):
        items = store.list_notifications(filters={"status": state.value})
        print(f"\n{state.value}: {len(items)}")
        if items:
            print(output.render_notifications(items, "table"))
    return EXIT_OK


def notifications(conf: cfg.ConfigOpts, args: argparse.Namespace) -> int:
    store = open_conf_store(conf)
    if args.action == "list":
        filters = {k: v for k, v in (("status", args.status),
                                     ("hostname", args.host)) if v}
        items = store.list_notifications(filters=filters, limit=args.limit)
        print(output.render_notifications(items, args.format))
        return EXIT_OK
    if args.action == "watch":
        return watch_notification(store, args)
    item = store.get(args.uuid)
    print(output.render_notification(item, store.step_events(item.uuid),
                                     store.journal(item.uuid), args.format,
                                     store.events(item.uuid)))
    return EXIT_OK


def watch_notification(store: Store, args: argparse.Namespace) -> int:
    """Follow the run until it ends; exit as its command would: 0 when
    it finished (or was ignored) with no failed instance, else 1."""
    try:
        item = watch.follow(store, args.uuid, Clock(), args.timeout,
                            sys.stdout)
    except exception.WaitTimeout as exc:
        return _fail(EXIT_TIMEOUT, f"{exc}; the run goes on: watch it "
                                   f"again, or 'recovery notifications "
                                   f"show {args.uuid}'")
    failed = item.status is Status.FAILED or any(
        r.outcome is Outcome.FAILED for r in store.journal(item.uuid))
    return EXIT_FAILED if failed else EXIT_OK


def db(conf: cfg.ConfigOpts, args: argparse.Namespace) -> int:
    if args.action == "import-masakari":
        return import_masakari(conf, args)
    engine = connection.create_engine(connection.Options.from_conf(
        conf.database, max_retries=0))
    try:
        if args.action == "upgrade":
            print(database.migrated(migrate.upgrade(engine,
                                                    expand_only=True)))
        elif args.action == "contract":
            done = migrate.contract(engine, conf.engine.lease_seconds)
            print(f"{database.migrated(done)}; no engine of an older "
                  f"release is alive")
        else:
            print(f"database: {revisions.current_revision(engine) or '-'}"
                  f"\nthis recovery: {revisions.HEAD_REVISION}")
    except migrate.OlderEngines as exc:
        return _fail(EXIT_REFUSED, str(exc))
    except sa.exc.SQLAlchemyError as exc:
        raise exception.StoreError(
            f"{args.action} failed on {engine.url.render_as_string()}: "
            f"{exc}") from exc
    finally:
        engine.dispose()
    return EXIT_OK


def import_masakari(conf: cfg.ConfigOpts, args: argparse.Namespace) -> int:
    if not args.source:
        return _fail(EXIT_USAGE, f"give Masakari's database: --from URL, or "
                                 f"${MASAKARI_URL_VARIABLE}")
    report = masakari_import.from_url(open_conf_store(conf), args.source,
                                      now=Clock().now(),
                                      dry_run=args.dry_run)
    print(report.render())
    return EXIT_USAGE if report.left_behind else EXIT_OK


def segments_and_hosts(conf: cfg.ConfigOpts,
                       args: argparse.Namespace) -> int:
    segments.run(conf, args)
    return EXIT_OK


def fencing_action(conf: cfg.ConfigOpts, args: argparse.Namespace) -> int:
    if args.action == "confirm":
        fencing.confirm(conf, args)
        return EXIT_OK
    return EXIT_OK if fencing.check(conf, args) else EXIT_FAILED


def _fail(code: int, message: str) -> int:
    print(f"recovery: error: {message}", file=sys.stderr)
    return code


COMMANDS = {"host-failure": host_failure, "host-drain": host_drain,
            "host-return": host_return,
            "notifications": notifications, "disarm": set_arming,
            "arm": set_arming, "status": status,
            "segment": segments_and_hosts, "host": segments_and_hosts,
            "db": db, "events": events.run, "fencing": fencing_action,
            "capacity": capacity_view, "simulate": simulate}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command = COMMANDS[args.command]
    try:
        conf = load_conf(args)
        return command(conf, args)
    except (exception.HostNotDown, exception.RecoveryInProgress,
            exception.EvacuationsUnfinished, exception.Disarmed,
            exception.InUse, exception.HostNotUp,
            exception.DrainRefused) as exc:
        return _fail(EXIT_REFUSED, str(exc))
    except (cfg.Error, exception.ConfigError, exception.UnknownHost,
            exception.NotFound, exception.Duplicate,
            validation.Invalid) as exc:
        return _fail(EXIT_USAGE, str(exc))
    except exception.NovaForbidden as exc:
        return _fail(EXIT_USAGE, f"{exc}. Check the [nova] credentials; "
                                 f"recovery needs an admin role")
    except exception.NovaUnreachable as exc:
        return _fail(EXIT_FAILED, f"{exc}. Check [nova] endpoint_override "
                                  f"or auth_url, and that Nova is up")
    except exception.RecoveryError as exc:
        return _fail(EXIT_FAILED, str(exc))
    except KeyboardInterrupt:
        return _fail(130, "interrupted. Instances that were moving may "
                          "still be locked; the run is journaled. Run the "
                          "same command again to resume it: it finishes "
                          "what was in flight without evacuating anything "
                          "twice, and releases the locks (recovery-engine, "
                          "if it runs, resumes it too)")
