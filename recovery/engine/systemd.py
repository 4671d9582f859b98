"""The systemd notify protocol (sd_notify): READY, STATUS, WATCHDOG,
EXTEND_TIMEOUT_USEC.

A datagram to the socket named by NOTIFY_SOCKET; without it (not run by
systemd) every call does nothing.
"""

import logging
import os
import socket

LOG = logging.getLogger(__name__)


class Notifier:
    def __init__(self, environ: dict[str, str] | None = None):
        environ = os.environ if environ is None else environ
        address = environ.get("NOTIFY_SOCKET", "")
        if address.startswith("@"):
            address = "\0" + address[1:]        # abstract namespace
        self._address = address or None
        usec = environ.get("WATCHDOG_USEC", "")
        pid = environ.get("WATCHDOG_PID", "")
        watched = usec.isdigit() and (not pid or pid == str(os.getpid()))
        # Ping at half the deadline, as sd_watchdog_enabled(3) advises.
        self.watchdog_interval = int(usec) / 2e6 if watched else None

    def notify(self, **fields: str) -> None:
        if self._address is None:
            return
        message = "\n".join(f"{k.upper()}={v}" for k, v in fields.items())
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                # Never wait: a listener that stopped reading must not
                # stall the loop that pings the watchdog.
                sock.setblocking(False)
                sock.connect(self._address)
                sock.sendall(message.encode())
        except OSError as exc:
            LOG.warning("Could not notify systemd: %s", exc)

    def ready(self, status: str) -> None:
        self.notify(ready="1", status=status)

    def status(self, status: str) -> None:
        self.notify(status=status)

    def extend_timeout(self, seconds: float, status: str) -> None:
        """Still starting: systemd waits ``seconds`` more for the next
        message, whatever the unit's start timeout (systemd 236+)."""
        self.notify(extend_timeout_usec=str(round(seconds * 1e6)),
                    status=status)

    def watchdog(self) -> None:
        self.notify(watchdog="1")

    def stopping(self, status: str) -> None:
        self.notify(stopping="1", status=status)
