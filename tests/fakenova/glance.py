"""A small Glance under ``/image``: the images instances boot from, with
their properties, as Glance's v2 API shows one (properties at the top
level, beside the image's own fields).

Only what recovery reads: ``GET /v2/images/{id}``.
"""

from __future__ import annotations

import re
from typing import Any

from tests.fakenova.state import State

PREFIX = "/image"
_SHOW = re.compile(rf"^{PREFIX}/v2/images/(?P<id>[^/]+)$")


def respond(state: State, method: str, path: str) -> tuple[int, Any]:
    """The answer to a request below ``/image``."""
    match = _SHOW.match(path)
    if method != "GET" or match is None:
        return 404, {"message": "The resource could not be found."}
    with state.lock:
        properties = state.images.get(match["id"])
        if properties is None:
            return 404, {"message": f"No image found with ID {match['id']}"}
        return 200, {"id": match["id"], "status": "active",
                     "visibility": "public", "disk_format": "qcow2",
                     "container_format": "bare", **properties}


def endpoint_for(compute_endpoint: str) -> str:
    """Glance beside a compute API at ``.../v2.1``."""
    return compute_endpoint.rsplit("/v2.1", 1)[0] + PREFIX
