"""Live migration: nova-api's checks, then the conductor, the scheduler
and the source compute's live migration executor.

Timeline, L = evacuation_latency (the same latency model):
  API (synchronous): task_state migrating, migration "accepted"
  0.2 L  conductor (LiveMigrationTask): the source compute must be up,
         the scheduler picks the destination (a forced host is only
         checked to be up and not the source), the destination
         pre-checks. A failure: migration "error", task_state None, the
         instance as it was (a fault, not vm_state error). Else the
         migration is "queued" on the source compute's executor, which
         runs max_concurrent_live_migrations at once, first come first
         served:
  start  "preparing"
  +0.4 L "running"
  +0.8 L "completed", host and node moved, task_state None, vm_state
         unchanged; the source's next queued migration starts.
Below 2.34 nova-api calls the conductor (an RPC call, not a cast): its
part runs within the request, and its failures are 400s.
A source or destination compute that stops running stops the migration
where it is; so does a reset of the instance's task_state.

Outcomes (set_live_migration_outcome): "error": the destination's
pre-check fails (forced: MigrationPreCheckError; else the conductor tries
every host, then NoValidHost); "failed": it fails while running and rolls
back, migration "failed"; "hang": it stays "running", holding its slot.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from tests.fakenova import compute
from tests.fakenova import errors
from tests.fakenova import scheduler
from tests.fakenova.admin import parse_bool
from tests.fakenova.errors import RequestContext
from tests.fakenova.state import Migration
from tests.fakenova.state import Server
from tests.fakenova.state import State
from tests.fakenova.state import node_name
from tests.fakenova.state import utcnow

MIGRATABLE_VM_STATES = ("active", "paused")
# Those holding a slot of the source compute's executor.
EXECUTING = ("preparing", "running")
# Nova's in-progress list (GET /servers/{id}/migrations).
IN_PROGRESS = ("queued", "preparing", "running", "post-migrating")
# nova/thread_pool_factory.py: 0 (deprecated) runs 5 at once in the
# native threading mode, nova-compute's default from 2026.2.
ZERO_LIMIT = 5
# nova/api/validation/parameter_types.py boolean
BOOLEANS = (True, "True", "TRUE", "true", "1", "ON", "On", "on", "YES",
            "Yes", "yes", False, "False", "FALSE", "false", "0", "OFF",
            "Off", "off", "NO", "No", "no")
NO_VALID_HOST = ("No valid host was found. There are not enough hosts "
                 "available.")


# -- nova-api --------------------------------------------------------------
def _invalid(field: str, value: Any, detail: str) -> errors.ApiError:
    return errors.bad_request(f"Invalid input for field/attribute {field}. "
                              f"Value: {value}. {detail}")


def validate_body(ctx: RequestContext, body: Any) -> dict:
    """The os-migrateLive JSON schemas of 2.1, 2.25, 2.30 and 2.68."""
    if not isinstance(body, dict):
        raise _invalid("os-migrateLive", body,
                       f"{body!r} is not of type 'object'")
    required = ["block_migration", "host"]
    if not ctx.at_least("2.25"):
        required.insert(1, "disk_over_commit")
    allowed = set(required)
    if ctx.at_least("2.30") and not ctx.at_least("2.68"):
        allowed.add("force")
    for key in required:
        if key not in body:
            raise _invalid("os-migrateLive", body,
                           f"{key!r} is a required property")
    unexpected = sorted(set(body) - allowed)
    if unexpected:
        names = ", ".join(repr(key) for key in unexpected)
        raise _invalid("os-migrateLive", body,
                       f"Additional properties are not allowed ({names} "
                       f"{'was' if len(unexpected) == 1 else 'were'} "
                       "unexpected)")
    host = body["host"]
    if host is not None and not isinstance(host, str):
        raise _invalid("host", host,
                       f"{host!r} is not of type 'string', 'null'")
    if host == "":
        raise _invalid("host", host, "'' is too short")
    for key in ("block_migration", "disk_over_commit", "force"):
        choices = BOOLEANS
        if key == "block_migration" and ctx.at_least("2.25"):
            choices += ("auto",)
        # jsonschema's enum tells True from 1, unlike Python's ==
        if key in body and not any(type(body[key]) is type(choice)
                                   and body[key] == choice
                                   for choice in choices):
            raise _invalid(key, body[key],
                           f"{body[key]!r} is not one of {list(choices)}")
    return body


def migrate_live(state: State, ctx: RequestContext, server: Server,
                 body: dict) -> None:
    """Body already validated (validate_body); 202, no body."""
    host = body["host"]
    rule = "migrate_live:host" if host else "migrate_live"
    compute.require_admin(ctx, f"os_compute_api:os-migrate-server:{rule}")
    forced = _forced(ctx, body, host)
    compute.check_state(server, "os-migrateLive", MIGRATABLE_VM_STATES)
    if host and host not in state.computes:
        raise errors.bad_request(f"Compute host {host} could not be found.")
    migration = LiveMigration(state, server, host, forced,
                              body["block_migration"])
    migration.accept(synchronous=not ctx.at_least("2.34"))


def _forced(ctx: RequestContext, body: dict, host: str | None) -> bool:
    """Whether the scheduler is bypassed: a host given before 2.30, or
    with force (2.30 to 2.67)."""
    if not ctx.at_least("2.30"):
        return bool(host)
    force = parse_bool(body.get("force", False), "force")
    if force and not host:
        raise errors.bad_request("Can't force to a non-provided destination")
    return force


# -- the source compute's executor ----------------------------------------
def _running(state: State, host: str | None) -> bool:
    service = state.computes.get(host or "")
    return service is not None and service.running


def _executing(state: State, role: str, host: str) -> int:
    """Live migrations holding a slot, from (role "source") or to
    ("dest") the host."""
    return sum(1 for m in state.migrations
               if m.migration_type == "live-migration"
               and m.status in EXECUTING
               and getattr(m, f"{role}_compute") == host)


def start_queued(state: State, host: str) -> None:
    """The host's executor starts queued migrations while it has a free
    slot."""
    if not _running(state, host):
        return
    limit = state.max_live_migrations.get(host, 1) or ZERO_LIMIT
    for waiting in [q for q in state.live_migration_queue
                    if q.migration.source_compute == host]:
        if _executing(state, "source", host) >= limit:
            return
        state.live_migration_queue.remove(waiting)
        waiting.start()


class LiveMigration:
    def __init__(self, state: State, server: Server, host: str | None,
                 forced: bool, block_migration: Any) -> None:
        self.state = state
        self.server = server
        self.requested_host = host
        self.forced = forced
        self.outcome = server.live_migration_outcome
        self.latency = state.one_evacuation_latency()
        # The conductor knows the destination only when it is forced.
        self.migration = Migration(
            state.next_id(), str(uuid.uuid4()), server.uuid, server.host,
            server.node, host if forced else None, None, None, "accepted",
            "live-migration", server.user_id, server.project_id, utcnow())
        self.call: dict[str, Any] = {
            "uuid": server.uuid, "source": server.host, "target": host,
            "force": forced, "block_migration": block_migration,
            "dest": None, "time": time.time()}

    # -- API side --------------------------------------------------------
    def accept(self, synchronous: bool) -> None:
        state, server = self.state, self.server
        server.task_state = "migrating"
        server.fault = None
        state.touch(server)
        state.migrations.append(self.migration)
        state.live_migrate_calls.append(self.call)
        if synchronous:
            self._conduct(synchronous=True)
        else:
            state.call_later(0.2 * self.latency, self._conduct, False)

    # -- helpers ---------------------------------------------------------
    def _set_status(self, status: str) -> None:
        self.state.set_migration_status(self.migration, status)

    def _may_continue(self) -> bool:
        """Both computes run, and nobody reset the instance meanwhile."""
        return (self.server.task_state == "migrating"
                and _running(self.state, self.migration.source_compute)
                and _running(self.state, self.migration.dest_compute))

    # -- conductor and scheduler -----------------------------------------
    def _conduct(self, synchronous: bool) -> None:
        if self.server.task_state != "migrating":
            return
        refusal = self._refusal()
        if refusal is not None:
            self._refuse(refusal, synchronous)
            return
        self._set_status("queued")
        self.state.live_migration_queue.append(self)
        start_queued(self.state, self.migration.source_compute)

    def _refusal(self) -> str | None:
        """LiveMigrationTask._execute(): why it is refused, if it is;
        else the destination is chosen."""
        source = self.server.host
        if not self.state.computes[source].up:
            return f"Compute service of {source} is unavailable at this time."
        if self.forced:
            dest = self.requested_host
            if dest == source:
                return (f"Unable to migrate instance ({self.server.uuid}) "
                        f"to current host ({source}).")
            if not self.state.computes[dest].up:
                return (f"Compute service of {dest} is unavailable at this "
                        "time.")
        else:
            dest = scheduler.select_destination(
                self.state, self.server, self.migration, self.requested_host)
            if dest is None:
                return NO_VALID_HOST
        if self.outcome == "error":
            if not self.forced:
                return NO_VALID_HOST
            return (f"Migration pre-check error: {dest} refused "
                    "(set_live_migration_outcome error)")
        self.migration.dest_compute = dest
        self.migration.dest_node = node_name(dest)
        self.migration.dest_host = self.state.computes[dest].ip
        self.call["dest"] = dest
        return None

    def _refuse(self, message: str, synchronous: bool) -> None:
        """The conductor's failure leaves the instance as it was."""
        server = self.server
        self._set_status("error")
        server.task_state = None
        server.fault = {"code": 500, "message": message,
                        "created": utcnow()}
        self.state.touch(server)
        if synchronous:
            raise errors.bad_request(message)

    # -- source compute --------------------------------------------------
    def start(self) -> None:
        """Given a slot of the source's executor."""
        if not self._may_continue():
            return
        self._set_status("preparing")
        peaks = self.state.live_migration_peaks
        for role in ("source", "dest"):
            host = getattr(self.migration, f"{role}_compute")
            peaks[role][host] = max(peaks[role].get(host, 0),
                                    _executing(self.state, role, host))
        self.state.call_later(0.4 * self.latency, self._run)

    def _run(self) -> None:
        if not self._may_continue():
            return
        self._set_status("running")
        if self.outcome != "hang":
            self.state.call_later(0.4 * self.latency, self._finish)

    def _finish(self) -> None:
        if not self._may_continue():
            return
        server, migration = self.server, self.migration
        if self.outcome == "failed":
            self._set_status("failed")  # rolled back: still on the source
        else:
            assert migration.dest_compute and migration.dest_node
            server.host = migration.dest_compute
            server.node = migration.dest_node
            self._set_status("completed")
        server.task_state = None
        self.state.touch(server)
        start_queued(self.state, migration.source_compute)
