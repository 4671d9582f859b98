"""``recovery-engine``: the notification API and the recovery engine in
one service, meant to run under systemd (``Type=notify``).

- READY once the store is open and the API listens; STATUS says what the
  engine is doing; the watchdog is pinged from the main loop.
- A server database that does not answer at start is waited for, the API
  listening and answering 503 (``/healthcheck`` too): an attempt every
  ``[database] retry_interval``, one log line and an EXTEND_TIMEOUT_USEC
  each, without end by default; with ``max_retries`` set, exit 75
  (EX_TEMPFAIL) once they are spent.
- SIGTERM (or Ctrl-C): take no new work, let runs in flight reach a
  journaled point (``[engine] graceful_shutdown_timeout``), stop the API,
  close the store, exit 0. A second SIGTERM exits at once with 1; the
  journal stays consistent. SIGTERM while still starting (waiting for
  the database, say) exits 0 at once: nothing runs yet.
- SIGHUP: reload the mutable options (threads, timeouts, retry policy,
  log levels) from the config files.

Exit codes (``recovery.engine.server``'s): 0 stopped by SIGTERM or
Ctrl-C; 1 a second stop signal; 2 a wrong configuration; 75 the database
did not answer within ``[database] max_retries``; 130 interrupted while
starting.

``recovery.engine.server`` holds it; like ``cli``, this module imports it
only once the process is ready for its backend (``concurrency.start``).
"""

import sys

from recovery import concurrency


def main(argv: list[str] | None = None) -> int:
    concurrency.start(sys.argv[1:] if argv is None else argv,
                      "recovery-engine")
    from recovery.engine import server

    return server.main(argv)


if __name__ == "__main__":
    sys.exit(main())
