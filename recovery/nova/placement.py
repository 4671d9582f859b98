"""Placement, read through the facade's session: what each compute node
has free."""

from collections.abc import Callable
from typing import Any

from recovery.models import Need

# Placement's: provider summaries with every resource class (1.27).
PLACEMENT_MICROVERSION = "1.29"
PLACEMENT_RESOURCES = ("VCPU", "MEMORY_MB", "DISK_GB")


class Placement:
    """Placement's answers, through a keystoneauth1 adapter for it."""

    def __init__(self, adapter: Any):
        self._adapter = adapter

    def free_room(self, call: Callable[..., Any]) -> dict[str, Need]:
        """What each compute node has free of VCPU, MEMORY_MB and
        DISK_GB, by its resource provider's name (its hypervisor host
        name), as Placement counts it: allocation ratios and reserved
        amounts applied. Two requests, whatever the number of hosts;
        ``call`` is the facade's ``_call``."""
        version = {"microversion": PLACEMENT_MICROVERSION}

        def get(what: str, path: str, kind: str) -> Any:
            return call(what, self._adapter.get, path, kind=kind,
                        **version).json()

        names = get("list Placement's resource providers",
                    "/resource_providers", "placement.resource_providers")
        # Every provider with room for the least of each class reports
        # its capacity and use: one request for all of them.
        query = ",".join(f"{rc}:1" for rc in PLACEMENT_RESOURCES)
        body = get("ask Placement for the hosts with room",
                   f"/allocation_candidates?resources={query}",
                   "placement.allocation_candidates")
        name = {p["uuid"]: p["name"] for p in names["resource_providers"]}
        room = {}
        for uuid, summary in body["provider_summaries"].items():
            free = {rc: max(0, int(r["capacity"]) - int(r["used"]))
                    for rc, r in summary["resources"].items()}
            if uuid in name:
                room[name[uuid]] = Need(*(free.get(rc, 0)
                                          for rc in PLACEMENT_RESOURCES))
        return room
