"""Keeping an IPMI fence agent's password off ipmitool's command line.

The IPMI agents (fence_ipmilan, fence_idrac, fence_ilo3/4/5, fence_imm,
...) give ipmitool the password as ``-P PASSWORD``: on its command line,
which every local user can read in /proc until ipmitool overwrites it
(some milliseconds, three times a power-off). So such an agent gets no
password and runs a script instead: the real ipmitool with ``-f FILE``
for the agent's empty ``-P ''``.
"""

import contextlib
import os
import shlex
import shutil
import tempfile
from collections.abc import Iterator

from recovery.exception import ConfigError

# The ipmitool an IPMI agent runs instead of the real one (see
# without_password): the agent's ``-P ''`` becomes ``-f FILE``.
_SHIM = """#!/bin/sh
for arg do
    shift
    if [ "$skip" = 1 ]; then skip=0; continue; fi
    if [ "$arg" = -P ]; then
        set -- "$@" -f {password_file}
        skip=1
    else
        set -- "$@" "$arg"
    fi
done
exec {ipmitool} "$@"
"""


def check_runnable(subject: str) -> None:
    """ConfigError naming ``subject`` when the script could not run from
    the temporary directory."""
    if _noexec(tempfile.gettempdir()):
        raise ConfigError(
            f"{subject}: the ipmitool wrapper that keeps its password "
            f"off ipmitool's command line runs from the temporary "
            f"directory {tempfile.gettempdir()}, which is mounted noexec; "
            f"set TMPDIR to a private directory it may run from (in the "
            f"unit: RuntimeDirectory=recovery and "
            f"Environment=TMPDIR=/run/recovery)")


@contextlib.contextmanager
def without_password(password: str, ipmitool: str) -> Iterator[str]:
    """An ipmitool for one call of an IPMI agent, and its password: the
    file (mode 600) and the script are in a directory of their own,
    removed when the call is over."""
    directory = tempfile.mkdtemp(prefix="recovery-fence-")
    password_file = os.path.join(directory, "password")
    script = os.path.join(directory, "ipmitool")
    try:
        _write(password_file, password + "\n", 0o600)
        _write(script, _SHIM.format(
            password_file=shlex.quote(password_file),
            ipmitool=shlex.quote(ipmitool)), 0o700)
        yield script
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _noexec(directory: str) -> bool:
    try:
        return bool(os.statvfs(directory).f_flag & os.ST_NOEXEC)
    except OSError:
        return False      # mkdtemp will say what is wrong with it


def _write(path: str, text: str, mode: int) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
