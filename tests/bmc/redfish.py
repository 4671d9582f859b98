"""A Redfish BMC for tests: the real sushy-emulator, fake driver, one host.

The emulator requires a password (HTTP basic auth against an htpasswd
file it re-reads on every request) and keeps its state in its own
directory. The fake driver applies a power change 1-11 s after the
request (``fast=True``: within 1 s), like a real BMC's lag.

``tls=True`` serves HTTPS with a self-signed certificate made for this
BMC (``cert_path``), as ClusterLabs' ``fence_redfish`` requires; its
``agent_parameters()`` are that agent's standard-input parameters.
"""

import base64
import contextlib
import datetime
import ipaddress
import os
import pickle
import secrets
import sqlite3
import ssl
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import bcrypt
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.bmc import EmulatorProcess
from tests.bmc import write_atomically


class RedfishBmc(EmulatorProcess):
    """sushy-emulator in a subprocess on 127.0.0.1:<free port>.

    ``address`` and ``system`` go in a credentials file (``system`` as
    ``system``), with ``username`` and ``password``; or use
    ``credentials()``. With ``tls=True`` it serves HTTPS (a self-signed
    certificate for 127.0.0.1, ``cert_path``) instead of HTTP. A power
    change applies 1-11 s after the request (at random), within 1 s with
    ``fast``, within ``delay`` s (more than ``delay`` - 1) with ``delay``;
    a request sent again before then starts the delay anew. ``seed``:
    the random delays in the same order on every run.
    """

    driver = "redfish"

    def __init__(self, workdir: Path, *, power_state: str = "On",
                 username: str = "admin", password: str | None = None,
                 fast: bool = False, tls: bool = False,
                 delay: int | None = None,
                 seed: int | None = None) -> None:
        super().__init__(workdir)
        self.username = username
        self.password = password or secrets.token_urlsafe(12)
        self.uuid = str(uuid.uuid4())
        self._initial_power = power_state
        self._fast = fast
        self._delay = delay
        self._seed = seed
        self.tls = tls
        self.cert_path = self.workdir / "cert.pem"
        self._key_path = self.workdir / "key.pem"
        self._state_dir = self.workdir / "state"
        self._htpasswd = self.workdir / "htpasswd"
        self._ignore_flag = self.workdir / "ignore-power-off"
        self._health_file = self.workdir / "health"
        self._write_htpasswd(self.password)

    @property
    def address(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    @property
    def system(self) -> str:
        return f"/redfish/v1/Systems/{self.uuid}"

    def credentials(self) -> dict[str, str]:
        return {"driver": "redfish", "address": self.address,
                "system": self.system, "username": self.username,
                "password": self.password}

    def agent_parameters(self) -> dict[str, str]:
        """``fence_redfish``'s standard-input parameters for this BMC,
        without ``action`` (the agent speaks HTTPS only: ``tls=True``)."""
        if not self.tls:
            raise RuntimeError("fence_redfish speaks HTTPS only: make the "
                               "RedfishBmc with tls=True")
        return {"ip": "127.0.0.1", "ipport": str(self.port),
                "username": self.username, "password": self.password,
                "ssl_insecure": "1", "systems_uri": self.system}

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

    def set_health(self, health: str | None) -> None:
        """Report the System's Status Health as ``health`` (OK, Warning,
        Critical) from now on; None: the emulator's own again."""
        if health is None:
            self._health_file.unlink(missing_ok=True)
        else:
            self._health_file.write_text(health)

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
        if self.tls:
            _self_signed(self.cert_path, self._key_path)
            with open(config, "a", encoding="utf-8") as handle:
                handle.write(
                    f"SUSHY_EMULATOR_SSL_CERT = {str(self.cert_path)!r}\n"
                    f"SUSHY_EMULATOR_SSL_KEY = {str(self._key_path)!r}\n")
        self._config = config
        super().start()

    def _command(self) -> list[str]:
        command = ["-m", "tests.bmc._sushy_emulator",
                   "--ignore-flag", str(self._ignore_flag),
                   "--health-file", str(self._health_file),
                   "--fake", "--port", str(self.port),
                   "--config", str(self._config)]
        if self._fast:
            command.append("--fast")
        elif self._delay:
            command += ["--delay", str(self._delay)]
        elif self._seed is not None:
            command += ["--seed", str(self._seed)]
        return command

    def _ready(self) -> bool:
        # Reading the system also makes the fake driver create its state
        # database, which power_state() reads.
        token = base64.b64encode(
            f"{self.username}:{self.password}".encode()).decode()
        request = urllib.request.Request(
            self.address + self.system,
            headers={"Authorization": f"Basic {token}"})
        context = None
        if self.tls:
            # Self-signed: checked by nothing but the test's own hands.
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        try:
            with urllib.request.urlopen(request, timeout=1,
                                        context=context) as response:
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


def _self_signed(cert_path: Path, key_path: Path) -> None:
    """A self-signed certificate for 127.0.0.1 and its key (mode 600),
    valid for a day."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder()
            .subject_name(name).issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM,
                                serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    with open(os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                      0o600), "wb") as handle:
        handle.write(key_pem)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
