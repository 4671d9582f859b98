"""The fake scheduler: which compute an instance may move to.

Callers hold ``state.lock``.
"""

from __future__ import annotations

from tests.fakenova.state import FINAL_MIGRATION_STATUSES
from tests.fakenova.state import Migration
from tests.fakenova.state import Server
from tests.fakenova.state import State


def load(state: State, host: str, moving: Migration) -> int:
    """Servers on the host plus in-flight moves claimed to it, but for
    ``moving``, the move being scheduled."""
    on_host = sum(1 for s in state.servers.values() if s.host == host)
    claimed = sum(1 for m in state.migrations
                  if m.dest_compute == host and m is not moving
                  and m.status not in FINAL_MIGRATION_STATUSES)
    return on_host + claimed


def acceptable(state: State, host: str, server: Server,
               moving: Migration) -> bool:
    """Up, enabled (in Nova and in placement), not the server's own host,
    and with room."""
    service = state.computes.get(host)
    return (service is not None and service.up and not service.disabled
            and not service.trait_disabled and host != server.host
            and (service.capacity is None
                 or load(state, host, moving) < service.capacity))


def select_destination(state: State, server: Server, moving: Migration,
                       requested: str | None) -> str | None:
    """The least loaded acceptable compute, or ``requested`` if it is
    acceptable (the filters still run on it); None: NoValidHost."""
    if requested is not None:
        return requested if acceptable(state, requested, server,
                                       moving) else None
    candidates = [h for h in sorted(state.computes)
                  if acceptable(state, h, server, moving)]
    if not candidates:
        return None
    return min(candidates, key=lambda h: load(state, h, moving))
