"""A host's fencing levels, tried in order as Pacemaker's topology does.

A level is a list of devices that must all prove the host off; the
levels are tried in order until one does, for example level 1
fence_kdump (the crash kernel's message: the host is dead and its dump is
kept), then level 2 a power-off. A host with a single ``driver`` has one
level of one device.
"""

import dataclasses
import logging
from collections.abc import Callable
from collections.abc import Sequence

from recovery import concurrency
from recovery.exception import FencingError
from recovery.fencing.fencer import Fencer
from recovery.metrics import METRICS

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


@dataclasses.dataclass(frozen=True)
class DeviceAttempt:
    """How one device's part of a fencing ended."""

    level: int
    device: str
    kind: str                 # the driver, or the agent's name
    seconds: float
    proved: bool
    answer: str

    def describe(self) -> str:
        result = "proved off" if self.proved else "failed"
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


Tell = Callable[[DeviceAttempt], None]


class HostFence:
    """How one host is proved off: its levels, in order."""

    def __init__(self, host: str, levels: Sequence[Level]) -> None:
        self.host = host
        self.levels = list(levels)

    @property
    def devices(self) -> list[tuple[int, Device]]:
        return [(level.number, device) for level in self.levels
                for device in level.devices]

    def describe(self) -> str:
        if len(self.devices) == 1:
            return self.devices[0][1].fencer.describe()
        return "; ".join(
            f"level {level.number}: "
            + " and ".join(device.describe() for device in level.devices)
            for level in self.levels)

    def __repr__(self) -> str:
        return f"<HostFence {self.host}: {self.describe()}>"

    def power_off(self, clock: concurrency.Clock,
                  tell: Tell | None = None) -> str:
        """Try each level until every device of one proves the host off;
        return what proved it. FencingError (naming each device and its
        answer) when no level does: nothing may be evacuated then.
        ``tell`` hears each device's attempt when there are several (a
        host's one device is the fencing's own news)."""
        attempts: list[DeviceAttempt] = []
        single = len(self.devices) == 1
        for level in self.levels:
            proofs = []
            for device in level.devices:
                attempt, proof, error = self._try(clock, level, device)
                attempts.append(attempt)
                if tell is not None and not single:
                    tell(attempt)
                if error is not None:
                    if single:
                        raise error
                    break
                proofs.append(proof)
            else:
                if single:
                    return proofs[0]
                LOG.info("Fencing %s: level %d proved it off", self.host,
                         level.number)
                return f"level {level.number}: " + "; ".join(proofs)
        raise FencingError(
            "no fencing level proved it off: "
            + "; ".join(attempt.describe() for attempt in attempts))

    @staticmethod
    def _try(clock: concurrency.Clock, level: Level, device: Device
             ) -> tuple[DeviceAttempt, str, FencingError | None]:
        started = clock.monotonic()
        try:
            proof, error = device.fencer.power_off(clock), None
        except FencingError as exc:
            proof, error = "", exc
        seconds = clock.monotonic() - started
        result = "failed" if error else "proved"
        METRICS.fencing_devices.labels(str(level.number), device.name,
                                       result).observe(seconds)
        attempt = DeviceAttempt(level.number, device.name,
                                device.fencer.driver, seconds,
                                error is None, str(error or proof))
        return attempt, proof, error

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
