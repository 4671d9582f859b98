"""Redfish fencing through sushy.

Power-off is ``ComputerSystem.Reset`` with ``ForceOff``; the proof is
``PowerState`` read back as ``Off``: the 204 of the reset proves nothing,
BMCs apply power changes seconds later. Authentication is HTTP Basic.
An HTTP error status is an answer (the BMC has power); a connection
that fails or times out is not.
``_translate`` is the one place where sushy's (and requests') errors
become FencingError.
"""

import logging
from collections.abc import Callable
from typing import Any
from typing import TypeVar

import requests
import sushy
import sushy.auth
from sushy import exceptions as sushy_exc

from recovery.exception import FencingError
from recovery.fencing.fencer import BmcSettings
from recovery.fencing.fencer import Fencer
from recovery.fencing.fencer import Timing
from recovery.fencing.fencer import call_bounded
from recovery.fencing.fencer import detail_of

LOG = logging.getLogger(__name__)

T = TypeVar("T")

# Errors a new request cannot fix: wrong credentials or rights, a system
# the BMC does not have, a reset it does not offer.
_REFUSALS = (sushy_exc.AccessError, sushy_exc.ResourceNotFoundError,
             sushy_exc.UnknownDefaultError,
             sushy_exc.InvalidParameterValueError,
             sushy_exc.MissingActionError)


# Redfish's health states, best first.
HEALTH_ORDER = ["OK", "Warning", "Critical"]


class RedfishFencer(Fencer):
    driver = "redfish"

    def __init__(self, settings: BmcSettings, timing: Timing) -> None:
        super().__init__(settings, timing)
        self._system: Any = None
        # sushy's own timeout for each HTTP request; call_bounded bounds
        # the whole call (sushy may make several requests in one).
        self._request_timeout = max(timing.timeout / timing.attempts, 1.0)

    def describe(self) -> str:
        return f"redfish power-off of {self._target()}"

    def _target(self) -> str:
        if self.settings.system:
            return self.settings.address + self.settings.system
        return f"{self.settings.address} (its only system)"

    def _send_off(self, seconds: float) -> None:
        def request() -> None:
            self._connected().reset_system(sushy.RESET_FORCE_OFF)

        self._call(request, seconds, "asking for ForceOff")

    def _read_power(self, seconds: float) -> str:
        def read() -> str:
            system = self._connected()
            system.refresh(force=True)
            state = system.power_state
            return str(getattr(state, "value", state))

        return self._call(read, seconds, "reading the power state")

    def read_health(self, seconds: float) -> str:
        """The System's health as the BMC reports it now: the worse of
        its Status Health and HealthRollup ("OK", "Warning" or
        "Critical"; "unknown" when it says neither). One request once
        the System is made (it is kept for the next read; sushy opens a
        new TCP connection for each request)."""
        def read() -> str:
            system = self._connected()
            system.refresh(force=True)
            status = system.status
            said = [getattr(h, "value", h) for h in (
                status.health, status.health_rollup) if h] if status else []
            return max(said, key=HEALTH_ORDER.index, default="unknown")

        return self._call(read, seconds, "reading the health")

    def _close(self) -> None:
        # sushy closes its HTTP session when the objects are collected.
        self._system = None

    def _connected(self) -> Any:
        """The sushy System, connecting on first use (runs bounded)."""
        system = self._system
        if system is None:
            settings = self.settings
            # HTTP Basic: no Redfish session to create, and none left
            # open on the BMC when a fencing is abandoned (BMCs have few
            # session slots); one request less, too.
            auth = sushy.auth.BasicAuth(username=settings.username,
                                        password=settings.password.reveal())
            root = sushy.Sushy(
                settings.address, auth=auth, verify=settings.verify,
                read_timeout=self._request_timeout,
                connect_timeout=self._request_timeout,
                # 1: no retry of a failed connection inside sushy (its
                # default sleeps between tries); fencing retries itself.
                server_side_retries=1, server_side_retries_delay=0)
            system = root.get_system(settings.system)
            self._system = system
        return system

    def _call(self, fn: Callable[[], T], seconds: float, what: str) -> T:
        try:
            return call_bounded(fn, seconds)
        except Exception as exc:
            self._system = None   # reconnect on the next call
            raise self._translate(exc, what) from exc

    def _translate(self, exc: Exception, what: str) -> FencingError:
        """The one place sushy's errors become FencingError. An HTTP
        error status is the BMC's answer (``AnsweredError``)."""
        return self._error(what, detail_of(exc), refused=isinstance(
            exc, _REFUSALS) or _is_tls_error(exc),
            answered=isinstance(exc, sushy_exc.HTTPError))


def _is_tls_error(exc: BaseException) -> bool:
    """sushy wraps TLS failures in ConnectionError; retrying cannot help
    (fix ``verify`` or the BMC's certificate)."""
    return (isinstance(exc, sushy_exc.ConnectionError)
            and isinstance(exc.__context__, requests.exceptions.SSLError))
