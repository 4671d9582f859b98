"""IPMI fencing through pyghmi (IPMI 2.0, RMCP+ over UDP).

Power-off is chassis control "power down"; the proof is the chassis
power state read back as off. pyghmi runs its own I/O thread (green in a
monkey-patched process); each call is still bounded by call_bounded,
because a BMC that answers the session opening but not the login makes
pyghmi 1.6 log in again forever. ``_translate`` is the one place where
pyghmi's errors become FencingError.
"""

import logging
from collections.abc import Callable
from typing import Any
from typing import TypeVar

from pyghmi.ipmi import command

from recovery import concurrency
from recovery.exception import FencingError
from recovery.fencing import BmcRefused
from recovery.fencing import BmcSettings
from recovery.fencing import Fencer
from recovery.fencing import Timing
from recovery.fencing import call_bounded

LOG = logging.getLogger(__name__)

T = TypeVar("T")

# pyghmi reports refusals as text only (RAKP status strings, completion
# codes); these words mark the ones a new request cannot fix.
_REFUSAL_WORDS = ("password", "unauthorized", "privilege", "invalid role")


class IpmiFencer(Fencer):
    driver = "ipmi"

    def __init__(self, settings: BmcSettings, timing: Timing) -> None:
        super().__init__(settings, timing)
        self._command: Any = None
        self._opened: list[Any] = []     # every Command, to log out

    def describe(self) -> str:
        return f"ipmi power-off of {self._target()}"

    def _target(self) -> str:
        address = self.settings.address
        if ":" in address:          # IPv6 literal
            address = f"[{address}]"
        return f"{address}:{self.settings.port}"

    def _send_off(self, seconds: float) -> None:
        self._call(lambda: self._session().set_power("off", wait=False),
                   seconds, "asking for power off")

    def _read_power(self, seconds: float) -> str:
        state = self._call(lambda: self._session().get_power()["powerstate"],
                           seconds, "reading the power state")
        return str(state).capitalize()          # "on" -> "On"

    def _close(self) -> None:
        opened, self._opened, self._command = self._opened, [], None
        # pyghmi shares one session among Commands to the same BMC.
        sessions = {id(cmd.ipmi_session): cmd.ipmi_session for cmd in opened}
        for session in sessions.values():
            # Not waited for: a logout is one packet, never answered by a
            # BMC that hangs, and the fencing's result is already known.
            concurrency.spawn(_logout, session)

    def _session(self) -> Any:
        """The logged-in pyghmi Command, logging in on first use."""
        cmd = self._command
        if cmd is None:
            settings = self.settings
            cmd = command.Command(bmc=settings.address,
                                  userid=settings.username,
                                  password=settings.password.reveal(),
                                  port=settings.port)
            self._opened.append(cmd)
            self._command = cmd
        return cmd

    def _call(self, fn: Callable[[], T], seconds: float, what: str) -> T:
        try:
            return call_bounded(fn, seconds)
        except Exception as exc:
            self._command = None   # log in again on the next call
            raise self._translate(exc, what) from exc

    def _translate(self, exc: Exception, what: str) -> FencingError:
        """The one place pyghmi's errors become FencingError."""
        if isinstance(exc, FencingError):
            detail = str(exc)
        elif exc.args and exc.args[0] is None:
            # pyghmi's "nothing answered" carries no text at all.
            detail = f"{type(exc).__name__}: no answer from the BMC"
        else:
            detail = f"{type(exc).__name__}: {exc}"
        message = self.settings.password.scrub(
            f"{self.describe()}: {what}: {detail}")
        refused = (not isinstance(exc, FencingError) and any(
            word in str(exc).lower() for word in _REFUSAL_WORDS))
        return BmcRefused(message) if refused else FencingError(message)


def _logout(session: Any) -> None:
    try:
        session.logout()
    except Exception as exc:  # the session is dropped either way
        LOG.debug("IPMI logout failed: %s", exc)
