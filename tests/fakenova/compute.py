"""Server actions, with the checks nova-api makes before accepting them.

Callers hold ``state.lock``.
"""

from __future__ import annotations

import secrets
from typing import Any

from tests.fakenova import errors
from tests.fakenova import evacuation
from tests.fakenova.admin import parse_bool
from tests.fakenova.errors import RequestContext
from tests.fakenova.state import POWER_FOR_VM_STATE
from tests.fakenova.state import Server
from tests.fakenova.state import State

EVACUABLE_VM_STATES = ("active", "stopped", "error")


def get_instance(state: State, ctx: RequestContext,
                 server_id: str) -> Server:
    """Non-admins only see their project's servers (project_only)."""
    server = state.servers.get(server_id)
    if server is None or (not ctx.is_admin
                          and server.project_id != ctx.project_id):
        raise errors.not_found(f"Instance {server_id} could not be found.")
    return server


def require_admin(ctx: RequestContext, rule: str) -> None:
    if not ctx.is_admin:
        raise errors.policy_denied(rule)


def check_state(server: Server, action: str, vm_states: tuple[str, ...],
                task_states: tuple[str | None, ...] | None = (None,)
                ) -> None:
    """compute.api check_instance_state(): vm_state, then task_state
    (``task_states=None``: any task_state)."""
    if server.vm_state not in vm_states:
        raise errors.invalid_state(server.uuid, action, "vm_state",
                                   server.vm_state)
    if task_states is not None and server.task_state not in task_states:
        raise errors.invalid_state(server.uuid, action, "task_state",
                                   server.task_state)


def check_lock(ctx: RequestContext, server: Server) -> None:
    """compute.api check_instance_lock(): admins pass."""
    if server.locked and not ctx.is_admin:
        raise errors.conflict(f"Instance {server.uuid} is locked")


def validate_lock_body(ctx: RequestContext, body: Any) -> Any:
    """2.73 schema: null or {"locked_reason": "1..255 chars"}."""
    if not ctx.at_least("2.73") or body is None:
        return body
    if not isinstance(body, dict) or set(body) - {"locked_reason"}:
        raise errors.bad_request(
            f"Invalid input for field/attribute lock. Value: {body}.")
    reason = body.get("locked_reason", "-")
    if not isinstance(reason, str) or not 0 < len(reason) <= 255:
        raise errors.bad_request(
            f"Invalid input for field/attribute lock. Value: {body}.")
    return body


def lock(state: State, ctx: RequestContext, server: Server,
         body: Any) -> None:
    reason = None
    if ctx.at_least("2.73") and body is not None:
        reason = body.get("locked_reason")
    is_owner = server.project_id == ctx.project_id
    if server.locked and is_owner:
        return  # Nova: an owner re-lock is a no-op
    server.locked_by = "owner" if is_owner else "admin"
    if reason:
        server.locked_reason = reason
    state.touch(server)
    state.record_lock_event(server, "lock", server.locked_by,
                            server.locked_reason)


def unlock(state: State, ctx: RequestContext, server: Server) -> None:
    expected = "owner" if server.project_id == ctx.project_id else "admin"
    if server.locked_by and server.locked_by != expected:
        require_admin(ctx, "os_compute_api:os-lock-server:unlock:"
                      "unlock_override")
    if not server.locked:
        return
    reason = server.locked_reason
    server.locked_by = None
    server.locked_reason = None
    state.touch(server)
    state.record_lock_event(server, "unlock", expected, reason)


def validate_reset_state_body(ctx: RequestContext, body: Any) -> dict:
    wanted = body.get("state") if isinstance(body, dict) else None
    if wanted not in ("active", "error"):
        raise errors.bad_request(
            "Invalid input for field/attribute state. Value: "
            f"{wanted}. {wanted!r} is not one of ['active', 'error']")
    return body


def reset_state(state: State, ctx: RequestContext, server: Server,
                body: dict) -> None:
    require_admin(ctx, "os_compute_api:os-admin-actions:reset_state")
    server.vm_state = body["state"]
    server.task_state = None
    state.touch(server)


def stop(state: State, ctx: RequestContext, server: Server) -> None:
    check_lock(ctx, server)
    check_state(server, "stop", ("active", "error"))
    _power_transition(state, server, "powering-off", "stopped")


def start(state: State, ctx: RequestContext, server: Server) -> None:
    check_lock(ctx, server)
    check_state(server, "start", ("stopped",))
    _power_transition(state, server, "powering-on", "active")


def pause(state: State, ctx: RequestContext, server: Server) -> None:
    check_lock(ctx, server)
    check_state(server, "pause", ("active",))
    _power_transition(state, server, "pausing", "paused")


def suspend(state: State, ctx: RequestContext, server: Server) -> None:
    check_lock(ctx, server)
    check_state(server, "suspend", ("active",))
    _power_transition(state, server, "suspending", "suspended")


def confirm_resize(state: State, ctx: RequestContext,
                   server: Server) -> None:
    """The source host of the resize (not modelled: always up) frees the
    old flavor; the instance keeps the new one, on its host."""
    check_lock(ctx, server)
    check_state(server, "confirmResize", ("resized",))
    server.task_state = None
    state.call_later(state.evacuation_latency / 2, _finish_confirm, state,
                     server)


def _finish_confirm(state: State, server: Server) -> None:
    if server.vm_state != "resized":
        return
    server.vm_state = ("stopped" if server.power_state != POWER_FOR_VM_STATE[
        "active"] else "active")
    state.touch(server)


def _power_transition(state: State, server: Server, task_state: str,
                      vm_state: str) -> None:
    server.task_state = task_state
    state.touch(server)
    service = state.computes.get(server.host)
    if service is None or not service.running:
        return  # the RPC cast is lost: task_state stays set for ever
    state.call_later(state.evacuation_latency / 2, _finish_power, state,
                     server, task_state, vm_state)


def _finish_power(state: State, server: Server, task_state: str,
                  vm_state: str) -> None:
    service = state.computes.get(server.host)
    if server.task_state != task_state or not (service and service.running):
        return
    server.vm_state = vm_state
    server.power_state = POWER_FOR_VM_STATE[vm_state]
    server.task_state = None
    state.touch(server)


def evacuate(state: State, ctx: RequestContext, server: Server,
             body: dict) -> dict | None:
    """Body already validated (validate_evacuate_body)."""
    require_admin(ctx, "os_compute_api:os-evacuate")
    host = body.get("host")
    force = False
    if ctx.at_least("2.29"):
        force = parse_bool(body.get("force", False), "force")
        if force and not host:
            raise errors.bad_request(
                "Can't force to a non-provided destination")
    password = _evacuate_password(ctx, body)
    if host is not None and host not in state.computes:
        raise errors.not_found(f"Compute host {host} not found.")
    if server.host == host:
        raise errors.bad_request("The target host can't be the same one.")
    # nova 34: check_instance_state(task_state=None), so a task stuck on
    # the dead host does not block the evacuation.
    check_state(server, "evacuate", EVACUABLE_VM_STATES, task_states=None)
    if server.has_vtpm:
        # nova/compute/api.py: @reject_vtpm_instances on evacuate.
        raise errors.conflict("Operation 'evacuate' not supported for "
                              "vTPM-enabled instance.")
    source = state.computes.get(server.host)
    if source is not None and source.up:
        raise errors.bad_request(
            f"Compute service of {server.host} is still in use.")
    evacuation.Evacuation(state, ctx, server, host, force).accept()
    if not ctx.at_least("2.14"):
        return {"adminPass": password}
    return None  # 200 with an empty body from 2.14


def _evacuate_password(ctx: RequestContext, body: dict) -> str | None:
    if ctx.at_least("2.14"):
        return body.get("adminPass") or secrets.token_urlsafe(9)
    shared = parse_bool(body["onSharedStorage"], "onSharedStorage")
    if "adminPass" in body:
        if shared:
            raise errors.bad_request(
                "admin password can't be changed on existing disk")
        return body["adminPass"]
    return None if shared else secrets.token_urlsafe(9)


def validate_evacuate_body(ctx: RequestContext, body: Any) -> dict:
    """The evacuate JSON schemas of 2.1, 2.14, 2.29 and 2.68."""
    if not isinstance(body, dict):
        raise errors.bad_request(
            f"Invalid input for field/attribute evacuate. Value: {body}. "
            f"{body!r} is not of type 'object'")
    allowed = {"host", "adminPass"}
    if not ctx.at_least("2.14"):
        allowed.add("onSharedStorage")
        if "onSharedStorage" not in body:
            raise errors.bad_request(
                "Invalid input for field/attribute evacuate. Value: "
                f"{body}. 'onSharedStorage' is a required property")
    elif ctx.at_least("2.29") and not ctx.at_least("2.68"):
        allowed.add("force")
    unexpected = sorted(set(body) - allowed)
    if unexpected:
        names = ", ".join(repr(key) for key in unexpected)
        raise errors.bad_request(
            f"Invalid input for field/attribute evacuate. Value: {body}. "
            f"Additional properties are not allowed ({names} "
            f"{'was' if len(unexpected) == 1 else 'were'} unexpected)")
    if "host" in body and not isinstance(body["host"], str):
        raise errors.bad_request(
            "Invalid input for field/attribute host. Value: "
            f"{body['host']}. {body['host']!r} is not of type 'string'")
    return body
