"""Emulated BMCs for tests: Redfish (sushy-emulator) and IPMI (pyghmi).

Each emulator runs in its own subprocess on 127.0.0.1 and a free port,
for one test, and is stopped after it::

    from tests.bmc.redfish import RedfishBmc
    from tests.bmc.ipmi import IpmiBmc

    with RedfishBmc(tmp_path / "bmc") as bmc:
        ...  # bmc.address, bmc.system, bmc.username, bmc.password
        bmc.power_state()        # "On" / "Off", read behind the BMC's back
        bmc.refuse()             # the BMC now refuses the credentials
        bmc.hang()               # the BMC stops answering (SIGSTOP)
        bmc.ignore_power_off()   # power-off requests accepted, power stays On

``bmc.credentials()`` is the host's section of a credentials file, and
``write_credentials_file(path, {host: bmc, ...})`` writes one. The pytest
fixtures ``redfish_bmc``, ``fast_redfish_bmc`` (power-off applied within
1 s instead of 1-11 s) and ``ipmi_bmc`` are in ``tests.bmc.fixtures``.
Nothing here puts a password on a command line.
"""

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from typing import Protocol

from recovery.concurrency import Clock
from recovery.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
# A port found free may be taken, by another process's outgoing
# connection, before the emulator binds it: it then tries another.
PORT_ATTEMPTS = 3


class Bmc(Protocol):
    driver: str

    def credentials(self) -> dict[str, str]:
        """The keys of a credentials-file section for this BMC."""

    def power_state(self) -> str:
        """The emulated host's power, "On" or "Off"."""


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A port nothing listens on now (TCP, or UDP with SOCK_DGRAM)."""
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_credentials_file(path: Path, hosts: dict[str, Bmc]) -> Path:
    """Write a credentials file with one section per host, mode 600."""
    return write_sections(path, {host: bmc.credentials()
                                 for host, bmc in hosts.items()})


def write_sections(path: Path,
                   sections: Mapping[str, Mapping[str, str]]) -> Path:
    """Write a credentials file of these sections (``DEFAULT`` is the
    file's [DEFAULT]), mode 600."""
    text = "".join(f"[{name}]\n" + "".join(f"{key} = {value}\n"
                                           for key, value in keys.items())
                   + "\n" for name, keys in sections.items())
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
              "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` so a reader never sees half a file."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


class PortTaken(RuntimeError):
    """The emulator's port was taken between its choice and the bind."""


class EmulatorProcess:
    """A BMC emulator subprocess on a free port (``port``, of
    ``port_kind``): start, wait until ready, hang, stop."""

    port_kind = socket.SOCK_STREAM

    def __init__(self, workdir: Path) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.workdir / "emulator.log"
        self.port = 0
        self._log_start = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._stopped = False

    # -- to implement ------------------------------------------------------
    def _command(self) -> list[str]:
        raise NotImplementedError

    def _ready(self) -> bool:
        raise NotImplementedError

    # -- life cycle -----------------------------------------------------------
    def __enter__(self) -> Any:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        for attempt in range(1, PORT_ATTEMPTS + 1):
            self.port = free_port(self.port_kind)
            try:
                self._launch()
                return
            except PortTaken:
                if attempt == PORT_ATTEMPTS:
                    raise

    def _launch(self) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        self._log_start = (self.log_path.stat().st_size
                           if self.log_path.exists() else 0)
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                [sys.executable, *self._command()], stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, cwd=self.workdir)
        try:
            wait_for(self._check_started, what=f"{type(self).__name__} to "
                     f"answer", timeout=START_TIMEOUT, interval=0.05,
                     clock=Clock())
        except BaseException:
            self.stop()
            raise

    def _check_started(self) -> bool:
        assert self._process is not None
        if self._process.poll() is not None:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_start)
                taken = b"Address already in use" in log.read()
            raise (PortTaken if taken else RuntimeError)(
                f"{type(self).__name__} exited with {self._process.returncode}"
                f":\n{self.log_tail()}")
        return self._ready()

    def stop(self) -> None:
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            if self._stopped:
                process.send_signal(signal.SIGCONT)
            process.terminate()
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(STOP_TIMEOUT)
        self._process = None
        self._stopped = False

    def hang(self) -> None:
        """Freeze the BMC: connections and packets are never answered."""
        self._signal(signal.SIGSTOP)
        self._stopped = True

    def resume(self) -> None:
        self._signal(signal.SIGCONT)
        self._stopped = False

    def _signal(self, signum: int) -> None:
        if self._process is None:
            raise RuntimeError(f"{type(self).__name__} is not running")
        self._process.send_signal(signum)

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])
