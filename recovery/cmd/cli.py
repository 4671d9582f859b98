"""``recovery``: the operator's command line.

Exit codes: 0 every instance recovered (or nothing to do), 1 recovery
failed (an instance failed, or Nova failed), 2 bad usage or config or an
unknown host, 3 refused for safety.
"""

import argparse
import logging
import sys

from oslo_config import cfg
from oslo_log import log

from recovery import conf as recovery_conf
from recovery import exception
from recovery.cmd import output
from recovery.concurrency import Clock
from recovery.flows.context import Env
from recovery.flows.context import Settings
from recovery.flows.host_failure import recover_host
from recovery.nova import load_nova

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_REFUSED = 0, 1, 2, 3


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="recovery",
        description="Recover the instances of failed Nova compute hosts.")
    parser.add_argument(
        "--config-file", action="append", default=None,
        help="Configuration file; may be repeated. Default: oslo.config's "
             "search path (e.g. /etc/recovery/recovery.conf).")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="Log INFO messages on stderr.")
    parser.add_argument("--debug", action="store_true",
                        help="Log DEBUG messages on stderr.")
    commands = parser.add_subparsers(dest="command", required=True)
    host = commands.add_parser(
        "host-failure", help="Evacuate every instance of a failed host.",
        description="Isolate a failed compute host (force-down, disable) "
                    "and evacuate its instances to other hosts.")
    host.add_argument("host", help="Service host name of the failed host, "
                                   "as in 'openstack compute service list'.")
    host.add_argument(
        "--host-is-off", action="store_true",
        help="Assert that you verified the host is powered off. Lets "
             "recovery proceed while Nova still reports its service up "
             "(before service_down_time has passed).")
    host.add_argument("--dry-run", action="store_true",
                      help="Print what would be evacuated or skipped, and "
                           "why; change nothing in Nova.")
    host.add_argument("--format", choices=("table", "json"), default="table",
                      help="Result format on stdout (default: table).")
    return parser


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
    clock = Clock()
    env = Env(nova=load_nova(conf, clock), clock=clock,
              settings=Settings.from_conf(conf),
              recorder=output.ProgressPrinter())
    report = recover_host(env, args.host, host_is_off=args.host_is_off,
                          dry_run=args.dry_run)
    render = output.render_json if args.format == "json" else (
        output.render_table)
    print(render(report))
    return EXIT_OK if report.succeeded else EXIT_FAILED


def _fail(code: int, message: str) -> int:
    print(f"recovery: error: {message}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        conf = load_conf(args)
        return host_failure(conf, args)
    except exception.HostNotDown as exc:
        return _fail(EXIT_REFUSED, str(exc))
    except (cfg.Error, exception.ConfigError, exception.UnknownHost) as exc:
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
                          "still be locked with [host_failure] lock_reason: "
                          "find them with 'openstack server list "
                          "--all-projects --locked'. Running again for the "
                          "host releases the locks of those still on it")


if __name__ == "__main__":
    sys.exit(main())
