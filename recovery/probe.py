"""The liveness probe: does a host whose nova-compute Nova reports down
still run?

Nova's heartbeat is one process's. The probe asks the machine: a TCP
connection to each of a few ports (sshd's 22, libvirtd's 16509) on the
host's address. A connection accepted, or refused, is an answer: the
host's network stack runs, and so may its guests. Only silence on every
port (a timeout, no route) counts as no answer.

The probe never powers anything off, and its silence is weaker proof
than a BMC reading the power Off: it is used only for a host with no
fencing driver.
"""

import dataclasses
import errno
import logging
import socket
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

from oslo_config import cfg

from recovery import exception

LOG = logging.getLogger(__name__)

# The errors that mean a host answered a connection: it refused it, or
# reset it.
_ANSWERS = (errno.ECONNREFUSED, errno.ECONNRESET)

Connect = Callable[[tuple[str, int], float], Any]


def tcp_connect(address: tuple[str, int], timeout: float) -> None:
    socket.create_connection(address, timeout=timeout).close()


@dataclasses.dataclass(frozen=True)
class Probe:
    ports: tuple[int, ...]
    timeout: float
    addresses: Mapping[str, str] = dataclasses.field(default_factory=dict)
    connect: Connect = tcp_connect

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts,
                  connect: Connect = tcp_connect) -> "Probe | None":
        """The configured probe; None when ``[detector] liveness_probe``
        is empty."""
        group = conf.detector
        if not group.liveness_probe:
            return None
        return cls(tuple(group.liveness_probe), group.probe_timeout,
                   dict(group.probe_addresses), connect)

    def describe(self, host: str) -> str:
        ports = ", ".join(str(port) for port in self.ports)
        return f"TCP port(s) {ports} of {host} ({self.address(host)})"

    def address(self, host: str) -> str:
        return self.addresses.get(host, host)

    def answer(self, host: str) -> str | None:
        """How ``host`` answered, or None when it is silent on every
        port. Raises ``ProbeFailed`` when it cannot be asked."""
        address = self.address(host)
        for port in self.ports:
            try:
                self.connect((address, port), self.timeout)
            except socket.gaierror as exc:
                # Not silence: nothing was asked. Never proof of death.
                raise exception.ProbeFailed(
                    f"cannot probe {host}: its address {address!r} does "
                    f"not resolve ({exc}); set [detector] probe_addresses "
                    f"for it") from exc
            except OSError as exc:
                if exc.errno in _ANSWERS:
                    return (f"{host} ({address}) answers on TCP port "
                            f"{port}: the connection was refused, so its "
                            f"network stack runs")
                LOG.debug("Probe of %s:%d: %s", address, port, exc)
                continue
            return (f"{host} ({address}) answers on TCP port {port}: a "
                    f"connection was accepted")
        return None
