"""A real Ceph for the tests: one monitor and one OSD (memstore, no disk)
on 127.0.0.1, with cephx, in a directory of its own; no manager (pools,
RBD images, exclusive locks, watchers and the blocklist need none).

    with Ceph(tmp_path / "ceph") as ceph:       # or the ``ceph`` fixture
        ceph.pools("vms", "volumes")
        ceph.image("vms", f"{uuid}_disk")
        keyring = ceph.user("recovery", RECOVERY_CAPS)
        ceph.blocklist()      # ["127.0.0.10:0/0", ...]

Debian's packages: ceph-mon, ceph-osd, ceph-common, python3-rados and
python3-rbd (the bindings in a virtualenv: tools/ceph_bindings.py).
Missing: the ``ceph`` fixture skips, or fails under ``CI=true``.

Every step is bounded: a daemon that does not come up within its time
fails the fixture with the path of its log; every command to the
monitor has a timeout (librados', set below). ``guest_env(address)``
is the environment that makes a process's connections start from
``address`` (tests/ceph_bind.c, built here with gcc): 127.0.0.0/8
addresses stand for distinct hosts on the loopback.
"""

import concurrent.futures
import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from recovery.fencing import ceph as ceph_driver
from tests.bmc import free_port

HERE = Path(__file__).resolve().parent
BINARIES = ("/usr/bin/ceph-mon", "/usr/bin/ceph-osd", "/usr/bin/ceph-authtool",
            "/usr/bin/monmaptool")
START_TIMEOUT = 60.0
STEP_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
# librados' own bounds on this process's admin session (seconds).
OP_TIMEOUT = 15
# What a compute host's cephx user has (Nova, Cinder's rbd docs).
COMPUTE_CAPS = {"mon": "profile rbd", "osd": "profile rbd"}
BIND_LIBRARY = "ceph_bind.so"
BIND_VARIABLE = "RECOVERY_TEST_BIND_ADDRESS"


def recovery_caps(*pools: str) -> dict[str, str]:
    """The caps the docs give recovery's cephx user, for these pools."""
    return {"mon": ceph_driver.MON_CAPS,
            "osd": ", ".join(ceph_driver.OSD_CAPS.format(pool=pool)
                             for pool in pools)}


def missing() -> str | None:
    """What this machine lacks to run a Ceph, or None."""
    for binary in BINARIES:
        if not os.access(binary, os.X_OK):
            return (f"{binary} is missing (Debian: apt-get install ceph-mon "
                    f"ceph-osd ceph-common python3-rados python3-rbd)")
    if shutil.which("gcc") is None:
        return "gcc is missing (it builds tests/ceph_bind.c)"
    try:
        import rados  # noqa: F401
        import rbd  # noqa: F401
    except ImportError as exc:
        return (f"the Ceph bindings cannot be imported ({exc}): install "
                f"python3-rados and python3-rbd, then run "
                f"tools/ceph_bindings.py in this virtualenv")
    return None


class Ceph:
    """One monitor and one OSD, started by ``start`` and stopped by
    ``stop`` (or the ``with`` block)."""

    def __init__(self, workdir: Path) -> None:
        self.dir = workdir
        self.fsid = str(uuid.uuid4())
        self.conf = workdir / "ceph.conf"
        self.admin_keyring = workdir / "client.admin.keyring"
        self.mon_host = ""
        self.started_in: float | None = None
        self._daemons: dict[str, subprocess.Popen] = {}
        self._admin: Any = None

    def __enter__(self) -> "Ceph":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- starting -------------------------------------------------------------
    def start(self, timeout: float = START_TIMEOUT) -> "Ceph":
        began = time.monotonic()
        try:
            self._configure()
            self._start_mon()
            self._connect_admin()
            self._start_osd()
            self._wait(lambda: self.command(
                prefix="osd stat", format="json")["num_up_osds"] == 1,
                "the OSD to be up", began + timeout, "ceph-osd.0.log")
            self._bind_library()
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - began
        return self

    def _configure(self) -> None:
        for sub in ("run", "log", "mon-a", "osd-0"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        v2, v1 = free_port(), free_port()
        self.mon_host = f"[v2:127.0.0.1:{v2},v1:127.0.0.1:{v1}]"
        self.conf.write_text(self.config_text(self.mon_host))
        keyring = self.dir / "mon.keyring"
        self._run("/usr/bin/ceph-authtool", "--create-keyring", keyring,
                  "--gen-key", "-n", "mon.", "--cap", "mon", "allow *")
        self._run("/usr/bin/ceph-authtool", "--create-keyring",
                  self.admin_keyring, "--gen-key", "-n", "client.admin",
                  "--cap", "mon", "allow *", "--cap", "osd", "allow *",
                  "--cap", "mds", "allow *", "--cap", "mgr", "allow *")
        self._run("/usr/bin/ceph-authtool", keyring, "--import-keyring",
                  self.admin_keyring)
        self._run("/usr/bin/monmaptool", "--create", "--fsid", self.fsid,
                  "--addv", "a", self.mon_host, self.dir / "monmap")
        self._run("/usr/bin/ceph-mon", "-c", self.conf, "--mkfs", "-i", "a",
                  "--monmap", self.dir / "monmap", "--keyring", keyring)

    def config_text(self, mon_host: str) -> str:
        """ceph.conf for this cluster with ``mon_host`` as its monitor
        (another for a monitor that is not there)."""
        d = self.dir
        return f"""[global]
fsid = {self.fsid}
mon host = {mon_host}
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind ipv6 = false
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
run dir = {d}/run
admin socket = {d}/run/$cluster-$name.asok
log file = {d}/log/$cluster-$name.log
pid file = {d}/run/$cluster-$name.pid
[mon]
keyring = {d}/mon.keyring
mon data = {d}/mon-$id
[osd]
keyring = {d}/osd-$id/keyring
osd data = {d}/osd-$id
osd objectstore = memstore
memstore device bytes = 1073741824
[client.admin]
keyring = {self.admin_keyring}
"""

    def _start_mon(self) -> None:
        self._daemon("mon.a", "/usr/bin/ceph-mon", "-f", "-i", "a")

    def _connect_admin(self) -> None:
        import rados

        admin = rados.Rados(conffile=str(self.conf), rados_id="admin",
                            conf=_timeouts(OP_TIMEOUT))
        admin.connect()
        self._admin = admin

    def _start_osd(self) -> None:
        osd_uuid = str(uuid.uuid4())
        osd_id = self.command(prefix="osd new", uuid=osd_uuid)
        assert str(osd_id).strip() == "0", osd_id
        key = self.command(prefix="auth get-or-create", entity="osd.0",
                           caps=["mon", "allow profile osd",
                                 "osd", "allow *", "mgr", "allow profile osd"],
                           format="json")[0]["key"]
        _write_keyring(self.dir / "osd-0" / "keyring", "osd.0", key)
        self._run("/usr/bin/ceph-osd", "-c", self.conf, "-i", "0", "--mkfs",
                  "--osd-uuid", osd_uuid)
        self._daemon("osd.0", "/usr/bin/ceph-osd", "-f", "-i", "0")

    def _bind_library(self) -> None:
        self._run("gcc", "-shared", "-fPIC", "-O2", "-o",
                  self.dir / BIND_LIBRARY, HERE / "ceph_bind.c", "-ldl")

    def _daemon(self, name: str, *argv: str) -> None:
        log = open(self.dir / "log" / f"{name}.out", "ab")
        with log:
            self._daemons[name] = subprocess.Popen(
                [*argv, "-c", str(self.conf)], stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def _run(self, *argv: object) -> None:
        done = subprocess.run([str(a) for a in argv], capture_output=True,
                              text=True, timeout=STEP_TIMEOUT)
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} exited {done.returncode}: "
                               f"{(done.stderr or done.stdout).strip()}")

    def _wait(self, ready: Any, what: str, deadline: float,
              log: str) -> None:
        while True:
            with contextlib.suppress(RuntimeError):
                if ready():
                    return
            for name, proc in self._daemons.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited {proc.returncode}: "
                                       f"see {self.dir / 'log'}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"gave up waiting for {what}: see "
                                   f"{self.dir / 'log' / log}")
            time.sleep(0.2)

    # -- stopping -------------------------------------------------------------
    def stop(self) -> None:
        """TERM each daemon, the OSD first (it tells the monitor it goes
        down, or waits 5 s for it), KILL what is left after
        STOP_TIMEOUT."""
        if self._admin is not None:
            self._admin.shutdown()
            self._admin = None
        for proc in reversed(list(self._daemons.values())):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(STOP_TIMEOUT)
        self._daemons.clear()

    # -- the admin's commands -----------------------------------------------
    def command(self, **cmd: Any) -> Any:
        """A monitor command as client.admin: its JSON answer (or its
        text when it gives none); RuntimeError naming the error."""
        ret, out, status = self._admin.mon_command(json.dumps(cmd), b"",
                                                   timeout=OP_TIMEOUT)
        if ret != 0:
            raise RuntimeError(f"{cmd['prefix']}: error {ret}: {status}")
        text = out.decode()
        try:
            return json.loads(text) if text.strip() else status
        except json.JSONDecodeError:
            return text

    def user(self, name: str, caps: dict[str, str]) -> Path:
        """Cephx user ``client.NAME`` with ``caps`` (made, or its caps
        set); the path of its keyring file (mode 600)."""
        entity = f"client.{name}"
        flat = [item for pair in caps.items() for item in pair]
        answer = self.command(prefix="auth get-or-create", entity=entity,
                              caps=flat, format="json")
        self.command(prefix="auth caps", entity=entity, caps=flat)
        path = self.dir / f"{entity}.keyring"
        _write_keyring(path, entity, answer[0]["key"])
        return path

    def pools(self, *names: str) -> None:
        """RBD pools (8 PGs, size 1, application rbd)."""
        for name in names:
            self.command(prefix="osd pool create", pool=name, pg_num=8,
                         pgp_num=8)
        for name in names:
            self.command(prefix="osd pool application enable", pool=name,
                         app="rbd")

    def image(self, pool: str, name: str, size: int = 4 << 20) -> None:
        """RBD image ``name`` in ``pool`` with exclusive-lock."""
        import rbd

        with self.ioctx(pool) as ioctx:
            rbd.RBD().create(ioctx, name, size, old_format=False,
                             features=rbd.RBD_FEATURE_LAYERING
                             | rbd.RBD_FEATURE_EXCLUSIVE_LOCK)

    @contextlib.contextmanager
    def ioctx(self, pool: str) -> Iterator[Any]:
        ioctx = self._admin.open_ioctx(pool)
        try:
            yield ioctx
        finally:
            ioctx.close()

    def blocklist(self) -> list[str]:
        """The blocklisted addresses (``IP:0/NONCE``; ``IP:0/0`` for a
        whole address)."""
        return list(self.blocklist_until())

    def blocklist_until(self) -> dict[str, str]:
        """Each blocklisted address and its expiry, read as plain text
        (its JSON is two arrays back to back in 16.2)."""
        ret, out, status = self._admin.mon_command(
            json.dumps({"prefix": "osd blocklist ls"}), b"",
            timeout=OP_TIMEOUT)
        if ret != 0:
            raise RuntimeError(f"osd blocklist ls: error {ret}: {status}")
        return dict(line.split(maxsplit=1)
                    for line in out.decode().splitlines() if line.strip())

    def block(self, op: str, *addrs: str) -> None:
        """``osd blocklist add`` (or ``rm``) of these addresses, all at
        once: the monitor takes them in one proposal."""
        with concurrent.futures.ThreadPoolExecutor(len(addrs)) as pool:
            list(pool.map(lambda addr: self.command(
                prefix="osd blocklist", blocklistop=op, addr=addr,
                expire=3600.0), addrs))

    def unblock_all(self) -> None:
        """Clear the blocklist, between tests."""
        self.command(prefix="osd blocklist clear")

    # -- clients on other "hosts" -----------------------------------------
    def guest_env(self, address: str) -> dict[str, str]:
        """This process's environment, for a child whose connections
        start from ``address`` (a 127.0.0.0/8 address)."""
        return {**os.environ,
                "LD_PRELOAD": str(self.dir / BIND_LIBRARY),
                BIND_VARIABLE: address}


def _timeouts(seconds: float) -> dict[str, str]:
    return {"client_mount_timeout": str(seconds),
            "rados_mon_op_timeout": str(seconds),
            "rados_osd_op_timeout": str(seconds)}


def _write_keyring(path: Path, entity: str, key: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(f"[{entity}]\n\tkey = {key}\n")


@pytest.fixture(scope="session")
def ceph(tmp_path_factory) -> Iterator[Ceph]:
    """One Ceph for the whole session; skipped when Ceph is not
    installed, failed instead under ``CI=true``."""
    reason = missing()
    if reason:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    with Ceph(tmp_path_factory.mktemp("ceph")) as cluster:
        yield cluster
