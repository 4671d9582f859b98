"""A small Placement under ``/placement``: each compute node is a
resource provider named after its hypervisor, whose inventory is
``capacity`` instances of the one flavor (1 VCPU, 512 MB, 1 GB), as the
fake scheduler counts it; used is what it holds, moves to it included.

Only what recovery reads: ``GET /resource_providers`` and ``GET
/allocation_candidates`` (its ``provider_summaries``).
"""

from __future__ import annotations

import collections
from typing import Any

from tests.fakenova.state import FINAL_MIGRATION_STATUSES
from tests.fakenova.state import State
from tests.fakenova.state import node_name
from tests.fakenova.views import FLAVOR

PREFIX = "/placement"
# A host without a capacity holds this many instances.
UNLIMITED = 1000
CLASSES = {"VCPU": FLAVOR["vcpus"], "MEMORY_MB": FLAVOR["ram"],
           "DISK_GB": FLAVOR["disk"]}


def respond(state: State, method: str, path: str,
            query: dict[str, str]) -> tuple[int, Any]:
    """The answer to a request below ``/placement``."""
    if method != "GET":
        return 405, {"errors": [{"status": 405, "title": "Not Allowed"}]}
    with state.lock:
        if path == f"{PREFIX}/resource_providers":
            return 200, {"resource_providers": [
                {"uuid": s.uuid, "name": node_name(s.host)}
                for s in state.computes.values()]}
        if path == f"{PREFIX}/allocation_candidates":
            return 200, _candidates(state, query)
    return 404, {"errors": [{"status": 404, "title": "Not Found"}]}


def _candidates(state: State, query: dict[str, str]) -> dict[str, Any]:
    wanted = dict(part.split(":") for part in
                  query.get("resources", "").split(",") if part)
    held = _held(state)
    summaries = {}
    for service in state.computes.values():
        capacity = (UNLIMITED if service.capacity is None
                    else service.capacity)
        resources = {rc: {"capacity": capacity * size,
                          "used": held[service.host] * size}
                     for rc, size in CLASSES.items()}
        if all(resources[rc]["capacity"] - resources[rc]["used"]
               >= int(amount) for rc, amount in wanted.items()):
            summaries[service.uuid] = {"resources": resources}
    return {"allocation_requests": [], "provider_summaries": summaries}


def _held(state: State) -> collections.Counter[str]:
    """The instances each host holds, moves to it included: one pass
    over the servers, whatever the number of hosts."""
    held = collections.Counter(s.host for s in state.servers.values())
    held.update(m.dest_compute for m in state.migrations
                if m.dest_compute is not None
                and m.status not in FINAL_MIGRATION_STATUSES)
    return held


def endpoint_for(compute_endpoint: str) -> str:
    """Placement beside a compute API at ``.../v2.1`` (the fake's, and
    the real Nova harness's)."""
    return compute_endpoint.rsplit("/v2.1", 1)[0] + PREFIX
