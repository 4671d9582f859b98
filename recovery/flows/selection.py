"""Which instances of a failed host are evacuated, and why others are not.

Every vm_state Nova can hold has a decision (``VM_STATE_DECISIONS``): a
guest its owner wanted kept comes back on a live host in the closest state
that makes sense; what Nova cannot move is skipped with a reason and a hint
for the operator, never silently left. So is an instance Nova cannot
evacuate in any state (a vTPM: ``recovery.evacuable.RULES``), before
anything is tried.
"""

import dataclasses

from recovery import evacuable
from recovery.flows.context import Settings
from recovery.models import Server
from recovery.models import VmState

# Nova evacuates only these vm_states (whatever the task_state).
EVACUABLE_VM_STATES = frozenset({VmState.ACTIVE, VmState.STOPPED,
                                 VmState.ERROR})


@dataclasses.dataclass(frozen=True)
class Decision:
    """What recovery does with an instance in one vm_state."""

    # Evacuated (True) or skipped (False, with ``reason`` and ``hint``).
    evacuate: bool
    # The state it is brought back to on the destination (None: the one
    # Nova gives it, e.g. a confirmed resize's).
    final_state: VmState | None = None
    # What is done before the evacuate, which Nova refuses in this state:
    # RESET (to active) or CONFIRM_RESIZE.
    prepare: str | None = None
    reason: str = ""
    hint: str = ""


RESET = "reset-state to active"
CONFIRM_RESIZE = "confirm the resize"


def _keep(state: VmState) -> Decision:
    return Decision(evacuate=True, final_state=state)


def _skip(reason: str, hint: str) -> Decision:
    return Decision(evacuate=False, reason=reason, hint=hint)


VM_STATE_DECISIONS: dict[VmState, Decision] = {
    VmState.ACTIVE: _keep(VmState.ACTIVE),
    VmState.STOPPED: _keep(VmState.STOPPED),
    VmState.ERROR: _keep(VmState.ERROR),
    # Nova evacuates neither: reset to active (the guest's memory on the
    # dead host is lost anyway), evacuate, then pause or suspend again.
    VmState.PAUSED: Decision(evacuate=True, final_state=VmState.PAUSED,
                             prepare=RESET),
    VmState.SUSPENDED: Decision(evacuate=True,
                                final_state=VmState.SUSPENDED,
                                prepare=RESET),
    # Rescue is a temporary mode of a host that is gone: the guest comes
    # back from its own disk, unrescued.
    VmState.RESCUED: Decision(evacuate=True, final_state=VmState.ACTIVE,
                              prepare=RESET),
    # VERIFY_RESIZE with the new flavor running on the failed host (the
    # resize's destination): a revert would run there, a confirm runs on
    # the source and frees the old flavor. Confirmed, it is active (or
    # stopped) with the flavor it ran on, and evacuated as such.
    VmState.RESIZED: Decision(evacuate=True, prepare=CONFIRM_RESIZE),
    VmState.BUILDING: _skip(
        "still building: it never ran on the failed host",
        "delete it and boot it again"),
    VmState.SHELVED: _skip(
        "shelved by its owner: it is not running, and Nova unshelves it "
        "on its host only",
        "bring the host back, or offload it once the host is back "
        "(openstack server shelve --offload); unshelving then schedules "
        "it on a live host"),
    VmState.SHELVED_OFFLOADED: _skip(
        "shelved and offloaded: it is not on the failed host, nothing to "
        "evacuate",
        "unshelve it when it is needed: Nova schedules it on a live host"),
    VmState.SOFT_DELETED: _skip(
        "soft-deleted by its owner: recovery does not bring it back",
        "if the owner wants it kept, restore it (openstack server restore) "
        "once the host is back; otherwise Nova reclaims it"),
    VmState.DELETED: _skip("deleted", "nothing to do"),
}

UNKNOWN_STATE_HINT = ("reset it to active or error (openstack server set "
                      "--state) and run recovery again")


def decision_for(vm_state: str) -> Decision:
    """The decision for ``vm_state`` (Nova's, or a journal's original
    state); an unknown one is skipped."""
    found = VM_STATE_DECISIONS.get(VmState(vm_state))
    if found is not None:
        return found
    return _skip(f"vm_state {vm_state!r} is not known to recovery",
                 UNKNOWN_STATE_HINT)


def final_state_for(original_state: str) -> VmState | None:
    """The state an instance evacuated from ``original_state`` is brought
    back to; None: the one it has once evacuated."""
    state = VmState(original_state)
    decision = VM_STATE_DECISIONS.get(state)
    if decision is None:
        return state
    return decision.final_state


def plan_steps(original_state: str) -> tuple[list[str], list[str]]:
    """What a dry run says is done before and after the evacuate of an
    instance in ``original_state`` (beyond restoring active/stopped)."""
    decision = decision_for(original_state)
    before = [decision.prepare] if decision.prepare else []
    again = {VmState.PAUSED: "then pause",
             VmState.SUSPENDED: "then suspend"}
    after = [again[decision.final_state]] if (
        decision.final_state in again) else []
    return before, after


def is_ha_enabled(server: Server, settings: Settings) -> bool:
    value = server.metadata.get(settings.ha_metadata_key, "")
    return value.strip().lower() == "true"


def skip_reason(server: Server, settings: Settings) -> str | None:
    """Why ``server`` is not evacuated (with what to do), or None when it
    is."""
    decision = decision_for(server.vm_state)
    if not decision.evacuate:
        return f"{decision.reason}; to recover it: {decision.hint}"
    if (server.vm_state is VmState.ERROR
            and settings.ignore_error_instances):
        return ("in error state and [host_failure] "
                "ignore_instances_in_error_state is true")
    if not settings.evacuate_all_instances and not is_ha_enabled(
            server, settings):
        return (f"not HA-enabled (metadata {settings.ha_metadata_key} is "
                f"not 'True') and [host_failure] evacuate_all_instances "
                f"is false")
    rule = evacuable.blocking(server)
    if rule is not None:
        return (f"Nova cannot evacuate it: {rule.reason}; to recover it: "
                f"{rule.hint}")
    return None


def order_for_recovery(servers: list[Server],
                       settings: Settings) -> list[Server]:
    """HA-enabled instances first, then the rest, each in listed order."""
    return sorted(servers, key=lambda s: not is_ha_enabled(s, settings))
