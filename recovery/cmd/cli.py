"""``recovery``: the operator's command line (``commands`` holds it, and
its exit codes).

This module imports nothing that needs the monkey-patch: importing the
rest creates locks and a socket (SQLAlchemy, urllib3, dateutil) that must
be green on the eventlet backend, so ``main`` imports it only once the
process is ready for its backend (``concurrency.start``).
"""

import gc
import sys

from recovery import concurrency


def main(argv: list[str] | None = None) -> int:
    concurrency.start(sys.argv[1:] if argv is None else argv, "recovery")
    # The import makes some 100,000 objects, all kept for the life of the
    # process: the garbage collector's passes over them while they are
    # made find nothing and take a tenth of the start. Once made, they
    # are set aside (frozen), so that no later pass walks them either.
    gc.disable()
    from recovery.cmd import commands

    gc.freeze()
    gc.enable()
    return commands.main(argv)


if __name__ == "__main__":
    sys.exit(main())
