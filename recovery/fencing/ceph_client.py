"""One librados connection of the Ceph fence, every call bounded.

librados blocks in C: each call runs on a native thread
(``concurrency.offload``, so that the eventlet hub runs meanwhile) and is
waited for at most the time left before the caller's deadline. librados
is told the same bound (``client_mount_timeout``,
``rados_mon_op_timeout``, ``rados_osd_op_timeout``), so it ends the call
itself; a call that still outlives its bound by ``GRACE`` is abandoned
with its connection (never shut down under it: the handle is dropped,
and freed once the call has ended).

The ``rados`` and ``rbd`` modules (Debian's python3-rados and
python3-rbd, not on PyPI) are imported by ``bindings()`` only, when a
host is fenced by Ceph. ``translate`` is the one place where their
errors become FencingError.
"""

import dataclasses
import importlib
import ipaddress
import json
import math
import os
import types
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any
from typing import TypeVar

from recovery import concurrency
from recovery.exception import ConfigError
from recovery.exception import FencingError
from recovery.fencing.fencer import Unreachable

T = TypeVar("T")
# How long past its own timeout a librados call may take to return
# before it is abandoned.
GRACE = 1.0
# The answer of a monitor command that timed out (rados_mon_op_timeout).
ETIMEDOUT = 110
# Blocklist commands sent at once, at most (eventlet's native threads
# for librados calls: 20).
PARALLEL = 16


def bindings() -> tuple[types.ModuleType, types.ModuleType]:
    """The ``rados`` and ``rbd`` modules; ConfigError when missing."""
    try:
        return (importlib.import_module("rados"),
                importlib.import_module("rbd"))
    except ImportError as exc:
        raise ConfigError(
            f"fencing driver ceph needs Ceph's Python bindings ({exc}): "
            f"install python3-rados and python3-rbd (the distribution's "
            f"packages: they are not on PyPI); a virtualenv must be given "
            f"them (tools/ceph_bindings.py in recovery's source links "
            f"them in)") from exc


@dataclasses.dataclass(frozen=True)
class Entry:
    """One blocklist entry: ``IP:PORT/NONCE`` (``IP:0/0``: the whole
    address; ``IP:0/NONCE``: one client instance) and its expiry."""

    addr: str
    until: str

    @property
    def ip(self) -> str:
        host = self.addr.rsplit("/", 1)[0].rsplit(":", 1)[0]
        return normal_ip(host.strip("[]"))

    @property
    def client(self) -> bool:
        """An entry for a client's address (port 0): an address's or a
        client instance's, never a daemon's (which has a port)."""
        return self.addr.rsplit("/", 1)[0].rsplit(":", 1)[-1] == "0"


def normal_ip(text: str) -> str:
    """``text`` as one IP address is written, or itself if it is none."""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return text


def parse_blocklist(out: bytes) -> list[Entry]:
    """``osd blocklist ls`` (JSON): its entries. Ceph 16 answers two
    JSON arrays back to back (addresses, then ranges): the first is
    read, and ranges are left alone (recovery adds none)."""
    text = out.decode("utf-8", "replace").strip()
    if not text:
        return []
    try:
        entries, _ = json.JSONDecoder().raw_decode(text)
        return [Entry(str(e["addr"]), str(e.get("until", "")))
                for e in entries]
    except (ValueError, TypeError, KeyError) as exc:
        raise FencingError(f"osd blocklist ls answered what is not its "
                           f"JSON list ({exc})") from exc


class Cluster:
    """One connection to the monitors, for a ``with`` block, bounded by
    ``deadline`` (on ``clock``). ``where`` names the device in errors."""

    def __init__(self, options: "Options", clock: concurrency.Clock,
                 deadline: float, where: str) -> None:
        self._options = options
        self._clock = clock
        self._deadline = deadline
        self._where = where
        self._handle: Any = None
        self._abandoned = False

    def __enter__(self) -> "Cluster":
        rados, _ = bindings()
        seconds = self.left()
        options = self._options
        conf = {"keyring": options.keyring,
                "client_mount_timeout": _whole(seconds),
                "rados_mon_op_timeout": _whole(seconds),
                "rados_osd_op_timeout": _whole(options.op_timeout)}
        handle = self._call(lambda: rados.Rados(
            conffile=options.conf, rados_id=options.user, conf=conf),
            f"reading {options.conf}")
        try:
            self._call(handle.connect, f"connecting to the monitors "
                       f"(client_mount_timeout {conf['client_mount_timeout']}"
                       f" s)", connecting=True)
        except FencingError:
            self._drop(handle)
            raise
        self._handle = handle
        return self

    def __exit__(self, *exc_info: object) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            self._drop(handle)

    def _drop(self, handle: Any) -> None:
        """Shut the connection down, bounded; left to the abandoned call
        when one still runs on it."""
        if self._abandoned:
            return
        try:
            bounded(handle.shutdown, GRACE + 1.0)
        except TimeoutError:
            self._abandoned = True

    def left(self) -> float:
        return max(self._deadline - self._clock.monotonic(), 0.0)

    # -- calls ----------------------------------------------------------------
    def fsid(self) -> str:
        return str(self._call(self._handle.get_fsid, "reading the fsid"))

    def _mon(self, what: str, cmd: dict[str, Any]) -> tuple[int, bytes,
                                                          str]:
        """Monitor command ``cmd``, librados told the time left: its
        return code (0 or -errno), output and status text."""
        handle = self._handle

        def run() -> tuple[int, bytes, str]:
            handle.conf_set("rados_mon_op_timeout", _whole(self.left()))
            return handle.mon_command(json.dumps(cmd), b"")

        return self._call(run, what)

    def command(self, what: str, **cmd: Any) -> tuple[bytes, str]:
        """Monitor command ``cmd``, bounded by the time left: its output
        and status text; FencingError naming ``what`` on an error."""
        ret, out, status = self._mon(what, cmd)
        if ret == -ETIMEDOUT:
            raise FencingError(f"{self._where}: {what}: no answer from "
                               f"the monitors within the time left")
        if ret < 0:
            raise FencingError(f"{self._where}: {what}: "
                               f"{os.strerror(-ret)} ({status.strip()})")
        return out, status

    def blocklist_each(self, op: str, addrs: Sequence[str],
                       **extra: Any) -> None:
        """``osd blocklist add`` (or ``rm``) of every address at once:
        the monitor commits them together, where one after the other
        would cost a proposal each (paxos_propose_interval, 1 s)."""
        def one(addr: str) -> None:
            self.command(f"osd blocklist {op} {addr}",
                         prefix="osd blocklist", blocklistop=op, addr=addr,
                         **extra)

        if not addrs:
            return
        pool = concurrency.task_pool(min(len(addrs), PARALLEL))
        for outcome in pool.run(one, addrs):
            if outcome.error is not None:
                raise outcome.error

    def probe(self, **cmd: Any) -> int:
        """Monitor command ``cmd``'s return code only (0 or -errno)."""
        return self._mon(f"asking {cmd['prefix']}", cmd)[0]

    def blocklist(self) -> list[Entry]:
        out, _ = self.command("reading osd blocklist ls",
                              prefix="osd blocklist ls", format="json")
        return parse_blocklist(out)

    def images(self, pool: str) -> set[str]:
        """The names of the RBD images in ``pool``."""
        _, rbd = bindings()

        def run() -> set[str]:
            with self._handle.open_ioctx(pool) as ioctx:
                return set(rbd.RBD().list(ioctx))

        return self._call(run, f"listing the images of pool {pool}")

    def watchers(self, pool: str, image: str) -> list[str]:
        """The client addresses (``IP:0/NONCE``) watching ``image``."""
        _, rbd = bindings()

        def run() -> list[str]:
            with self._handle.open_ioctx(pool) as ioctx:
                with rbd.Image(ioctx, image, read_only=True) as opened:
                    return [str(w["addr"]) for w in opened.watchers_list()]

        return self._call(run, f"listing the watchers of {pool}/{image}")

    def _call(self, fn: Callable[[], T], what: str, *,
              connecting: bool = False) -> T:
        """``fn()``, bounded; ``connecting``: a timeout means that no
        monitor answered at all (``Unreachable``)."""
        try:
            return bounded(fn, self.left() + GRACE)
        except TimeoutError:
            self._abandoned = True
            error = Unreachable if connecting else FencingError
            raise error(f"{self._where}: {what}: no answer within the "
                        f"device's time") from None
        except Exception as exc:
            raise translate(exc, what, self._where, connecting) from exc


@dataclasses.dataclass(frozen=True)
class Options:
    """How to reach the cluster: ceph.conf, the cephx user and keyring,
    and each OSD operation's bound."""

    conf: str
    user: str
    keyring: str
    op_timeout: float


def translate(exc: Exception, what: str, where: str,
              connecting: bool = False) -> FencingError:
    """The one place librados' and librbd's errors become FencingError:
    ``Unreachable`` when a connection timed out (no monitor answered at
    all)."""
    if isinstance(exc, FencingError):
        return exc
    name = type(exc).__name__
    errno = getattr(exc, "errno", None)
    if connecting and (name == "TimedOut" or errno == ETIMEDOUT):
        return Unreachable(f"{where}: no Ceph monitor answered: {what} "
                           f"timed out")
    if name in ("PermissionError", "PermissionDeniedError") or errno in (
            1, 13):
        return FencingError(f"{where}: {what}: permission denied (the "
                            f"cephx user's key or caps): {exc}")
    if name in ("ObjectNotFound", "ImageNotFound") or errno == 2:
        return FencingError(f"{where}: {what}: not found: {exc}")
    return FencingError(f"{where}: {what}: {name}: {exc}")


def _whole(seconds: float) -> str:
    """Seconds as librados' timeouts take them: a whole number, 1 or
    more."""
    return str(max(math.ceil(seconds), 1))


def bounded(fn: Callable[[], T], seconds: float) -> T:
    """``fn()`` on a native thread; TimeoutError after ``seconds``."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = concurrency.offload(fn)
        except Exception as exc:  # re-raised in the caller's thread
            outcome["error"] = exc

    if not concurrency.spawn(run).wait(max(seconds, 0.0)):
        raise TimeoutError
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
