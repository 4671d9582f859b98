"""The power-off-and-verify loop every fencing driver shares, and the
settings a driver gets for one host."""

import dataclasses
import enum
import functools
import logging
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any
from typing import Protocol
from typing import TypeVar

from recovery import concurrency
from recovery.exception import FencingError
from recovery.exception import WaitTimeout
from recovery.fencing.secret import Secret
from recovery.metrics import METRICS
from recovery.models import Server
from recovery.pacing import Lag
from recovery.waiting import wait_for

LOG = logging.getLogger(__name__)

T = TypeVar("T")
# One answer of a dry run: the action, whether the device answered it,
# what it said, and the seconds it took.
Check = tuple[str, bool, str, float]

IPMI_PORT = 623


class DeviceKind(enum.StrEnum):
    """What a fencing device proves when it succeeds."""

    # The host's power is off (a BMC, a PDU, a power agent).
    POWER = "power"
    # The host said it is dead (fence_kdump: its crash kernel runs).
    MESSAGE = "message"
    # The host's clients are cut off from its guests' disks (a Ceph
    # blocklist): the host itself may still run. Only the instances
    # whose every disk is on that storage are protected.
    STORAGE = "storage"


class StorageFence(Protocol):
    """What a storage device (``DeviceKind.STORAGE``, such as the Ceph
    driver's) tells besides its fencing, about a host's instances."""

    # Seconds a dead client's watch of an image outlives it (Ceph's
    # osd_client_watch_timeout).
    watch_timeout: float

    def coverage(self, servers: Sequence[Server], clock: concurrency.Clock
                 ) -> dict[str, str | None]:
        """Each server's uuid: None when every one of its disks is on
        this storage (the fence protects it), else why not (which
        disk). FencingError when the storage cannot be asked."""

    def watchers(self, servers: Sequence[Server],
                 clock: concurrency.Clock) -> list[str]:
        """The watches of these servers' disks held from the host's
        addresses, as the storage lists them. FencingError when it
        cannot be asked."""


class Unreachable(FencingError):
    """The device never answered at all (no connection, no reply): what
    a BMC that lost its power with its host does. A device that answered
    anything, even a refusal or "On", raises another FencingError."""


class AnsweredError(FencingError):
    """The device answered, with an error (a Redfish HTTP error status):
    it has power, and asking again may help. Not ``Unreachable``."""


class BmcRefused(FencingError):
    """The BMC refused for a reason asking again cannot fix (credentials,
    unknown system, unsupported action): fencing stops at once, and a
    wrong password is not hammered into an account lock-out."""


class NoAnswer(BmcRefused, Unreachable):
    """Asking again cannot help, and the device never gave an answer
    that worked: a fence agent's failures, which do not tell a refused
    login from a device out of reach (see ``AgentFencer._failed``)."""


@dataclasses.dataclass(frozen=True)
class Timing:
    """How long one fencing may take, and how it paces itself."""

    timeout: float
    poll_interval: float
    attempts: int
    # A device that has answered nothing within these seconds is out of
    # reach: it is given up then (``Unreachable``) rather than at
    # ``timeout``. None: it waits its whole timeout (a device of the
    # last level tried, which has no later level; see ``HostFence``).
    no_answer_timeout: float | None = None


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
    # Whether the BMC answered anything: a request accepted, a power
    # state read, an error it answered (a refusal is an answer too, and
    # ends the loop).
    answered: bool = False
    # When a device that answered nothing is given up (no_answer_timeout);
    # None: only at the timeout.
    silent_until: float | None = None
    # When the last request the device accepted was sent (monotonic).
    accepted_at: float | None = None
    # The longest a request it accepted went with the power still read
    # On, when another was sent: its lag is longer than that, if it acts
    # on requests at all.
    held_on: float = 0.0

    def end(self, until: float) -> float:
        """When a call or wait meant to last until ``until`` must end."""
        if self.answered or self.silent_until is None:
            return until
        return min(until, self.silent_until)

    def out_of_reach(self, now: float) -> bool:
        """Nothing answered, and no_answer_timeout has passed."""
        return (not self.answered and self.silent_until is not None
                and now >= self.silent_until)


class Fencer:
    """Powers one host off through its BMC and verifies it is Off.

    Made by ``Fencing.for_host`` for one fencing at a time (it keeps the
    BMC session of the running ``power_off``). A driver implements
    ``describe``, ``_target``, ``_send_off``, ``_read_power`` and
    ``_close``; each BMC call it makes is bounded by the seconds it is
    given (``call_bounded``). The loop here is the same for every driver.
    """

    driver: str = ""
    kind: DeviceKind = DeviceKind.POWER
    # Set by a power_off that read Off after a request the device
    # accepted: the seconds from that request to the read, or, if an
    # earlier request it accepted went longer with the power read On,
    # that time (a BMC that restarts its delay on each request shows its
    # lag only so). What the device's pacing learns (``recovery.pacing``);
    # None otherwise.
    lag_seen: float | None = None

    def __init__(self, settings: BmcSettings, timing: Timing) -> None:
        self.settings = settings
        self.timing = timing

    def describe(self) -> str:
        raise NotImplementedError

    def device_key(self) -> str:
        """The device, as its learned lag is kept: its driver and
        target, never a secret."""
        return f"{self.driver} {self._target()}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.describe()}>"

    def _error(self, what: str, detail: str, *, refused: bool = False,
               unanswered: bool = False,
               answered: bool = False) -> FencingError:
        """Every driver's error about ``what``: named after the device,
        its password scrubbed; ``refused``: asking again cannot help;
        ``unanswered`` too: the device never answered (``NoAnswer``);
        ``answered``: an error the device answered (``AnsweredError``)."""
        message = self.settings.password.scrub(
            f"{self.describe()}: {what}: {detail}")
        if refused:
            return (NoAnswer if unanswered else BmcRefused)(message)
        return (AnsweredError if answered else FencingError)(message)

    # -- driver hooks ------------------------------------------------------
    def _send_off(self, seconds: float) -> None:
        """Send one power-off request; raise FencingError on failure
        (AnsweredError when the device answered it with an error)."""
        raise NotImplementedError

    def _read_power(self, seconds: float) -> str:
        """Read the power state ("On", "Off", ...); FencingError if not
        (AnsweredError when the device answered with an error)."""
        raise NotImplementedError

    def _close(self) -> None:
        """Release the BMC session, best effort."""

    # -- the loop ------------------------------------------------------------
    def power_off(self, clock: concurrency.Clock,
                  lag: Lag | None = None) -> str:
        """Power the host off and read the power back until it is Off.

        Each power-off request gets an equal share of the time left; the
        request is sent again when its share ends with the power not
        shown Off (read every poll_interval until then). With
        the device's ``lag``, learned from its past fencings, a request
        it accepted is not followed by another before
        ``lag.resend_after`` (within ``timeout``): a BMC that starts its
        power-off delay anew on each request is not made slower.
        Returns what was done; raises FencingError (BmcRefused
        for a refusal) when Off is not shown within ``timeout``, and
        ``Unreachable`` when the BMC never answered anything (no request
        accepted, no power state read, no error answered, no refusal):
        what a BMC that lost its power with its host does. With a
        ``no_answer_timeout``, such a BMC is given up then, each call
        until then bounded by what is left of it.
        """
        started = clock.monotonic()
        deadline = started + self.timing.timeout
        progress = _Progress()
        self.lag_seen = None
        silent = self.timing.no_answer_timeout
        if silent is not None and silent < self.timing.timeout:
            progress.silent_until = started + silent
        LOG.info("Fencing %s: %s", self.settings.host, self.describe())
        attempts = METRICS.fencing.labels
        try:
            for attempt in range(self.timing.attempts):
                now = clock.monotonic()
                if now >= deadline or progress.out_of_reach(now):
                    break
                share = (deadline - now) / (self.timing.attempts - attempt)
                if self._attempt(clock, now + share, deadline, lag,
                                 progress):
                    attempts(self.driver, "off").inc()
                    return self._done(clock, started, lag, progress)
        except BmcRefused as exc:
            attempts(self.driver, "refused").inc()
            LOG.error("Fencing %s failed: %s", self.settings.host, exc)
            raise
        finally:
            self._close()
        attempts(self.driver, "not_off").inc()
        error = (FencingError if progress.answered else Unreachable)(
            self._failure(lag, progress))
        LOG.error("Fencing %s failed: %s", self.settings.host, error)
        raise error

    def _attempt(self, clock: concurrency.Clock, until: float,
                 deadline: float, lag: Lag | None,
                 progress: _Progress) -> bool:
        """One power-off request, then wait for Off until ``until``
        (or, for a request the device accepted, until its ``lag`` says
        another may be sent, if that is later, within ``deadline``).

        A failed request still waits: the BMC may have acted on it and
        only its answer been lost. The power is read every poll_interval
        until then: a request is sent again only after a read no older
        than that still showed it on.
        """
        sent_at = clock.monotonic()
        if progress.accepted_at is not None and progress.state == "On":
            progress.held_on = max(progress.held_on,
                                   sent_at - progress.accepted_at)
        progress.requests += 1
        try:
            self._send_off(progress.end(until) - sent_at)
        except BmcRefused:
            raise
        except FencingError as exc:
            progress.error = exc
            progress.answered |= isinstance(exc, AnsweredError)
            # The device may still act on the request it last accepted,
            # or on this one: no lag is learned from what follows.
            progress.accepted_at = None
            LOG.warning("Fencing %s: power-off request %d failed: %s",
                        self.settings.host, progress.requests, exc)
        else:
            progress.answered = True
            progress.accepted_at = sent_at
            if lag is not None:
                until = max(until, min(
                    deadline,
                    sent_at + lag.resend_after(self.timing.poll_interval)))
            LOG.info("Fencing %s: power-off request %d accepted, waiting "
                     "for the power to read Off", self.settings.host,
                     progress.requests)

        is_off = functools.partial(self._is_off, clock, until, progress)
        end = progress.end(until)
        while True:
            try:
                wait_for(is_off, what=f"{self.settings.host} to read Off",
                         timeout=max(end - clock.monotonic(), 0.0),
                         interval=self.timing.poll_interval, clock=clock)
                return True
            except WaitTimeout:
                # An answer within the no-answer window: the wait goes
                # on until the share ends.
                if progress.end(until) == end:
                    return False
                end = progress.end(until)

    def _is_off(self, clock: concurrency.Clock, until: float,
                progress: _Progress) -> bool:
        """One read of the power, if there is time left before
        ``until``: whether it reads Off."""
        left = progress.end(until) - clock.monotonic()
        if left <= 0:
            return False
        try:
            progress.state = self._read_power(left)
        except BmcRefused:
            raise
        except FencingError as exc:
            if str(exc) != str(progress.error):   # once, not per poll
                LOG.warning("Fencing %s: cannot read the power state: %s",
                            self.settings.host, exc)
            progress.error = exc
            progress.answered |= isinstance(exc, AnsweredError)
            return False
        progress.answered = True
        return progress.state == "Off"

    def _done(self, clock: concurrency.Clock, started: float,
              lag: Lag | None, progress: _Progress) -> str:
        now = clock.monotonic()
        message = (f"powered off through {self.driver} {self._target()}, "
                   f"verified Off after {now - started:.1f} s")
        after = None
        if progress.accepted_at is not None:
            after = now - progress.accepted_at
            self.lag_seen = max(after, progress.held_on)
        if progress.requests > 1:
            message += f" ({progress.requests} power-off requests"
            if after is not None:
                message += f", Off {after:.1f} s after the last one accepted"
            if after is not None and progress.held_on > after:
                message += (f", an earlier one {progress.held_on:.1f} s "
                            f"without Off")
            message += ")"
        message += self._pacing(lag)
        LOG.info("Fencing %s: %s", self.settings.host, message)
        return message

    def _pacing(self, lag: Lag | None) -> str:
        if lag is None:
            return ""
        return f"; paced by {lag.describe(self.timing.poll_interval)}"

    def _failure(self, lag: Lag | None, progress: _Progress) -> str:
        details = []
        if progress.state is not None:
            details.append(f"the power last read {progress.state}")
        if progress.error is not None:
            error = str(progress.error).removeprefix(f"{self.describe()}: ")
            details.append(f"last BMC error: {error}")
        if progress.silent_until is not None and not progress.answered:
            # Given up at no_answer_timeout (only a device of a level
            # that has a later one has it: see HostFence).
            said = (f"answered nothing within "
                    f"{self.timing.no_answer_timeout:g} s "
                    f"(no_answer_timeout), out of reach: the next level is "
                    f"tried")
        else:
            said = (f"power not verified Off within "
                    f"{self.timing.timeout:g} s")
            if not details:
                details.append("the power state could not be read")
            if not progress.answered:
                details.append("the BMC never answered")
        return self.settings.password.scrub(
            f"{self.describe()}: {said} after {progress.requests} power-off "
            f"request(s)" + "".join(f"; {detail}" for detail in details)
            + self._pacing(lag))

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
