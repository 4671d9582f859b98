"""Fencing over the API (recovery's own): ``POST
/v1/fencing/{hostname}/confirm``, an operator's confirmation that a
failed host is off, as ``recovery fencing confirm`` takes it
(``recovery.confirming``), its author the caller (``policy.caller``).

400 for a body without a reason, or an empty, too long or multi-line
one; 404 for a host Nova does not know or no recovery of it waiting for
a proof; 409 while the host may run (Nova hears from it, it answers the
liveness probe or cannot be probed); 503 when Nova cannot say. Nothing
is recorded on any of them.
"""

import logging
from collections.abc import Callable

import webob

from recovery import confirming
from recovery import exception
from recovery.api import http
from recovery.api import policy
from recovery.api import validation
from recovery.api import views
from recovery.concurrency import Clock

LOG = logging.getLogger(__name__)


class FencingAPI:
    """The handlers under ``/v1/fencing``."""

    def __init__(self, store: confirming.ConfirmStore,
                 liveness: confirming.OffCheck, clock: Clock, *,
                 max_body: int, on_confirmed: Callable[[], None]):
        """``on_confirmed``: told of each confirmation recorded (the
        engine's wake-up: the held run is due now)."""
        self.store = store
        self.liveness = liveness
        self.clock = clock
        self.max_body = max_body
        self.on_confirmed = on_confirmed

    def route(self, req: webob.Request,
              parts: list[str]) -> http.Handlers | None:
        """The handlers by method for ``parts``, the path after
        ``/v1/fencing``; None if there is no such resource."""
        if len(parts) == 2 and parts[1] == "confirm":
            return {"POST": lambda: self.confirm(req, parts[0])}
        return None

    def confirm(self, req: webob.Request, hostname: str) -> webob.Response:
        reason = validation.confirmation(http.read_json(req, self.max_body))
        try:
            done = confirming.confirm(self.store, self.liveness, hostname,
                                      policy.caller(req), reason, self.clock)
        except exception.HostNotDown as exc:
            raise http.Refused(409, str(exc)) from exc
        except exception.UnknownHost as exc:
            raise exception.NotFound(str(exc)) from exc
        except exception.NovaError as exc:
            raise http.Refused(503, f"cannot ask Nova whether {hostname} "
                                    f"is down, so nothing was recorded: "
                                    f"{exc}") from exc
        self.on_confirmed()
        confirmation = done.confirmation
        LOG.warning("%s confirmed %s off over the API, for notification "
                    "%s: %s (%s)", confirmation.user, hostname,
                    confirmation.notification_uuid, confirmation.reason,
                    done.checked)
        return http.respond(200, {"confirmation": views.confirmation(done)})
