"""The power-off-and-verify loop every fencing driver shares, and the
settings a driver gets for one host."""

import dataclasses
import logging
from collections.abc import Callable
from typing import Any
from typing import TypeVar

from recovery import concurrency
from recovery.exception import FencingError
from recovery.exception import WaitTimeout
from recovery.fencing.secret import Secret
from recovery.metrics import METRICS
from recovery.waiting import wait_for

LOG = logging.getLogger(__name__)

T = TypeVar("T")
# One answer of a dry run: the action, whether the device answered it,
# what it said, and the seconds it took.
Check = tuple[str, bool, str, float]

IPMI_PORT = 623


class BmcRefused(FencingError):
    """The BMC refused for a reason asking again cannot fix (credentials,
    unknown system, unsupported action): fencing stops at once, and a
    wrong password is not hammered into an account lock-out."""


@dataclasses.dataclass(frozen=True)
class Timing:
    """How long one fencing may take, and how it paces itself."""

    timeout: float
    poll_interval: float
    attempts: int


@dataclasses.dataclass(frozen=True)
class BmcSettings:
    """Everything a driver needs to reach one host's BMC."""

    host: str
    driver: str
    address: str        # redfish: scheme://name[:port]; ipmi: name or IP
    username: str
    password: Secret
    system: str | None = None     # redfish system path; None: the only one
    port: int = IPMI_PORT         # ipmi
    verify: bool | str = True     # redfish TLS: bool or CA bundle path


@dataclasses.dataclass
class _Progress:
    """What one fencing has seen so far, for its final message."""

    requests: int = 0
    state: str | None = None
    error: FencingError | None = None


class Fencer:
    """Powers one host off through its BMC and verifies it is Off.

    Made by ``Fencing.for_host`` for one fencing at a time (it keeps the
    BMC session of the running ``power_off``). A driver implements
    ``describe``, ``_target``, ``_send_off``, ``_read_power`` and
    ``_close``; each BMC call it makes is bounded by the seconds it is
    given (``call_bounded``). The loop here is the same for every driver.
    """

    driver: str = ""

    def __init__(self, settings: BmcSettings, timing: Timing) -> None:
        self.settings = settings
        self.timing = timing

    def describe(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.describe()}>"

    def _error(self, what: str, detail: str, *,
               refused: bool = False) -> FencingError:
        """Every driver's error about ``what``: named after the device,
        its password scrubbed; ``refused``: asking again cannot help."""
        message = self.settings.password.scrub(
            f"{self.describe()}: {what}: {detail}")
        return BmcRefused(message) if refused else FencingError(message)

    # -- driver hooks ------------------------------------------------------
    def _send_off(self, seconds: float) -> None:
        """Send one power-off request; raise FencingError on failure."""
        raise NotImplementedError

    def _read_power(self, seconds: float) -> str:
        """Read the power state ("On", "Off", ...); FencingError if not."""
        raise NotImplementedError

    def _close(self) -> None:
        """Release the BMC session, best effort."""

    # -- the loop ------------------------------------------------------------
    def power_off(self, clock: concurrency.Clock) -> str:
        """Power the host off and read the power back until it is Off.

        Each power-off request gets an equal share of the time left; the
        request is sent again when its share ends with the power not
        shown Off. Returns what was done; raises FencingError (BmcRefused
        for a refusal) when Off is not shown within ``timeout``.
        """
        started = clock.monotonic()
        deadline = started + self.timing.timeout
        progress = _Progress()
        LOG.info("Fencing %s: %s", self.settings.host, self.describe())
        attempts = METRICS.fencing.labels
        try:
            for attempt in range(self.timing.attempts):
                now = clock.monotonic()
                if now >= deadline:
                    break
                share = (deadline - now) / (self.timing.attempts - attempt)
                if self._attempt(clock, now + share, progress):
                    attempts(self.driver, "off").inc()
                    return self._done(clock.monotonic() - started, progress)
        except BmcRefused as exc:
            attempts(self.driver, "refused").inc()
            LOG.error("Fencing %s failed: %s", self.settings.host, exc)
            raise
        finally:
            self._close()
        attempts(self.driver, "not_off").inc()
        error = FencingError(self._failure(progress))
        LOG.error("Fencing %s failed: %s", self.settings.host, error)
        raise error

    def _attempt(self, clock: concurrency.Clock, until: float,
                 progress: _Progress) -> bool:
        """One power-off request, then wait for Off until ``until``.

        A failed request still waits: the BMC may have acted on it and
        only its answer been lost.
        """
        progress.requests += 1
        try:
            self._send_off(until - clock.monotonic())
        except BmcRefused:
            raise
        except FencingError as exc:
            progress.error = exc
            LOG.warning("Fencing %s: power-off request %d failed: %s",
                        self.settings.host, progress.requests, exc)
        else:
            LOG.info("Fencing %s: power-off request %d accepted, waiting "
                     "for the power to read Off", self.settings.host,
                     progress.requests)

        def is_off() -> bool:
            left = until - clock.monotonic()
            if left <= 0:
                return False
            try:
                progress.state = self._read_power(left)
            except BmcRefused:
                raise
            except FencingError as exc:
                if str(exc) != str(progress.error):   # once, not per poll
                    LOG.warning("Fencing %s: cannot read the power state: "
                                "%s", self.settings.host, exc)
                progress.error = exc
                return False
            return progress.state == "Off"

        try:
            wait_for(is_off, what=f"{self.settings.host} to read Off",
                     timeout=max(until - clock.monotonic(), 0.0),
                     interval=self.timing.poll_interval, clock=clock)
        except WaitTimeout:
            return False
        return True

    def _done(self, elapsed: float, progress: _Progress) -> str:
        message = (f"powered off through {self.driver} {self._target()}, "
                   f"verified Off after {elapsed:.1f} s")
        if progress.requests > 1:
            message += f" ({progress.requests} power-off requests)"
        LOG.info("Fencing %s: %s", self.settings.host, message)
        return message

    def _failure(self, progress: _Progress) -> str:
        details = []
        if progress.state is not None:
            details.append(f"the power last read {progress.state}")
        if progress.error is not None:
            error = str(progress.error).removeprefix(f"{self.describe()}: ")
            details.append(f"last BMC error: {error}")
        if not details:
            details.append("the power state could not be read")
        return self.settings.password.scrub(
            f"{self.describe()}: power not verified Off within "
            f"{self.timing.timeout:g} s after {progress.requests} power-off "
            f"request(s); " + "; ".join(details))

    def _target(self) -> str:
        """The BMC (and system) acted on, for messages."""
        raise NotImplementedError

    # -- a dry run -----------------------------------------------------------
    def check(self, clock: concurrency.Clock) -> list[Check]:
        """What the device answers without being asked to fence: here,
        the power state (each action, whether it answered, the answer,
        the seconds it took). Never a power-off."""
        started = clock.monotonic()
        try:
            answer, ok = f"power {self._read_power(self.timing.timeout)}", True
        except FencingError as exc:
            answer, ok = str(exc), False
        finally:
            self._close()
        return [("status", ok, answer, clock.monotonic() - started)]


def detail_of(exc: Exception) -> str:
    """What a driver says of an error its library raised: a
    FencingError's own words, else the exception's class and text."""
    if isinstance(exc, FencingError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def call_bounded(fn: Callable[[], T], seconds: float) -> T:
    """Return ``fn()``, or raise FencingError if it takes over ``seconds``.

    A library's own timeouts bound each packet or request, not a whole
    call (sushy makes several requests, and may retry). So the call runs
    on its own (green) thread and the caller stops waiting at its
    deadline. The abandoned call ends on its own timeouts (sushy), or
    when the caller kills what it waits on (the IPMI helper process).
    """
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = fn()
        except Exception as exc:  # re-raised in the caller's thread
            outcome["error"] = exc

    task = concurrency.spawn(run)
    if not task.wait(max(seconds, 0.0)):
        raise FencingError(
            f"no answer from the BMC within {max(seconds, 0.0):.1f} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
