"""A "guest" for the Ceph tests: writes to one RBD image through librbd,
as a virtual machine's disk does, and says how each write went.

    with Guest(ceph, "127.0.0.10", keyring, "vms", image) as guest:
        guest.next("ok")            # a write went through
        guest.next("error")         # the first refused one

``Guest`` runs ``python -m tests.ceph_guest CONF USER KEYRING POOL IMAGE
[INTERVAL]`` as a child process, its connections starting from a
host's address (``Ceph.guest_env``). The child opens the image
(exclusive-lock: its first write takes the lock, or breaks a dead
owner's), then writes 4 KiB every INTERVAL seconds (default 0.05)
until its standard input closes or it is killed. One line a step on
standard output, flushed at once:

    ready ADDR SECONDS      its client address (IP:0/NONCE), once open
    ok N SECONDS            write N done (time.monotonic() after it)
    error N SECONDS NAME ERRNO   write N refused

``rbd_cache = false``: a write is acknowledged by the OSD, not by a
cache. Every wait is bounded (librados' timeouts, 10 s).
"""

import os
import queue
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

TIMEOUT = "10"
ROOT = Path(__file__).resolve().parents[1]


class Guest:
    """The child, its lines read as they come (``next``)."""

    def __init__(self, ceph, address: str, keyring: Path, pool: str,
                 image: str, *, user: str = "compute",
                 interval: float = 0.05) -> None:
        self._lines: queue.Queue[str] = queue.Queue()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.ceph_guest", str(ceph.conf), user,
             str(keyring), pool, image, str(interval)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env=ceph.guest_env(address), cwd=ROOT)
        threading.Thread(target=self._read, daemon=True).start()
        # Its client address, IP:0/NONCE, as Ceph lists it, and when its
        # image was open (time.monotonic(), the machine's).
        _, self.addr, opened = self.next("ready", 30).split()
        self.opened = float(opened)

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._lines.put(line.strip())
        self._lines.put("exited")

    def next(self, kind: str, timeout: float = 15.0) -> str:
        """The next line of ``kind`` (ready, ok, error); every line
        before it is in ``skipped``. AssertionError after ``timeout``."""
        deadline = time.monotonic() + timeout
        self.skipped: list[str] = []
        while True:
            try:
                line = self._lines.get(timeout=max(
                    deadline - time.monotonic(), 0.0))
            except queue.Empty:
                raise AssertionError(f"no '{kind}' line from the guest "
                                     f"within {timeout:g} s") from None
            if line.split()[0] == kind:
                return line
            assert line != "exited", f"the guest exited: {self.skipped}"
            self.skipped.append(line)

    def __enter__(self) -> "Guest":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Close its standard input: it exits at once."""
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def main(argv: list[str]) -> None:
    import rados
    import rbd

    conf, user, keyring, pool, image_name = argv[:5]
    interval = float(argv[5]) if len(argv) > 5 else 0.05
    cluster = rados.Rados(conffile=conf, rados_id=user, conf={
        "keyring": keyring, "rbd_cache": "false",
        "client_mount_timeout": TIMEOUT, "rados_mon_op_timeout": TIMEOUT,
        "rados_osd_op_timeout": TIMEOUT})
    cluster.connect()
    ioctx = cluster.open_ioctx(pool)
    image = rbd.Image(ioctx, image_name)
    print(f"ready {cluster.get_addrs()} {time.monotonic():.6f}",
          flush=True)
    block = os.urandom(4096)
    n = 0
    while not _stdin_closed(interval):
        n += 1
        try:
            image.write(block, (n % 256) * 4096)
        except (rbd.Error, rados.Error) as exc:
            print(f"error {n} {time.monotonic():.6f} {type(exc).__name__} "
                  f"{getattr(exc, 'errno', '')}", flush=True)
        else:
            print(f"ok {n} {time.monotonic():.6f}", flush=True)
    # Gone at once, as a killed VM: no close, no lock released (closing
    # a fenced client's image would wait on its timeouts).
    os._exit(0)


def _stdin_closed(seconds: float) -> bool:
    """Wait ``seconds``; True once standard input is closed."""
    ready, _, _ = select.select([sys.stdin], [], [], seconds)
    return bool(ready) and not sys.stdin.buffer.read1(1)


if __name__ == "__main__":
    main(sys.argv[1:])
