"""The asynchronous part of an evacuation (conductor, scheduler, compute).

Timeline, L = evacuation_latency:
  API (synchronous): task_state rebuilding, migration "accepted"
  0.2 L  scheduler picks the destination,
         or NoValidHost: migration "error", vm_state error
  0.4 L  destination compute claims (rebuild_claim): migration
         "pre-migrating" (nova 34 has no "rebuilding" migration status)
  0.7 L  task_state rebuild_spawning
  1.0 L  vm_state final, task_state None     (the nova 34 gotcha: the
  1.0 L + host_move_lag  host/node move, migration "done"   host lags)
A destination whose compute is not running never answers: it hangs.

A second evacuate while one is in flight (task_state still a rebuild one)
is accepted (nova 34 checks no
task_state) and spoils both, as seen on a real Nova: the new migration
stays "accepted", and the first one, once done, turns "failed" with the
instance in ERROR on the destination.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from tests.fakenova import scheduler
from tests.fakenova.errors import RequestContext
from tests.fakenova.state import NOSTATE
from tests.fakenova.state import POWER_FOR_VM_STATE
from tests.fakenova.state import Migration
from tests.fakenova.state import Server
from tests.fakenova.state import State
from tests.fakenova.state import node_name
from tests.fakenova.state import utcnow

REBUILD_TASK_STATES = ("rebuilding", "rebuild_block_device_mapping",
                       "rebuild_spawning")


class Evacuation:
    def __init__(self, state: State, ctx: RequestContext, server: Server,
                 host: str | None, force: bool) -> None:
        self.state = state
        self.server = server
        self.requested_host = host
        self.force = force
        self.stop_at_end = ctx.at_least("2.95")
        self.original_vm_state = server.vm_state
        self.outcome = server.evacuation_outcome
        self.migration: Migration | None = None
        self.call: dict[str, Any] = {}
        self.latency = state.one_evacuation_latency()
        self.superseded = False

    # -- API side --------------------------------------------------------
    def accept(self) -> None:
        state, server = self.state, self.server
        # One in flight, unless a reset-state has since abandoned it.
        earlier = (server.evacuation
                   if server.task_state in REBUILD_TASK_STATES else None)
        server.task_state = "rebuilding"
        server.fault = None
        state.touch(server)
        self.migration = Migration(
            state.next_id(), str(uuid.uuid4()), server.uuid, server.host,
            server.node, self.requested_host, None, None, "accepted",
            "evacuation", server.user_id, server.project_id, utcnow())
        state.migrations.append(self.migration)
        self.call = {"uuid": server.uuid, "source": server.host,
                     "target": self.requested_host, "dest": None,
                     "time": time.time()}
        state.evacuate_calls.append(self.call)
        if earlier is not None:
            earlier.superseded = True
            return
        server.evacuation = self
        state.call_later(0.2 * self.latency, self._schedule)

    # -- helpers ---------------------------------------------------------
    def _set_status(self, status: str) -> None:
        assert self.migration is not None
        self.state.set_migration_status(self.migration, status)

    def _still_ours(self) -> bool:
        """Someone reset the state meanwhile: the rebuild gives up."""
        if self.server.task_state in REBUILD_TASK_STATES:
            return True
        self._set_status("failed")
        self.server.evacuation = None
        return False

    def _dest_running(self, host: str | None) -> bool:
        service = self.state.computes.get(host or "")
        return service is not None and service.running

    def _may_continue(self) -> bool:
        """A dead destination compute never answers: the move hangs."""
        assert self.migration is not None
        if not self._dest_running(self.migration.dest_compute):
            return False
        return self._still_ours()

    def _fail(self, status: str, message: str, code: int) -> None:
        server = self.server
        server.evacuation = None
        self._set_status(status)
        server.vm_state = "error"
        server.task_state = None
        server.fault = {"code": code, "message": message,
                        "created": utcnow()}
        self.state.touch(server)

    # -- scheduler -------------------------------------------------------
    def _schedule(self) -> None:
        if not self._still_ours():
            return
        dest = self._pick_destination()
        if dest is None:
            self._fail("error", "No valid host was found. There are not "
                       "enough hosts available.", 500)
            return
        assert self.migration is not None
        service = self.state.computes[dest]
        self.migration.dest_compute = dest
        self.migration.dest_node = node_name(dest)
        self.migration.dest_host = service.ip
        self.call["dest"] = dest
        if self._dest_running(dest):
            self.state.call_later(0.2 * self.latency, self._rebuild)

    def _pick_destination(self) -> str | None:
        assert self.migration is not None
        if self.requested_host is not None and self.force:
            return self.requested_host
        return scheduler.select_destination(
            self.state, self.server, self.migration, self.requested_host)

    # -- destination compute --------------------------------------------
    def _rebuild(self) -> None:
        if not self._may_continue():
            return
        self._set_status("pre-migrating")
        if self.outcome == "hang":
            return
        if self.outcome == "error":
            self.state.call_later(0.3 * self.latency, self._rebuild_failed)
            return
        self.state.call_later(0.3 * self.latency, self._spawn)

    def _rebuild_failed(self) -> None:
        if not self._may_continue():
            return
        self.server.power_state = NOSTATE
        self._fail("failed", "Rebuild failed on the destination "
                   "(set_evacuation_outcome error)", 500)

    def _spawn(self) -> None:
        if not self._may_continue():
            return
        self.server.task_state = "rebuild_spawning"
        self.state.touch(self.server)
        self.state.call_later(0.3 * self.latency, self._finish)

    def _final_vm_state(self) -> str:
        if self.original_vm_state == "stopped":
            return "stopped"
        if self.original_vm_state == "error":
            return "active"
        return "stopped" if self.stop_at_end else "active"

    def _finish(self) -> None:
        if not self._may_continue():
            return
        server = self.server
        server.vm_state = self._final_vm_state()
        server.power_state = POWER_FOR_VM_STATE[server.vm_state]
        server.task_state = None
        self.state.touch(server)
        self.state.call_later(self.state.host_move_lag, self._move_host)

    def _move_host(self) -> None:
        """resource tracker finish_evacuation(): host, node, "done"."""
        assert self.migration is not None
        dest = self.migration.dest_compute
        if dest is None or not self._dest_running(dest):
            return
        self.server.host = dest
        self.server.node = node_name(dest)
        self.state.touch(self.server)
        self._set_status("done")
        self.server.evacuation = None
        if self.superseded:
            self._fail("failed", "Instance was evacuated again while its "
                       "evacuation was in progress", 500)
