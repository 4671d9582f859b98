"""The liveness probe: does a host whose nova-compute Nova reports down
still run?

Nova's heartbeat is one process's. The probe asks the machine: a TCP
connection to each of a few ports (sshd's 22, libvirtd's 16509) on the
host's address. A connection accepted, or refused, is an answer: the
host's network stack runs, and so may its guests. Only silence on every
port (a timeout, no route) counts as no answer.

A host may have several addresses to probe, one per network (``[detector]
probe_addresses``, ``host:10.0.0.5+10.1.0.5``): it is silent only when
it is silent on every one of them.

The probe never powers anything off, and its silence is weaker proof
than a BMC reading the power Off: it is used only for a host with no
fencing driver.
"""

import dataclasses
import errno
import logging
import math
import socket
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

from oslo_config import cfg

from recovery import concurrency
from recovery import exception

LOG = logging.getLogger(__name__)

# The errors that mean a host answered a connection: it refused it, or
# reset it.
_ANSWERS = (errno.ECONNREFUSED, errno.ECONNRESET)
# Between a host's addresses in ``[detector] probe_addresses``.
ADDRESS_SEPARATOR = "+"

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
        return (f"TCP port(s) {ports} of {host} "
                f"({', '.join(self.addresses_of(host))})")

    def addresses_of(self, host: str) -> tuple[str, ...]:
        """Where ``host`` is probed: its configured addresses, else its
        name."""
        return addresses_of(self.addresses, host) or (host,)

    def answer(self, host: str) -> str | None:
        """How ``host`` answered, or None when it is silent on every
        port of every address: all asked at once, each for ``timeout``.
        Raises ``ProbeFailed`` when it cannot be asked."""
        asks = [(address, port) for address in self.addresses_of(host)
                for port in self.ports]
        outcomes = concurrency.task_pool(max(len(asks), 1)).run(
            lambda ask: self._ask(host, *ask), asks)
        for outcome in outcomes:
            if outcome.error is not None:
                raise outcome.error
        return next((o.value for o in outcomes if o.value is not None), None)

    def _ask(self, host: str, address: str, port: int) -> str | None:
        try:
            self.connect((address, port), self.timeout)
        except socket.gaierror as exc:
            # Not silence: nothing was asked. Never proof of death.
            raise exception.ProbeFailed(
                f"cannot probe {host}: its address {address!r} does not "
                f"resolve ({exc}); set [detector] probe_addresses for "
                f"it") from exc
        except OSError as exc:
            LOG.debug("Probe of %s:%d: %s", address, port, exc)
            return _answered(host, address, port, exc.errno)
        return _answered(host, address, port, 0)


def addresses_of(configured: Mapping[str, str],
                 host: str) -> tuple[str, ...]:
    """``host``'s addresses in ``[detector] probe_addresses`` (several
    joined by "+"); () when it has none there."""
    value = configured.get(host) or ""
    return tuple(address.strip()
                 for address in value.split(ADDRESS_SEPARATOR)
                 if address.strip())


@dataclasses.dataclass(frozen=True)
class View:
    """What the probes of one host have shown lately (monotonic times)."""

    # Seconds since the first silent probe after its last answer; None
    # while it answers, or when nothing recent is known.
    silent_for: float | None
    # How it last answered, if it ever did.
    answer: str | None = None
    # Why it cannot be probed (its name does not resolve): never silence.
    unprobed: str | None = None


@dataclasses.dataclass
class _History:
    addresses: tuple[str, ...] = ()
    resolved_at: float = -math.inf
    unprobed: str | None = None
    answer: str | None = None
    silent_since: float | None = None
    probed_at: float | None = None       # the last probe's end


class Prober:
    """Probe every watched host each ``probe_interval``, all at once,
    with non-blocking connects polled together (``connect_all``): one
    socket per port of each host in flight, and no thread per host.

    One task runs ``run``; the detector sets the hosts (``watch``) and
    reads ``view``; a lock guards the histories they share. ``record``
    is the loop's outcome of one probe, and how the unit tests feed it.
    """

    # How long a resolved address is kept.
    RESOLVE_EVERY = 300.0

    def __init__(self, conf: cfg.ConfigOpts, clock: concurrency.Clock,
                 resolve: Callable[[str], str] | None = None):
        self._conf = conf
        self._clock = clock
        self._resolve = resolve or _resolve
        self._lock = concurrency.Lock()
        self._hosts: dict[str, _History] = {}

    # -- the detector's side ------------------------------------------------
    def watch(self, hosts: Iterable[str]) -> None:
        """Probe exactly ``hosts`` from now on."""
        hosts = set(hosts)
        with self._lock:
            for gone in set(self._hosts) - hosts:
                del self._hosts[gone]
            for host in hosts - set(self._hosts):
                self._hosts[host] = _History()

    def hosts(self) -> list[str]:
        with self._lock:
            return list(self._hosts)

    def view(self, host: str) -> View:
        """What the recent probes of ``host`` showed. A history with no
        probe ended within a few intervals is not news: not silence."""
        now = self._clock.monotonic()
        group = self._conf.detector
        with self._lock:
            history = self._hosts.get(host)
            if history is None:
                return View(None)
            if history.unprobed is not None:
                return View(None, history.answer, history.unprobed)
            recent = (history.probed_at is not None and now
                      - history.probed_at <= 3 * group.probe_interval
                      + self._timeout())
            if history.silent_since is None or not recent:
                return View(None, history.answer)
            return View(now - history.silent_since, history.answer)

    # -- the probes ---------------------------------------------------------
    def record(self, host: str, started: float, answer: str | None) -> None:
        """A probe of ``host`` begun at ``started`` ended now: ``answer``,
        or None for silence on every port."""
        with self._lock:
            history = self._hosts.get(host)
            if history is None:
                return
            history.probed_at = self._clock.monotonic()
            if answer is not None:
                history.answer, history.silent_since = answer, None
            elif history.silent_since is None:
                history.silent_since = started

    def run(self, stopping: concurrency.Event) -> None:
        """Probe in rounds, one each ``probe_interval``, until
        ``stopping`` is set."""
        while not stopping.is_set():
            started = self._clock.monotonic()
            self._round(started)
            rest = (started + self._conf.detector.probe_interval
                    - self._clock.monotonic())
            if rest > 0:
                self._clock.wait(stopping, rest)

    def _timeout(self) -> float:
        group = self._conf.detector
        return min(group.probe_timeout, group.probe_interval)

    def _round(self, started: float) -> None:
        """Probe every host at once, and record what each did."""
        ports = tuple(self._conf.detector.liveness_probe)
        targets = {}
        for host in self.hosts():
            addresses = self._addresses_of(host, started)
            if addresses:
                targets[host] = addresses
        if not ports or not targets:
            return
        answers = concurrency.offload(connect_all, targets, ports,
                                      self._timeout(), self._clock.monotonic)
        for host, answer in answers.items():
            self.record(host, started, answer)

    def _addresses_of(self, host: str, now: float) -> tuple[str, ...]:
        """``host``'s addresses: configured, else its name resolved
        again every RESOLVE_EVERY; () when it does not resolve, with the
        reason kept."""
        configured = addresses_of(self._conf.detector.probe_addresses, host)
        with self._lock:
            history = self._hosts.get(host)
            if history is None:
                return ()
            if configured:
                history.addresses, history.unprobed = configured, None
                return configured
            if now - history.resolved_at < self.RESOLVE_EVERY:
                return history.addresses
        try:
            addresses, unprobed = (self._resolve(host),), None
        except OSError as exc:
            addresses, unprobed = (), (
                f"cannot probe {host}: its name does not resolve ({exc}); "
                f"set [detector] probe_addresses for it")
        with self._lock:
            history = self._hosts.get(host)
            if history is not None:
                history.addresses, history.unprobed = addresses, unprobed
                history.resolved_at = now
        return addresses


_IN_PROGRESS = (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN)


def connect_all(targets: Mapping[str, Sequence[str]],
                ports: tuple[int, ...], timeout: float,
                monotonic: Callable[[], float]) -> dict[str, str | None]:
    """Try a TCP connection to each port of each address of each host at
    once (host -> its addresses), polled together, for at most
    ``timeout`` seconds; return how each host answered, or None for
    silence on every port of every address. Each address and port costs
    one socket and one poll event, whatever their number. Runs on a
    native thread (``concurrency.offload``)."""
    sockets, select = concurrency.native("socket"), concurrency.native(
        "select")
    answers: dict[str, str | None] = {host: None for host in targets}
    # fd -> socket, host, address, port
    flying: dict[int, tuple[Any, str, str, int]] = {}
    poll = select.poll()
    deadline = monotonic() + timeout
    try:
        for host, address, port in _asks(targets, ports):
            sock = sockets.socket(_family(address), sockets.SOCK_STREAM)
            sock.setblocking(False)
            error = sock.connect_ex((address, port))
            if error in _IN_PROGRESS:
                poll.register(sock.fileno(), select.POLLOUT)
                flying[sock.fileno()] = (sock, host, address, port)
                continue
            sock.close()
            answers[host] = answers[host] or _answered(
                host, address, port, error)
        while flying:
            left = deadline - monotonic()
            if left <= 0:
                break
            for fd, _ in poll.poll(left * 1000):
                sock, host, address, port = flying.pop(fd)
                poll.unregister(fd)
                error = sock.getsockopt(sockets.SOL_SOCKET, sockets.SO_ERROR)
                sock.close()
                answers[host] = answers[host] or _answered(
                    host, address, port, error)
    finally:
        for sock, _, _, _ in flying.values():
            sock.close()
    return answers


def _asks(targets: Mapping[str, Sequence[str]], ports: tuple[int, ...]
          ) -> Iterator[tuple[str, str, int]]:
    """Each host, address and port to try."""
    for host, addresses in targets.items():
        for address in addresses:
            for port in ports:
                yield host, address, port


def _answered(host: str, address: str | None, port: int,
              error: int) -> str | None:
    """How ``host`` answered a connection that ended with ``error`` (0:
    accepted), or None for no answer on that port."""
    if error == 0:
        return (f"{host} ({address}) answers on TCP port {port}: a "
                f"connection was accepted")
    if error in _ANSWERS:
        return (f"{host} ({address}) answers on TCP port {port}: the "
                f"connection was refused, so its network stack runs")
    return None


def _family(address: str) -> int:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def _resolve(host: str) -> str:
    return socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][4][0]
