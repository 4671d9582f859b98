"""An IPMI BMC for tests: a pyghmi Bmc subclass in a subprocess.

See ``tests.bmc._ipmi_server`` for what it emulates (and the two pyghmi
server fixes it needs).
"""

import json
import secrets
import socket
import time
from pathlib import Path

from tests.bmc import EmulatorProcess
from tests.bmc import write_atomically


class IpmiBmc(EmulatorProcess):
    """pyghmi BMC on 127.0.0.1:<free UDP port>, its host powered On.

    ``address``, ``port``, ``username``, ``password`` go in a credentials
    file; or use ``credentials()``. A power-off applies ``lag`` seconds
    after the request. ``agent_parameters()`` are ClusterLabs'
    ``fence_ipmilan``'s (ipmitool ``-I lanplus -C 3``).
    """

    driver = "ipmi"
    address = "127.0.0.1"
    port_kind = socket.SOCK_DGRAM

    def __init__(self, workdir: Path, *, username: str = "admin",
                 password: str | None = None, lag: float = 0.5) -> None:
        super().__init__(workdir)
        self.username = username
        self.password = password or secrets.token_urlsafe(12)
        self.lag = lag
        self._state = self.workdir / "state.json"
        self._control = self.workdir / "control.json"
        self._settings = {"password": self.password,
                          "ignore_power_off": False}
        self._write_control()

    def credentials(self) -> dict[str, str]:
        return {"driver": "ipmi", "address": self.address,
                "port": str(self.port), "username": self.username,
                "password": self.password}

    def agent_parameters(self) -> dict[str, str]:
        """``fence_ipmilan``'s standard-input parameters for this BMC,
        without ``action``: IPMI 2.0 (lanplus), cipher suite 3 (SHA-1,
        the only one the BMC has)."""
        return {"ip": self.address, "ipport": str(self.port),
                "username": self.username, "password": self.password,
                "lanplus": "1", "cipher": "3"}

    # -- behaviour ------------------------------------------------------------
    def refuse(self) -> None:
        """Require another password: logins now fail."""
        self._write_control(password=secrets.token_urlsafe(12))

    def accept(self) -> None:
        """Accept ``password`` again."""
        self._write_control(password=self.password)

    def ignore_power_off(self, ignore: bool = True) -> None:
        """Accept power-off requests but leave the power On."""
        self._write_control(ignore_power_off=ignore)

    def power_state(self) -> str:
        """The power as the BMC would report it now (read from its state
        file, so it works while the BMC hangs or refuses)."""
        state = json.loads(self._state.read_text(encoding="utf-8"))
        if state["off_at"] is not None and time.time() >= state["off_at"]:
            return "Off"
        return state["power"]

    # -- process --------------------------------------------------------------
    def start(self) -> None:
        self._state.unlink(missing_ok=True)
        super().start()

    def _command(self) -> list[str]:
        return ["-m", "tests.bmc._ipmi_server", "--port", str(self.port),
                "--username", self.username, "--state", str(self._state),
                "--control", str(self._control), "--lag", str(self.lag)]

    def _ready(self) -> bool:
        # Written by the BMC once its socket is bound.
        return self._state.exists()

    def _write_control(self, **changes: object) -> None:
        self._settings.update(changes)
        write_atomically(self._control, json.dumps(self._settings))
