"""Which instances of a failed host are evacuated, and why others are not."""

from recovery.flows.context import Settings
from recovery.models import Server

# Nova evacuates only these vm_states.
EVACUABLE_VM_STATES = frozenset({"active", "stopped", "error"})


def is_ha_enabled(server: Server, settings: Settings) -> bool:
    value = server.metadata.get(settings.ha_metadata_key, "")
    return value.strip().lower() == "true"


def skip_reason(server: Server, settings: Settings) -> str | None:
    """Why ``server`` is not evacuated, or None when it is."""
    if server.vm_state not in EVACUABLE_VM_STATES:
        return f"vm_state {server.vm_state!r} cannot be evacuated by Nova"
    if server.vm_state == "error" and settings.ignore_error_instances:
        return ("in error state and [host_failure] "
                "ignore_instances_in_error_state is true")
    if not settings.evacuate_all_instances and not is_ha_enabled(
            server, settings):
        return (f"not HA-enabled (metadata {settings.ha_metadata_key} is "
                f"not 'True') and [host_failure] evacuate_all_instances "
                f"is false")
    return None


def order_for_recovery(servers: list[Server],
                       settings: Settings) -> list[Server]:
    """HA-enabled instances first, then the rest, each in listed order."""
    return sorted(servers, key=lambda s: not is_ha_enabled(s, settings))
