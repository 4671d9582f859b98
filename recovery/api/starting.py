"""The API before its store is open: every request answered 503, so that
a monitor sends its notification again later and nothing is taken that
was not stored.

The engine opens the store itself (waiting for a server database that
does not answer yet) and hands the API over with ``serve``. The WSGI
entry point, which has no thread of its own to wait on, gives an
``opener``: a request tries to open the store, until one does. One
attempt at a time, and none within ``retry_after`` seconds of one that
failed: each may wait for a connect timeout, and a database that is down
must not hold every worker of the WSGI server in one (health checks and
monitors' retries would find none free); the others answer 503 at once.
"""

import logging
from collections.abc import Callable
from typing import Any

from recovery import concurrency
from recovery import exception
from recovery.api import http

LOG = logging.getLogger(__name__)

# What opens the store and builds the API over it: the API.
Opener = Callable[[], Any]


class Deferred:
    """503 with ``Retry-After: retry_after`` until the API is served."""

    def __init__(self, retry_after: int, opener: Opener | None = None,
                 clock: concurrency.Clock | None = None):
        self._retry_after = retry_after
        self._opener = opener
        self._clock = clock or concurrency.Clock()
        self._lock = concurrency.Lock()
        self._app: Any = None
        self._opening = False
        self._next_attempt = float("-inf")      # monotonic

    def serve(self, app: Any) -> None:
        """From now on, every request goes to ``app``."""
        self._app = app

    def __call__(self, environ: dict, start_response: Any) -> Any:
        app = self._app
        if app is None and self._opener is not None:
            app = self._open()
        if app is None:
            response = http.error(
                503, "the store cannot be reached yet; nothing was stored, "
                     "try again")
            response.headers["Retry-After"] = str(self._retry_after)
            app = response
        return app(environ, start_response)

    def _open(self) -> Any:
        with self._lock:
            if (self._app is not None or self._opening
                    or self._clock.monotonic() < self._next_attempt):
                return self._app
            self._opening = True
        app = None
        try:
            app = self._opener()
        except exception.StoreUnavailable as exc:
            LOG.warning("Answering 503: %s", exc)
        except exception.ConfigError as exc:
            # A schema this version cannot run on: the operator's to
            # mend ('recovery db upgrade'), and this process cannot exit.
            LOG.error("Answering 503: %s", exc)
        finally:
            with self._lock:
                self._opening = False
                if app is None:
                    self._next_attempt = (self._clock.monotonic()
                                          + self._retry_after)
                else:
                    self._app = app
        return app
