"""A Redfish BMC for tests: the real sushy-emulator, fake driver, one host.

The emulator requires a password (HTTP basic auth against an htpasswd
file it re-reads on every request) and keeps its state in its own
directory. The fake driver applies a power change 1-11 s after the
request (``fast=True``: within 1 s), like a real BMC's lag.
"""

import base64
import contextlib
import pickle
import secrets
import sqlite3
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import bcrypt

from tests.bmc import EmulatorProcess
from tests.bmc import free_port
from tests.bmc import write_atomically


class RedfishBmc(EmulatorProcess):
    """sushy-emulator in a subprocess on 127.0.0.1:<free port>.

    ``address`` and ``system`` go in a credentials file (``system`` as
    ``system``), with ``username`` and ``password``; or use
    ``credentials()``.
    """

    driver = "redfish"

    def __init__(self, workdir: Path, *, power_state: str = "On",
                 username: str = "admin", password: str | None = None,
                 fast: bool = False) -> None:
        super().__init__(workdir)
        self.username = username
        self.password = password or secrets.token_urlsafe(12)
        self.uuid = str(uuid.uuid4())
        self.port = 0
        self._initial_power = power_state
        self._fast = fast
        self._state_dir = self.workdir / "state"
        self._htpasswd = self.workdir / "htpasswd"
        self._ignore_flag = self.workdir / "ignore-power-off"
        self._write_htpasswd(self.password)

    @property
    def address(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def system(self) -> str:
        return f"/redfish/v1/Systems/{self.uuid}"

    def credentials(self) -> dict[str, str]:
        return {"driver": "redfish", "address": self.address,
                "system": self.system, "username": self.username,
                "password": self.password}

    # -- behaviour ------------------------------------------------------------
    def refuse(self) -> None:
        """Require another password: requests now get 401."""
        self._write_htpasswd(secrets.token_urlsafe(12))

    def accept(self) -> None:
        """Accept ``password`` again."""
        self._write_htpasswd(self.password)

    def ignore_power_off(self, ignore: bool = True) -> None:
        """Accept power-off requests (204) but leave the power On."""
        if ignore:
            self._ignore_flag.touch()
        else:
            self._ignore_flag.unlink(missing_ok=True)

    def power_state(self) -> str:
        """The power as the emulator would report it now, read from its
        state database, so it works while the BMC hangs or refuses."""
        record = self._record()
        pending = record.get("pending_power")
        if pending and time.time() >= pending["apply_time"]:
            return "On" if "On" in pending["power_state"] else "Off"
        return record["power_state"]

    # -- emulator process -----------------------------------------------------
    def start(self) -> None:
        config = self.workdir / "emulator.conf"
        config.write_text(
            f"SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'\n"
            f"SUSHY_EMULATOR_STATE_DIR = {str(self._state_dir)!r}\n"
            f"SUSHY_EMULATOR_AUTH_FILE = {str(self._htpasswd)!r}\n"
            f"SUSHY_EMULATOR_FAKE_SYSTEMS = [{{"
            f"'uuid': {self.uuid!r}, 'name': 'host-{self.uuid[:8]}', "
            f"'power_state': {self._initial_power!r}, "
            f"'external_notifier': False, 'nics': []}}]\n",
            encoding="utf-8")
        self._config = config
        self.port = free_port()
        super().start()

    def _command(self) -> list[str]:
        command = ["-m", "tests.bmc._sushy_emulator",
                   "--ignore-flag", str(self._ignore_flag),
                   "--fake", "--port", str(self.port),
                   "--config", str(self._config)]
        if self._fast:
            command.append("--fast")
        return command

    def _ready(self) -> bool:
        # Reading the system also makes the fake driver create its state
        # database, which power_state() reads.
        token = base64.b64encode(
            f"{self.username}:{self.password}".encode()).decode()
        request = urllib.request.Request(
            self.address + self.system,
            headers={"Authorization": f"Basic {token}"})
        try:
            with urllib.request.urlopen(request, timeout=1) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def _write_htpasswd(self, password: str) -> None:
        # bcrypt is the only digest the emulator takes; 4 rounds: fast.
        digest = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4))
        write_atomically(self._htpasswd,
                         f"{self.username}:{digest.decode()}\n")

    def _record(self) -> dict:
        database = self._state_dir / "fakedriver.sqlite"
        with contextlib.closing(sqlite3.connect(database, timeout=5)) as db:
            rows = db.execute("select key, value from cache").fetchall()
        for key, value in rows:
            if pickle.loads(key) == self.uuid:
                return pickle.loads(value)
        raise LookupError(f"system {self.uuid} is not in {database}")
