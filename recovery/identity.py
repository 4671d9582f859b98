"""Process identity: the name a process goes by as the owner of a run's
lease and in the engines' registry (``host:pid``), and whether such a
process is known to have exited.

Only a process of this machine can be known gone: its pid is looked up
here. Any other owner is taken as alive until its lease says otherwise,
because a pid means nothing on another host."""

import os
import socket


def this_process() -> str:
    """The owner name of a lease taken by this process."""
    return f"{socket.gethostname()}:{os.getpid()}"


def split_owner(owner: str | None) -> tuple[str, int | None]:
    """The host and pid of a ``this_process()`` name."""
    host, _, pid = (owner or "").rpartition(":")
    return host, int(pid) if pid.isdigit() else None


def owner_gone(owner: str | None) -> bool:
    """True when ``owner`` was a process of this host that has exited."""
    host, pid = split_owner(owner)
    if host != socket.gethostname() or pid is None or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
