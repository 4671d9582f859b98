"""A network-namespace lab: test hosts and engines, each with a network of
its own, all on this machine (root only: ``ip netns``).

A *test host* is a network namespace joined to the root namespace by a
veth pair on a /30 of 10.231.0.0/16 (the root side .1, the host .2),
with TCP listeners on its probe ports (a small child process, as a live
host's sshd and libvirtd)::

    lab = NetLab()
    host = lab.add_host("compute-1", ports=(22, 16509),
                        stop_compute=nova.fail_host,
                        start_compute=nova.restore_host)
    host.power_loss()   # link down (packets vanish), nova-compute stops
    host.restore()      # link up, nova-compute restarted
    host.cut_link()     # link down only: nova-compute heartbeats on
    host.crash_compute()  # nova-compute stops, the host runs on
    host.flap(1.0)      # link down for 1 s, then up
    host.link_bmc(bmc)  # the BMC reading Off powers the host off too
    lab.close()

An *engine namespace* holds one ``recovery-engine`` that reaches what it
is given (the database, Nova) through ``TcpProxy`` instances on the root
side of its veth, and is cut off from every test host (an
``unreachable`` route for 10.231.0.0/16).

Only the /30 routes exist: no default route, nothing that could send a
packet off the machine. Names carry this process's id (``rt<pid>h<n>``,
``rt<pid>e<n>``); every namespace and veth is deleted at ``close()``,
what a crash left is swept at exit, and a dead session's leftovers by
the next lab. The fixtures ``netlab`` and ``module_netlab`` skip (fail
under CI) when the lab cannot run here.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import ipaddress
import itertools
import os
import re
import select
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.tcpproxy import TcpProxy

ROOT = Path(__file__).resolve().parents[1]
SUBNET = ipaddress.ip_network("10.231.0.0/16")
PREFIX = f"rt{os.getpid()}"
PROBE_PORTS = (22, 16509)
BMC_POLL = 0.1
START_TIMEOUT = 10.0
LINK_UP_TIMEOUT = 5.0
_NAME = re.compile(r"^rt(\d+)[he]\d+$")
# Serialises the choice of a free /30 between processes.
_LOCK_FILE = "/tmp/recovery-netlab.lock"
_numbers = itertools.count(1)
_sweep_registered = False

Compute = Callable[[str], Any]


class NetlabError(RuntimeError):
    pass


def ip(*args: str, netns: str | None = None, check: bool = True) -> str:
    """Run ``ip [-n NETNS] ARGS``; its output."""
    command = ["ip", *(("-n", netns) if netns else ()), *args]
    done = subprocess.run(command, capture_output=True, text=True,
                          timeout=30)
    if check and done.returncode != 0:
        raise NetlabError(f"{' '.join(command)}: {done.stderr.strip()}")
    return done.stdout


def unavailable() -> str | None:
    """Why the lab cannot run here, or None."""
    if os.geteuid() != 0:
        return "the network-namespace lab needs root (ip netns)"
    if shutil.which("ip") is None:
        return "the network-namespace lab needs iproute2's ip command"
    try:
        ip("netns", "list")
    except (NetlabError, OSError) as exc:
        return f"the network-namespace lab cannot list namespaces: {exc}"
    return None


# -- namespaces ------------------------------------------------------------
class Namespace:
    """A network namespace joined to the root one by a veth pair on a /30
    of its own: the root side (named as the namespace) has ``gateway``,
    the namespace side (eth0) has ``address``. Nothing else is routed."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.gateway = self.address = ""
        ip("netns", "add", name)
        try:
            ip("link", "add", name, "type", "veth", "peer", "name", "eth0",
               "netns", name)
            with _allocation_lock():
                block = _free_block()
                ip("addr", "add", f"{block[1]}/30", "dev", name)
            self.gateway, self.address = str(block[1]), str(block[2])
            ip("addr", "add", f"{self.address}/30", "dev", "eth0",
               netns=name)
            ip("link", "set", "lo", "up", netns=name)
            ip("link", "set", "eth0", "up", netns=name)
            ip("link", "set", name, "up")
            # A static neighbour: an outage lasts as long as the link is
            # down, not until the next ARP retry (up to a second later).
            mac = re.search(r"link/ether (\S+)", ip(
                "-o", "link", "show", "dev", "eth0", netns=name)).group(1)
            ip("neigh", "replace", self.address, "lladdr", mac, "dev", name,
               "nud", "permanent")
        except BaseException:
            self.delete()
            raise

    def command(self, argv: Iterable[str]) -> list[str]:
        """``argv`` run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *argv]

    def set_link(self, up: bool) -> None:
        """The namespace side of the veth up or down. Down, packets to
        the namespace vanish at once: connections time out, nothing
        answers."""
        ip("link", "set", "eth0", "up" if up else "down", netns=self.name)

    def delete(self) -> None:
        _delete(self.name)


def _delete(name: str) -> None:
    """Delete namespace ``name`` and its veth pair, whatever is left."""
    ip("link", "del", name, check=False)
    ip("netns", "del", name, check=False)


@contextlib.contextmanager
def _allocation_lock() -> Iterator[None]:
    with open(_LOCK_FILE, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _free_block() -> ipaddress.IPv4Network:
    """The first /30 of SUBNET with no address of the root namespace."""
    used = set()
    for line in ip("-o", "-4", "addr", "show").splitlines():
        match = re.search(r"\binet (\S+)", line)
        if match:
            used.add(ipaddress.ip_interface(match.group(1)).network)
    for block in SUBNET.subnets(new_prefix=30):
        if not any(block.overlaps(taken) for taken in used):
            return block
    raise NetlabError(f"no free /30 left in {SUBNET}")


def sweep(prefix: str = PREFIX) -> None:
    """Delete every namespace and veth named ``<prefix>h<n>`` or
    ``<prefix>e<n>``."""
    pattern = re.compile(rf"^{re.escape(prefix)}[he]\d+$")
    for name in _lab_names():
        if pattern.match(name):
            _delete(name)


def sweep_dead() -> None:
    """Delete what labs of processes that no longer run left behind."""
    for name in _lab_names():
        match = _NAME.match(name)
        if match and not os.path.exists(f"/proc/{match.group(1)}"):
            _delete(name)


def _lab_names() -> set[str]:
    names = {line.split()[0] for line in ip("netns", "list").splitlines()
             if line.strip()}
    for line in ip("-o", "link", "show").splitlines():
        # "7: rt123h1@if2: <...>"
        names.add(line.split(":")[1].strip().split("@")[0])
    return {name for name in names if _NAME.match(name)}


# -- test hosts ------------------------------------------------------------
class TestHost:
    """A compute host: its namespace, its listeners, its link and its
    nova-compute (through the callbacks, called with the host's name)."""

    __test__ = False  # not a pytest test class

    def __init__(self, name: str, namespace: Namespace, ports: Iterable[int],
                 stop_compute: Compute | None = None,
                 start_compute: Compute | None = None) -> None:
        self.name = name
        self.namespace = namespace
        self.ports = tuple(ports)
        self.stop_compute = stop_compute
        self.start_compute = start_compute
        self._lock = threading.Lock()
        self._link_up = True
        self._compute_running = True
        self._stop_watching = threading.Event()
        self._watchers: list[threading.Thread] = []
        self._listener = _start_listener(namespace, self.ports)

    @property
    def address(self) -> str:
        return self.namespace.address

    @property
    def link_up(self) -> bool:
        return self._link_up

    @property
    def compute_running(self) -> bool:
        return self._compute_running

    def answers(self, timeout: float = 0.5) -> bool:
        """Whether a TCP connection to its first port is accepted, from
        the root namespace."""
        try:
            socket.create_connection((self.address, self.ports[0]),
                                     timeout=timeout).close()
        except OSError:
            return False
        return True

    # -- what happens to it ------------------------------------------------
    def power_loss(self) -> None:
        """The power goes: the link goes down and nova-compute stops.
        The BMC does not know: it still reads On."""
        with self._lock:
            self._set_link(False)
            self._set_compute(False)

    def crash_compute(self) -> None:
        """nova-compute dies; the host and its link stay up."""
        with self._lock:
            self._set_compute(False)

    def cut_link(self) -> None:
        """The management link is cut; nova-compute heartbeats on (over
        another network)."""
        with self._lock:
            self._set_link(False)

    def restore(self, compute: bool = True) -> None:
        """The link comes back, and nova-compute restarts (``compute``)."""
        with self._lock:
            self._set_link(True)
            if compute:
                self._set_compute(True)

    def flap(self, seconds: float) -> float:
        """The link goes down for ``seconds`` (the scenario, not a wait),
        then comes back. Returns how long it carried nothing."""
        started = time.monotonic()
        self.cut_link()
        time.sleep(seconds)
        with self._lock:
            self._set_link(True)
        return time.monotonic() - started

    def link_bmc(self, bmc: Any, interval: float = BMC_POLL) -> None:
        """Power the host off when ``bmc.power_state()`` reads Off: the
        link goes down and nova-compute stops, as in ``power_loss``."""
        thread = threading.Thread(
            target=self._watch, args=(bmc, interval), daemon=True,
            name=f"netlab-bmc-{self.name}")
        self._watchers.append(thread)
        thread.start()

    def _watch(self, bmc: Any, interval: float) -> None:
        while not self._stop_watching.wait(interval):
            try:
                state = bmc.power_state()
            except (LookupError, OSError, sqlite3.Error):
                continue  # its state database is being written
            if state == "Off":
                self.power_loss()

    def _set_link(self, up: bool) -> None:
        if self._link_up == up:
            return
        self.namespace.set_link(up)
        self._link_up = up
        if up:
            # Back once the host answers (its side learns the root side's
            # address again first).
            deadline = time.monotonic() + LINK_UP_TIMEOUT
            while not self.answers(timeout=0.05):
                if time.monotonic() > deadline:
                    raise NetlabError(f"{self.name} does not answer "
                                      f"{LINK_UP_TIMEOUT:g} s after its "
                                      f"link came back")

    def _set_compute(self, running: bool) -> None:
        if self._compute_running == running:
            return
        callback = self.start_compute if running else self.stop_compute
        if callback is not None:
            callback(self.name)
        self._compute_running = running

    def close(self) -> None:
        self._stop_watching.set()
        for thread in self._watchers:
            thread.join(timeout=5)
        _stop_listener(self._listener)


def _start_listener(namespace: Namespace,
                    ports: tuple[int, ...]) -> subprocess.Popen[bytes]:
    """The host's listeners, inside its namespace; once they listen."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    process = subprocess.Popen(
        namespace.command([sys.executable, "-m", "tests._netlab_listener",
                           *map(str, ports)]),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], START_TIMEOUT)
    line = process.stdout.readline() if ready else b""
    if line.strip() != b"ready":
        _stop_listener(process)
        rest = process.stdout.read().decode(errors="replace")
        raise NetlabError(f"the listeners on {ports} in {namespace.name} "
                          f"did not start: {line.decode()}{rest}")
    return process


def _stop_listener(process: subprocess.Popen[bytes]) -> None:
    if process.stdin is not None and not process.stdin.closed:
        process.stdin.close()  # its signal to end
    try:
        process.wait(5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)


# -- engine namespaces -----------------------------------------------------
class EngineNamespace:
    """A namespace for one engine, cut off from every test host; it
    reaches each server it is given through a TcpProxy on the root side
    of its veth (``forward``, ``endpoint``, ``database_url``)."""

    def __init__(self, namespace: Namespace) -> None:
        self.namespace = namespace
        self.proxies: list[TcpProxy] = []
        # More specific, its own /30 still routes to the proxies.
        ip("route", "add", "unreachable", str(SUBNET), netns=namespace.name)

    @property
    def name(self) -> str:
        return self.namespace.name

    def command(self, argv: Iterable[str]) -> list[str]:
        return self.namespace.command(argv)

    def forward(self, host: str, port: int) -> tuple[str, int]:
        """Where the namespace reaches ``host:port``."""
        proxy = TcpProxy(host, port, listen_host=self.namespace.gateway)
        self.proxies.append(proxy.start())
        return self.namespace.gateway, proxy.port

    def endpoint(self, url: str) -> str:
        """An HTTP URL, as reached from the namespace."""
        parts = urllib.parse.urlsplit(url)
        host, port = self.forward(parts.hostname or "127.0.0.1",
                                  parts.port or 80)
        return parts._replace(netloc=f"{host}:{port}").geturl()

    def database_url(self, url: str) -> str:
        """A SQLAlchemy database URL, as reached from the namespace."""
        parsed = sa.engine.make_url(url)
        host, port = self.forward(parsed.host or "127.0.0.1",
                                  parsed.port or 5432)
        return parsed.set(host=host, port=port).render_as_string(
            hide_password=False)

    def close(self) -> None:
        for proxy in self.proxies:
            proxy.close()


# -- the lab ---------------------------------------------------------------
class NetLab:
    """Test hosts and engine namespaces, all deleted at ``close()``."""

    def __init__(self) -> None:
        reason = unavailable()
        if reason:
            raise NetlabError(reason)
        _register_sweep()
        sweep_dead()
        self.hosts: dict[str, TestHost] = {}
        self.engines: list[EngineNamespace] = []
        self._namespaces: list[str] = []

    def _namespace(self, kind: str) -> Namespace:
        name = f"{PREFIX}{kind}{next(_numbers)}"
        self._namespaces.append(name)  # before: a half-made one is swept
        return Namespace(name)

    def add_host(self, name: str, ports: Iterable[int] = PROBE_PORTS,
                 stop_compute: Compute | None = None,
                 start_compute: Compute | None = None) -> TestHost:
        """A live host listening on ``ports``; the callbacks stop and
        start its nova-compute."""
        if name in self.hosts:
            raise ValueError(f"host {name} exists")
        namespace = self._namespace("h")
        host = TestHost(name, namespace, ports, stop_compute, start_compute)
        self.hosts[name] = host
        return host

    def engine_namespace(self) -> EngineNamespace:
        engine = EngineNamespace(self._namespace("e"))
        self.engines.append(engine)
        return engine

    def probe_addresses(self) -> str:
        """``[detector] probe_addresses``: host:address, ..."""
        return ",".join(f"{host.name}:{host.address}"
                        for host in self.hosts.values())

    def close(self) -> None:
        for host in self.hosts.values():
            host.close()
        for engine in self.engines:
            engine.close()
        for name in self._namespaces:
            _delete(name)
        self.hosts.clear()
        self.engines.clear()
        self._namespaces.clear()

    def __enter__(self) -> NetLab:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _register_sweep() -> None:
    """What this process's labs leave (a failed close), swept at exit."""
    global _sweep_registered
    if not _sweep_registered:
        atexit.register(sweep, PREFIX)
        _sweep_registered = True


# -- pytest fixtures -------------------------------------------------------
def _lab() -> Iterator[NetLab]:
    reason = unavailable()
    if reason:
        message = f"netlab: {reason}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    with NetLab() as lab:
        yield lab


@pytest.fixture
def netlab() -> Iterator[NetLab]:
    """A lab for one test."""
    yield from _lab()


@pytest.fixture(scope="module")
def module_netlab() -> Iterator[NetLab]:
    """A lab shared by a module's tests."""
    yield from _lab()
