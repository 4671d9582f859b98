"""Fencing devices for the flows' tests, with no BMC and no Ceph: a
power device whose BMC is out of reach or answers a fixed power state,
and a storage fence with scripted coverage and watchers (the real Ceph
driver is tested against a real Ceph, in tests/functional)."""

from recovery.exception import FencingError
from recovery.fencing import BmcSettings
from recovery.fencing import DeviceKind
from recovery.fencing import Fencer
from recovery.fencing import HostFence
from recovery.fencing import Level
from recovery.fencing import Secret
from recovery.fencing import Timing
from recovery.fencing.levels import Device

QUICK = Timing(timeout=0.3, poll_interval=0.1, attempts=1)


def settings(host: str, driver: str) -> BmcSettings:
    return BmcSettings(host=host, driver=driver, address=f"{host}-bmc",
                       username="admin", password=Secret("secret"))


class PowerDouble(Fencer):
    """A BMC: out of reach (``state`` None: no request is ever
    answered), or answering that the power is ``state`` and ignoring the
    power-off."""

    driver = "power-double"

    def __init__(self, host: str, state: str | None = None,
                 timing: Timing = QUICK):
        super().__init__(settings(host, self.driver), timing)
        self.state = state
        self.requests = 0

    def describe(self) -> str:
        return f"power-double power-off of {self.settings.host}-bmc"

    def _target(self) -> str:
        return f"{self.settings.host}-bmc"

    def _send_off(self, seconds: float) -> None:
        self.requests += 1
        if self.state is None:
            raise self._error("asking for ForceOff", "no route to host")

    def _read_power(self, seconds: float) -> str:
        if self.state is None:
            raise self._error("reading the power state", "no route to host")
        return self.state


class StorageDouble(Fencer):
    """A storage fence of one host: its "blocklist" always succeeds (or
    raises ``error``). It covers every volume; the host's root (image)
    and ephemeral disks only when ``ephemeral`` says they are on it too
    (Ceph: an ephemeral pool). ``watching``: the watchers it lists."""

    driver = "storage-double"
    kind = DeviceKind.STORAGE

    def __init__(self, host: str, *, ephemeral: bool = False,
                 watching: tuple[str, ...] = (), watch_timeout: float = 30.0,
                 error: FencingError | None = None):
        super().__init__(settings(host, self.driver), QUICK)
        self.ephemeral = ephemeral
        self.watching = watching
        self.watch_timeout = watch_timeout
        self.error = error
        self.fenced = 0
        self.asked: list[str] = []

    def describe(self) -> str:
        return f"storage-double blocklist of {self.settings.host}"

    def power_off(self, clock, lag=None) -> str:
        self.fenced += 1
        if self.error is not None:
            raise self.error
        return (f"blocklisted {self.settings.host}'s storage address, read "
                f"back")

    def coverage(self, servers, clock) -> dict[str, str | None]:
        self.asked.append("coverage")
        return {server.id: self._local_disk(server) for server in servers}

    def _local_disk(self, server) -> str | None:
        if self.ephemeral:
            return None
        host = self.settings.host
        if server.image_id:
            return (f"its root disk (image {server.image_id}) is on "
                    f"{host}'s local disk")
        if server.ephemeral_gb or server.swap_mb:
            return f"its ephemeral and swap disks are on {host}'s local disk"
        return None

    def watchers(self, servers, clock) -> list[str]:
        self.asked.append("watchers")
        return list(self.watching) if servers else []


def fence(host: str, *levels: list[Fencer]) -> HostFence:
    """``host``'s fencing: level 1, 2, ... of these devices."""
    return HostFence(host, [
        Level(number, [Device(f"{fencer.driver}-{number}-{at}", fencer)
                       for at, fencer in enumerate(devices)])
        for number, devices in enumerate(levels, start=1)])
