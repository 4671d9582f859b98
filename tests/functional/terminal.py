"""The ``recovery`` command on a real pseudo-terminal, and what a terminal
of that size would show after reading all it wrote (pyte emulates it)."""

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import time

import pyte

COLUMNS, LINES = 150, 70


def run_in_pty(config, *args, timeout: float = 120.0) -> tuple[int, bytes]:
    """Run ``recovery --config-file config *args`` with its stdout and
    stderr on one pty of COLUMNS x LINES; its exit code and every byte it
    wrote there."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ,
                struct.pack("HHHH", LINES, COLUMNS, 0, 0))
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "TERM": "xterm-256color"}
    # The size comes from the terminal, as on an operator's.
    for name in ("COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR",
                 "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        env.pop(name, None)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "recovery.cmd.cli", "--config-file",
             str(config), *args], stdin=subprocess.DEVNULL, stdout=slave,
            stderr=slave, env=env)
    finally:
        os.close(slave)
    try:
        written = _read_until_closed(master, time.monotonic() + timeout)
        return proc.wait(10), written
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _read_until_closed(master: int, deadline: float) -> bytes:
    written = bytearray()
    while True:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([master], [], [], max(left, 0))
        if not ready:
            raise TimeoutError(f"the command still writes after the "
                               f"timeout; so far: {bytes(written[-2000:])}")
        try:
            chunk = os.read(master, 65536)
        except OSError:     # EIO: the command closed the terminal
            return bytes(written)
        if not chunk:
            return bytes(written)
        written += chunk


def screen(written: bytes) -> list[str]:
    """The lines a COLUMNS x LINES terminal shows once it has read
    ``written``, trailing blanks trimmed."""
    shown = pyte.Screen(COLUMNS, LINES)
    pyte.ByteStream(shown).feed(written)
    return [line.rstrip() for line in shown.display]
