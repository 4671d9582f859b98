"""A host's fencing levels, tried in order as Pacemaker's topology does.

A level is a list of devices that must all prove the host off; the
levels are tried in order until one does, for example level 1
fence_kdump (the crash kernel's message: the host is dead and its dump is
kept), then level 2 a power-off. A host with a single ``driver`` has one
level of one device.

A storage fence (``DeviceKind.STORAGE``, a Ceph blocklist) proves less
than a power-off: the host may still run. A level made only of storage
devices is therefore tried after every other level, whatever its
number, and only when a ``gate`` (the flows' evidence rule) lets it;
its proof is storage-only (``Proof.storage``). In a level that mixes
them, the power devices are tried first and must prove the host off:
that is a power proof.

A device of a level that has a later level to try gives up once it has
answered nothing within its ``no_answer_timeout`` (out of reach, as a
BMC that lost its power with its host): the next level is tried then,
not after its whole ``timeout``. A device of the last level tried
waits its whole timeout.
"""

import dataclasses
import logging
from collections.abc import Callable
from collections.abc import Sequence

from recovery import concurrency
from recovery.exception import FenceHeld
from recovery.exception import FenceHoldCause
from recovery.exception import FencingError
from recovery.exception import StoreError
from recovery.fencing.fencer import DeviceKind
from recovery.fencing.fencer import Fencer
from recovery.fencing.fencer import Unreachable
from recovery.metrics import METRICS
from recovery.pacing import Lag
from recovery.pacing import LagBook

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Device:
    """One fencing device of a host: its name in the credentials file
    and the fencer that drives it."""

    name: str
    fencer: Fencer

    def describe(self) -> str:
        return f"{self.name} ({self.fencer.describe()})"


@dataclasses.dataclass(frozen=True)
class Level:
    number: int
    devices: Sequence[Device]

    @property
    def storage_only(self) -> bool:
        """Made only of storage devices: its proof is storage-only."""
        return all(device.fencer.kind is DeviceKind.STORAGE
                   for device in self.devices)


@dataclasses.dataclass(frozen=True)
class DeviceAttempt:
    """How one device's part of a fencing ended."""

    level: int
    device: str
    kind: str                 # the driver, or the agent's name
    seconds: float
    proved: bool
    answer: str
    # Whether the device answered anything (False: ``Unreachable``).
    reached: bool = True
    device_kind: DeviceKind = DeviceKind.POWER

    def describe(self) -> str:
        result = ("proved off" if self.proved else "failed" if self.reached
                  else "unreachable")
        return (f"level {self.level} device {self.device} ({self.kind}) "
                f"{result} after {self.seconds:.1f} s: {self.answer}")


@dataclasses.dataclass(frozen=True)
class DeviceCheck:
    """What one device answered to a dry run (never a power-off)."""

    level: int
    device: str
    kind: str
    action: str
    ok: bool
    answer: str
    seconds: float


@dataclasses.dataclass(frozen=True)
class Proof:
    """What proved a host fenced. ``storage``: the storage fences that
    proved it when no power (or message) proof did; the host may still
    run then, and only the instances they cover may be evacuated. Empty
    for a power-off, a crash kernel's message or an operator's
    confirmation: every instance may move."""

    text: str
    storage: tuple[Fencer, ...] = ()

    @property
    def storage_only(self) -> bool:
        return bool(self.storage)

    def __str__(self) -> str:
        return self.text


Tell = Callable[[DeviceAttempt], None]
# Asked before a storage-only level, with the attempts so far: the
# evidence that lets it prove the host off (its words), or FenceHeld.
Gate = Callable[[Sequence[DeviceAttempt], Level], str]


class HostFence:
    """How one host is proved off: its levels, in order."""

    def __init__(self, host: str, levels: Sequence[Level]) -> None:
        self.host = host
        self.levels = list(levels)
        # The last level tried has no later one to try: its devices wait
        # their whole timeout (giving up early would only bring the hold
        # sooner, and its retry's backoff).
        for device in self.order[-1].devices if self.levels else ():
            device.fencer.timing = dataclasses.replace(
                device.fencer.timing, no_answer_timeout=None)

    @property
    def order(self) -> list[Level]:
        """The levels in the order tried: the storage-only ones last."""
        return ([level for level in self.levels if not level.storage_only]
                + [level for level in self.levels if level.storage_only])

    @property
    def devices(self) -> list[tuple[int, Device]]:
        return [(level.number, device) for level in self.levels
                for device in level.devices]

    @property
    def storage(self) -> tuple[Fencer, ...]:
        """The devices of its storage-only levels: what a storage-only
        proof of this host would rest on."""
        return tuple(device.fencer for level in self.levels
                     if level.storage_only for device in level.devices)

    def describe(self) -> str:
        if len(self.devices) == 1:
            return self.devices[0][1].fencer.describe()
        return "; ".join(
            f"level {level.number}: "
            + " and ".join(device.describe() for device in level.devices)
            for level in self.levels)

    def __repr__(self) -> str:
        return f"<HostFence {self.host}: {self.describe()}>"

    def power_off(self, clock: concurrency.Clock, tell: Tell | None = None,
                  gate: Gate | None = None,
                  lags: LagBook | None = None) -> Proof:
        """Try each level until every device of one proves the host off;
        return what proved it. The storage-only levels come last, each
        only when ``gate`` lets it (none is tried without a gate).
        ``FenceHeld`` (naming each device and its answer, with the
        cause) when no level does: nothing may be evacuated then.
        ``tell`` hears each device's attempt when there are several (a
        host's one device is the fencing's own news). ``lags``: where
        each power device's lag is learned and read, to pace its
        requests (``recovery.pacing``)."""
        trial = _Trial(self, clock, tell, lags)
        for level in self.order:
            proof = trial.level(level, gate)
            if proof is not None:
                return proof
        raise trial.held()

    def check(self, clock: concurrency.Clock) -> list[DeviceCheck]:
        """Ask every device of every level what it can answer without
        fencing (status, monitor); never a power-off."""
        checks = []
        for number, device in self.devices:
            for action, ok, answer, seconds in device.fencer.check(clock):
                checks.append(DeviceCheck(number, device.name,
                                          device.fencer.driver, action, ok,
                                          answer, seconds))
        return checks


class _Trial:
    """One fencing of a host: its levels' attempts so far, and the
    gate's hold, if it held one."""

    def __init__(self, fence: HostFence, clock: concurrency.Clock,
                 tell: Tell | None, lags: LagBook | None) -> None:
        self.host, self.clock = fence.host, clock
        self.tell = tell
        self.lags = lags
        self.single = len(fence.devices) == 1
        self.attempts: list[DeviceAttempt] = []
        self.error: FencingError | None = None
        self.hold: FenceHeld | None = None

    def level(self, level: Level, gate: Gate | None) -> Proof | None:
        """The level's proof, or None when it failed or was held."""
        evidence = None
        if level.storage_only:
            evidence = self._evidence(level, gate)
            if evidence is None:
                return None
        proofs = []
        # In a mixed level, the power devices first: they must prove it.
        for device in sorted(level.devices, key=lambda d: (
                d.fencer.kind is DeviceKind.STORAGE)):
            attempt, proof, error = self._try(level, device)
            self.attempts.append(attempt)
            if self.tell is not None and not self.single:
                self.tell(attempt)
            if error is not None:
                self.error = error
                return None
            proofs.append(proof)
        text = proofs[0]
        if not self.single:
            LOG.info("Fencing %s: level %d proved it off", self.host,
                     level.number)
            text = f"level {level.number}: " + "; ".join(proofs)
        if evidence is None:
            return Proof(text)
        return Proof(f"{text}; a storage fence alone, on this evidence: "
                     f"{evidence}",
                     tuple(device.fencer for device in level.devices))

    def _try(self, level: Level, device: Device
             ) -> tuple[DeviceAttempt, str, FencingError | None]:
        fencer = device.fencer
        lag = self._lag(fencer)
        started = self.clock.monotonic()
        try:
            proof, error = fencer.power_off(self.clock, lag), None
        except FencingError as exc:
            proof, error = "", exc
        seconds = self.clock.monotonic() - started
        if error is None and fencer.lag_seen is not None:
            self._learn(fencer, fencer.lag_seen)
        result = "failed" if error else "proved"
        METRICS.fencing_devices.labels(str(level.number), device.name,
                                       result).observe(seconds)
        attempt = DeviceAttempt(level.number, device.name, fencer.driver,
                                seconds, error is None, str(error or proof),
                                reached=not isinstance(error, Unreachable),
                                device_kind=fencer.kind)
        METRICS.fencing_device_done(attempt.device_kind,
                                    proved=attempt.proved,
                                    reached=attempt.reached)
        return attempt, proof, error

    def _lag(self, fencer: Fencer) -> Lag | None:
        """The power device's learned lag; None when none is known, or
        the store cannot say (its requests are then paced as a new
        device's: by the timeout's shares)."""
        if self.lags is None or fencer.kind is not DeviceKind.POWER:
            return None
        try:
            return self.lags.fence_lag(fencer.device_key())
        except StoreError as exc:
            LOG.warning("Fencing %s: cannot read the learned lag of %s "
                        "(%s): its requests are paced as a new device's",
                        self.host, fencer.device_key(), exc)
            return None

    def _learn(self, fencer: Fencer, seconds: float) -> None:
        """Keep what this fencing showed of the device's lag; a store
        that cannot keep it loses the lesson, never the proof."""
        if self.lags is None:
            return
        try:
            self.lags.learn_fence_lag(fencer.device_key(), self.host,
                                      seconds)
        except StoreError as exc:
            LOG.warning("Fencing %s: cannot keep the lag of %s (%.1f s): "
                        "%s", self.host, fencer.device_key(), seconds, exc)

    def _evidence(self, level: Level, gate: Gate | None) -> str | None:
        """What lets a storage-only level prove the host off, or None
        (the hold is kept)."""
        if gate is None:
            self.hold = FenceHeld(
                f"level {level.number} is a storage fence alone, never "
                f"tried without the evidence rule",
                FenceHoldCause.FENCE_FAILED)
            return None
        try:
            return gate(tuple(self.attempts), level)
        except FenceHeld as held:
            self.hold = held
            return None

    def held(self) -> FenceHeld:
        """Why no level proved the host off."""
        power = [attempt for attempt in self.attempts
                 if attempt.device_kind is DeviceKind.POWER]
        unreachable = bool(power) and not any(a.reached for a in power)
        if self.single and self.error is not None:
            message = str(self.error)
        else:
            message = "no fencing level proved it off"
            if self.attempts:
                message += ": " + "; ".join(
                    attempt.describe() for attempt in self.attempts)
        if self.hold is not None:
            message += f"; {self.hold}" if self.attempts else f": {self.hold}"
            cause = self.hold.cause
        else:
            cause = (FenceHoldCause.UNREACHABLE if unreachable
                     else FenceHoldCause.FENCE_FAILED)
        return FenceHeld(message, cause, bmcs_unreachable=unreachable)
