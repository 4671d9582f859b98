"""``recovery``: the operator's command line (``commands`` holds it, and
its exit codes).

This module imports nothing that needs the monkey-patch: importing the
rest creates locks and a socket (SQLAlchemy, urllib3, dateutil) that must
be green, so ``main`` imports it only once the process is patched.
"""

import sys

from recovery import concurrency


def main(argv: list[str] | None = None) -> int:
    concurrency.monkey_patch()
    from recovery.cmd import commands

    return commands.main(argv)


if __name__ == "__main__":
    sys.exit(main())
