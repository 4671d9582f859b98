"""kdump messages for tests: the real ``fence_kdump_send`` (Debian
``fence-agents``), as a crashed host's kdump kernel runs it::

    from tests.bmc.kdump import send_kdump, kdump_sender

    send_kdump("127.0.0.1", port)               # one message, from 127.0.0.1
    send_kdump(host.namespace.gateway, port,    # from a netlab host:
               netns=host.namespace.name)       # source = host.address
    with kdump_sender(gateway, port, netns=name, interval=1):
        ...                                     # one message a second

``fence_kdump`` (the listener, ``action=off``, ``nodename=ADDRESS``,
``ipport=PORT``, ``timeout=SECONDS`` on its standard input) binds the
UDP port on every address and knows the node by the message's *source
address* only: ``nodename`` is resolved to addresses, and a message from
any other address is discarded ("discard message from ...") as if none
came. ``fence_kdump_send`` has no option to choose its source address:

- on loopback every message comes from 127.0.0.1, whatever 127.0.0.x it
  is sent to (the kernel's source for the local routes), so only
  ``nodename=127.0.0.1`` can be fenced there;
- from a netlab host (``tests.netlab``), run the sender inside its
  namespace (``netns=host.namespace.name``) towards the root side of its
  veth (``host.namespace.gateway``, 10.231.x.1): the message comes from
  ``host.address`` (10.231.x.2), the host's own address, as from a
  crashed compute host. A ``fence_kdump`` in the root namespace with
  ``nodename=host.address`` receives it.

A message sent before ``fence_kdump`` has bound its port is lost (UDP):
``wait_udp_bound(port)`` waits for that, or use ``kdump_sender``, which
repeats its message as a kdump kernel does. ``fence_kdump`` exits within
milliseconds of a valid message.
"""

import contextlib
import subprocess
from collections.abc import Iterator

from recovery.concurrency import Clock
from recovery.waiting import wait_for
from tests.bmc.agents import FENCE_KDUMP_SEND

DEFAULT_PORT = 7410


def _command(address: str, port: int, count: int, interval: int,
             netns: str | None, sender: str) -> list[str]:
    if isinstance(interval, float) and not interval.is_integer():
        raise ValueError("fence_kdump_send takes whole seconds")
    command = [sender, "--ipport", str(port), "--count", str(count),
               "--interval", str(int(interval)), address]
    if netns is not None:
        command = ["ip", "netns", "exec", netns, *command]
    return command


def send_kdump(address: str, port: int = DEFAULT_PORT, *, count: int = 1,
               interval: int = 1, netns: str | None = None,
               timeout: float = 30.0, sender: str = FENCE_KDUMP_SEND
               ) -> subprocess.CompletedProcess[str]:
    """Send ``count`` kdump messages to ``address``:``port``/udp,
    ``interval`` whole seconds apart (none after the last), from inside
    network namespace ``netns`` if given; returns once sent. Raises
    ``subprocess.CalledProcessError`` if the sender fails."""
    if count < 1:
        raise ValueError("count >= 1 (kdump_sender() sends forever)")
    return subprocess.run(
        _command(address, port, count, interval, netns, sender),
        capture_output=True, text=True, timeout=timeout, check=True,
        stdin=subprocess.DEVNULL)


@contextlib.contextmanager
def kdump_sender(address: str, port: int = DEFAULT_PORT, *,
                 interval: int = 1, netns: str | None = None,
                 sender: str = FENCE_KDUMP_SEND
                 ) -> Iterator[subprocess.Popen[str]]:
    """A kdump kernel's sender: a message to ``address``:``port``/udp at
    once, then every ``interval`` whole seconds, until the block ends."""
    process = subprocess.Popen(
        _command(address, port, 0, interval, netns, sender),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        if process.stdout is not None:
            process.stdout.close()


def udp_bound(port: int) -> bool:
    """Whether a socket of this network namespace has UDP ``port`` bound
    (IPv4 or IPv6, any address)."""
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            with open(table, encoding="ascii") as handle:
                next(handle)  # the header
                for line in handle:
                    local = line.split()[1]  # "0100007F:1CF2"
                    if int(local.rsplit(":", 1)[1], 16) == port:
                        return True
        except FileNotFoundError:
            continue
    return False


def wait_udp_bound(port: int, timeout: float = 10.0) -> None:
    """Wait until UDP ``port`` is bound here (a listening fence_kdump)."""
    wait_for(lambda: udp_bound(port), what=f"UDP port {port} to be bound",
             timeout=timeout, interval=0.01, clock=Clock())
